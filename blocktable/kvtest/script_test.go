package kvtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/stretchr/testify/require"
)

func TestScenarioFilesAreInCanonicalForm(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 6)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Equal(t, string(src), kvtest.Reformat(string(src)), "%s: parse and format must round-trip", f)
	}
}

func writeScenario(t *testing.T, src string) string {
	path := filepath.Join(t.TempDir(), "s.txt")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

const wrongScenario = `# Two wrong expectations and one right.
admit r1 prompt=0..5
----
ok hit=0 new=2 tokens=6
state free=14 evictable=0 held=2 cached=1 seqs=1

expect free=13 cached=1

finish r1
----
ok
state free=0 evictable=1 held=0 cached=1 seqs=0
`

func TestRunFileReportsEveryMismatch(t *testing.T) {
	fake := &fakeTB{}
	path := writeScenario(t, wrongScenario)
	kvtest.RunFile(fake, path)
	fake.finish()
	require.Empty(t, fake.fatals)
	require.Len(t, fake.errors, 2, fake.report())
	require.Contains(t, fake.errors[0], "s.txt:7: expect free=13 cached=1: free: got 14, want 13")
	require.Contains(t, fake.errors[1], "s.txt:9: finish r1")
	require.Contains(t, fake.errors[1], "state free=15 evictable=1")
}

func TestRewriteFixesTheFile(t *testing.T) {
	path := writeScenario(t, wrongScenario+"\nadmit r2 prompt=7..9\n\nabort r2\n")
	restore := kvtest.SetRewrite(true)
	kvtest.RunFile(t, path)
	restore()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, `# Two wrong expectations and one right.
admit r1 prompt=0..5
----
ok hit=0 new=2 tokens=6
state free=14 evictable=0 held=2 cached=1 seqs=1

expect free=14 cached=1

finish r1
----
ok
state free=15 evictable=1 held=0 cached=1 seqs=0

admit r2 prompt=7..9
----
ok hit=0 new=1 tokens=3
state free=14 evictable=1 held=1 cached=1 seqs=1

abort r2
----
ok
state free=15 evictable=1 held=0 cached=1 seqs=0
`, string(got))
	fake := &fakeTB{}
	kvtest.RunFile(fake, path)
	fake.finish()
	require.Empty(t, fake.report(), "a rewritten file passes")
}

func TestRunFileStopsOnAMalformedCommand(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"frobnicate r1\n", `unknown command "frobnicate"`},
		{"admit r1\n", "admit needs prompt=TOKENS"},
		{"admit r1 prompt=5..1\n", "runs backwards"},
		{"admit r.1 prompt=1\n", "bad sequence name"},
		{"append r1 2 tokens=1\n", "not both"},
		{"evict many\n", `"many": want an integer`},
		{"admit r1 prompt=1 colour=red\n", "unknown argument colour="},
		{"tick 1 2\n", `unexpected "2"`},
		{"admit r1 prompt=1 prompt=2\n", "prompt given twice"},
		{"expect r1\n", "is not key=value"},
		{"expect wombats=3\n", `unknown key "wombats"`},
		{"tick\n----\nclock=1\n\nconfig blocks=5\n", "config must come before"},
		{"config preemption=random\n", "unknown"},
		{"config blocks=1\n", "no usable block"},
	} {
		fake := &fakeTB{}
		kvtest.RunFile(fake, writeScenario(t, tt.src))
		fake.finish()
		require.Len(t, fake.fatals, 1, "%q: %s", tt.src, fake.report())
		require.Contains(t, fake.fatals[0], tt.want, tt.src)
	}
}

func TestRunFileWantsAnOutputBlock(t *testing.T) {
	fake := &fakeTB{}
	kvtest.RunFile(fake, writeScenario(t, "tick\n"))
	fake.finish()
	require.Len(t, fake.errors, 1)
	require.Contains(t, fake.errors[0], "-kvtest.rewrite")
}

func TestExecAndValue(t *testing.T) {
	r := kvtest.NewRunner(t)
	out, err := r.Exec("admit r1 prompt=0..9 lookahead=2")
	require.NoError(t, err)
	require.Equal(t, "ok hit=0 new=3 tokens=10\nstate free=13 evictable=0 held=3 cached=2 seqs=1", out)
	for key, want := range map[string]string{
		"r1.tokens": "10", "r1.reserved": "2", "r1.committed": "2", "r1.table": "1,2,3", "r1.state": "running",
		"r2.state": "gone", "refs.1": "2", "refs.3": "1", "capacity": "16", "hitrate": "0.0000", "lookups": "1",
	} {
		got, err := r.Value(key)
		require.NoError(t, err)
		require.Equal(t, want, got, key)
	}
	_, err = r.Exec("expect free=1")
	require.True(t, kvtest.IsExpectFailure(err))
	_, err = r.Exec("expect r1.colour=1")
	require.Error(t, err)
	require.False(t, kvtest.IsExpectFailure(err))
	out, err = r.Exec("abort r1")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "ok\n"))
}

func TestParseTokens(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want []int32
		err  string
	}{
		{spec: "7", want: []int32{7}},
		{spec: "0..3,9", want: []int32{0, 1, 2, 3, 9}},
		{spec: "5*3,-1", want: []int32{5, 5, 5, -1}},
		{spec: "-2..0", want: []int32{-2, -1, 0}},
		{spec: "", err: "bad token"},
		{spec: "3..1", err: "backwards"},
		{spec: "0..99999", err: "more than"},
		{spec: "1*-1", err: "out of range"},
		{spec: "x", err: "bad token"},
	} {
		got, err := kvtest.ParseTokens(tt.spec)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.spec)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got, tt.spec)
		if !strings.Contains(tt.spec, "*") {
			require.Equal(t, tt.spec, kvtest.FormatTokens(got))
		}
	}
	require.Panics(t, func() { kvtest.MustTokens("?") })
}
