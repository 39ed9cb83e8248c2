package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules every subcommand follows (issue 20): --help on stdout with status 0, every
// flag written --name in the help, a bad flag reported on one line that names it plus a
// pointer to --help with status 2, and the same flags with the same ranges wherever they
// mean the same thing.

// quick are arguments that make each subcommand run fast and succeed.
var quick = map[string][]string{
	"demo":  nil,
	"hash":  {"--seed", "0", "--block-size", "2", "1", "2"},
	"plan":  {"--model", "llama-3.1-8b", "--gpu", "h100"},
	"fleet": {"--model", "llama-3.1-8b", "--gpu", "h100", "--concurrent", "100", "--avg-context", "4k"},
	"sim":   {"--num-prompts", "30", "--kv-budget-tokens", "6k", "--block-size-sweep", "", "--no-charts", "--no-progress"},

	"fleet-sim": {"--workload", "sysprompt", "--servers", "2", "--requests-per-server", "10"},
}

func TestEverySubcommandIsCovered(t *testing.T) {
	for _, name := range commandNames() {
		assert.Contains(t, quick, name, "add the subcommand %s to the rules tests", name)
	}
	for name, args := range quick {
		code, _, errOut := runKV(append([]string{name}, args...)...)
		assert.Equal(t, 0, code, "%s: %s", name, errOut)
	}
}

func TestHelpExitsZeroOnStdout(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z][a-z-]{2,}`)
	for _, name := range commandNames() {
		for _, h := range []string{"--help", "-h", "-help"} {
			code, out, errOut := runKV(name, h)
			assert.Equal(t, 0, code, "%s %s", name, h)
			assert.Empty(t, errOut, "%s %s", name, h)
			assert.True(t, strings.HasPrefix(out, "usage: kvpage"), "%s %s: %.80q", name, h, out)
			assert.Contains(t, out, "Flags:\n  --")
			assert.NotRegexp(t, singleDash, out, "%s: the help writes --flag", name)
			assert.Contains(t, out, "Exit status:")
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := runKV(args...)
		assert.Equal(t, 0, code, args)
		assert.Empty(t, errOut)
		assert.Contains(t, out, "Subcommands:", "kvpage %v shows the top-level help, not sim's", args)
		for _, name := range commandNames() {
			assert.Contains(t, out, "  "+name+" ")
		}
	}
	code, out, _ := runKV("help", "plan")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "usage: kvpage plan"))
	code, out, errOut := runKV("nosuch")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "kvpage: unknown subcommand \"nosuch\" (demo, fleet, fleet-sim, hash, plan, sim)\nsee kvpage --help\n", errOut)
}

// badInputs are, per subcommand, inputs that must be refused with status 2 and a short
// message naming the flag.
var badInputs = []struct {
	cmd  string
	args []string
	want string
	raw  bool // args alone, without the subcommand's quick arguments
}{
	{"demo", []string{"--blocks", "2"}, "--blocks must be between 5 and", false},
	{"hash", []string{"--block-size", "100000"}, "--block-size must be between 1 and 65536 tokens", false},
	{"hash", []string{"--block-size", "2", "x"}, `bad token "x"`, false},
	{"plan", []string{"--block-size", "100000"}, "--block-size must be between 1 and 65536 tokens", false},
	{"fleet", []string{"--block-size", "100000"}, "--block-size must be between 1 and 65536 tokens", false},
	{"sim", []string{"--block-size", "100000"}, "--block-size must be between 1 and 65536 tokens", false},
	{"sim", []string{"--block-size-sweep", "100000"}, "between 1 and 65536 tokens", false},
	{"fleet-sim", []string{"--block-size", "100000"}, "--block-size must be between 1 and 65536 tokens", false},
	{"fleet-sim", []string{"--servers", "0"}, "--servers: \"0\" is not a fleet size", false},
	{"fleet-sim", []string{"--nope"}, "unknown flag --nope", false},
	{"plan", []string{"--max-model-len", "1"}, "--max-model-len must be between 2 and 2,147,483,647 tokens", false},
	{"fleet", []string{"--max-model-len", "1"}, "--max-model-len must be between 2 and 2,147,483,647 tokens", false},
	{"sim", []string{"--max-model-len", "1"}, "--max-model-len must be between 2 and 2,147,483,647 tokens", false},
	{"sim", []string{"--context", "4G"}, "--max-model-len must be between 2 and 2,147,483,647 tokens", false},
	{"plan", []string{"--max-model-len", "32q"}, "--max-model-len: invalid value \"32q\"", false},
	{"plan", []string{"-tp", "0"}, "--tensor-parallel-size must be between 1 and 1024", false},
	{"sim", []string{"-tp", "0"}, "--tensor-parallel-size must be between 1 and 1024", false},
	{"fleet", []string{"-tp", "two"}, "-tp: invalid value \"two\"", false},
	{"plan", []string{"--gpu-memory", "80XB"}, "--gpu-memory: invalid value \"80XB\"", false},
	{"sim", []string{"--gpu-memory", "80"}, "--gpu-memory must be between 1MiB and 1PiB", false},
	{"plan", []string{"--gpu-memory", "80GB", "--gpu-memory-mib", "81559"}, "give --gpu-memory or --gpu-memory-mib, not both", false},
	{"plan", []string{"--weights-gib", "1e308"}, "--weights-gib 1e+308 is out of range: want a number in [0, 67108864] GiB", false},
	{"fleet", []string{"--overhead-gib", "NaN"}, "--overhead-gib NaN is out of range", false},
	{"sim", []string{"--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization 1.5 is out of range: want a number in (0, 1]", false},
	{"sim", []string{"--watermark", "1"}, "--watermark 1 is out of range", false},
	{"sim", []string{"--step-duration", "-1"}, "--step-duration -1 is out of range", false},
	{"plan", []string{"--kv-bytes-per-token", "0.05MB", "--gpu-memory", "80GB"}, "give the weights with --weights", true},
	{"plan", []string{"--kv-bytes-per-token", "0.05MB", "--weights", "14GB", "--model", "llama-3-8b"}, "give one of --model, --config and --kv-bytes-per-token", false},
	{"plan", []string{"--model", "llama-9"}, `--model: unknown model "llama-9"; closest presets: llama-3-8b`, false},
	{"fleet", []string{"--concurrent", "10", "--avg-context", "8k", "--max-model-len", "4k"}, "--avg-context 8,000 is longer than --max-model-len 4,000", false},
	{"sim", []string{"--trace", "/nonexistent/trace.csv"}, "--trace: open /nonexistent/trace.csv", false},
	{"sim", []string{"--no-charts=false", "--out-dir", "/proc/nope"}, "--out-dir: mkdir /proc/nope", false},
	{"sim", []string{"--json-file", "/proc/nope/x.json"}, "--json-file: open /proc/nope/x.json", false},
	{"sim", []string{"--json", "out.json"}, "--json takes no value", false},
	{"sim", []string{"--enable-prefix-caching", "--prefix-sharing", "on"}, "not both", false},
	{"sim", []string{"--kv-budget-tokens", "1000"}, "the KV budget of 1000 tokens cannot hold one request", false},
	{"sim", []string{"--schemes", "vllm"}, `--schemes: unknown scheme "vllm"`, false},
	{"plan", []string{"--nope"}, "unknown flag --nope", false},
	{"fleet", []string{"--nope"}, "unknown flag --nope", false},
	{"sim", []string{"--nope"}, "unknown flag --nope", false},
	{"hash", []string{"--nope"}, "unknown flag --nope", false},
	{"demo", []string{"--nope"}, "unknown flag --nope", false},
	{"plan", []string{"--gpu"}, "--gpu needs a value", false},
	{"plan", []string{"stray"}, `unexpected argument "stray"`, false},
}

func TestBadInputIsOneLineAndStatusTwo(t *testing.T) {
	for _, tt := range badInputs {
		args := append(append([]string{tt.cmd}, quick[tt.cmd]...), tt.args...)
		if tt.raw {
			args = append([]string{tt.cmd}, tt.args...)
		}
		if tt.cmd == "hash" {
			args = append([]string{"hash", "--seed", "0"}, tt.args...)
		}
		code, out, errOut := runKV(args...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
		assert.Empty(t, out, "%v: nothing printed as if it were a result", args)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if assert.Len(t, lines, 2, "%v: one line and the pointer to --help: %q", args, errOut) {
			assert.True(t, strings.HasPrefix(lines[0], "kvpage "+tt.cmd+": "), "%q", lines[0])
			assert.Contains(t, lines[0], tt.want, "%v", args)
			assert.Equal(t, "see kvpage "+tt.cmd+" --help", lines[1])
			assert.NotRegexp(t, `(sim|sizing): (sim|sizing):`, lines[0], "a doubled prefix")
			assert.NotContains(t, lines[0], "kvpage "+tt.cmd+": sim: ", "the library's prefix after the command's")
		}
	}
}

// The flags that size a deployment are the same in plan, fleet and sim.
func TestOneVocabulary(t *testing.T) {
	shared := []string{"model", "config", "params", "weights", "weights-gib", "kv-bytes-per-token", "gpu", "gpu-memory", "gpu-memory-mib",
		"tensor-parallel-size", "max-model-len", "kv-cache-dtype", "block-size", "gpu-memory-utilization", "overhead", "overhead-gib",
		"max-num-seqs", "json"}
	for _, name := range []string{"plan", "fleet", "sim"} {
		_, help, _ := runKV(name, "--help")
		for _, f := range shared {
			assert.Regexp(t, `(?m)^  --`+f+`(,| |$)`, help, "%s --%s", name, f)
		}
		assert.Contains(t, help, "  --model, -m ", name)
		assert.Contains(t, help, "  --tensor-parallel-size, -tp ", name)
		assert.Contains(t, help, "  --max-model-len, --context ", name)
		assert.Contains(t, help, "8k = 8,000; 8K = 8,192", name)
		assert.Contains(t, help, "80GB and 80G = 80 x 10^9 bytes, 80GiB = 80 x 2^30", name)
	}
	// Both spellings of a GPU's memory size the same card.
	_, a, _ := runKV("plan", "--model", "llama-3.1-8b", "--gpu-memory", "81559MiB", "--json")
	_, b, _ := runKV("plan", "--model", "llama-3.1-8b", "--gpu-memory-mib", "81559", "--json")
	var ja, jb map[string]any
	require.NoError(t, json.Unmarshal([]byte(a), &ja))
	require.NoError(t, json.Unmarshal([]byte(b), &jb))
	assert.Equal(t, jb["kv_cache_tokens"], ja["kv_cache_tokens"])
	_, c, _ := runKV("plan", "--model", "llama-3.1-8b", "--gpu-memory", "80GB", "--json")
	_, d, _ := runKV("plan", "--model", "llama-3.1-8b", "--gpu-memory", "80GiB", "--json")
	var jc, jd map[string]any
	require.NoError(t, json.Unmarshal([]byte(c), &jc))
	require.NoError(t, json.Unmarshal([]byte(d), &jd))
	assert.Less(t, jc["kv_cache_tokens"].(float64), jd["kv_cache_tokens"].(float64), "80GB is less than 80GiB")
}

// --json means the same in plan, fleet and sim: one JSON object on stdout, nothing else.
func TestJSONMeansTheSameEverywhere(t *testing.T) {
	for _, name := range []string{"plan", "fleet", "sim"} {
		code, out, errOut := runKV(append(append([]string{name}, quick[name]...), "--json")...)
		require.Equal(t, 0, code, errOut)
		var obj map[string]any
		dec := json.NewDecoder(strings.NewReader(out))
		require.NoError(t, dec.Decode(&obj), "%s: %s", name, out)
		assert.False(t, dec.More(), "%s: one object and nothing else on stdout", name)
	}
}

// vLLM's --enable-prefix-caching runs the sharing rows only; the default keeps both, and
// --no-enable-prefix-caching keeps the rows without.
func TestSimPrefixCachingFlag(t *testing.T) {
	labels := func(extra ...string) []string {
		t.Helper()
		code, out, errOut := runKV(append(append([]string{"sim"}, quick["sim"]...), append([]string{"--json", "--schemes", "paged"}, extra...)...)...)
		require.Equal(t, 0, code, errOut)
		var rep struct{ Schemes []struct{ Label string } }
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		var l []string
		for _, s := range rep.Schemes {
			l = append(l, s.Label)
		}
		return l
	}
	assert.Equal(t, []string{"paged/16", "paged/16+lru"}, labels())
	assert.Equal(t, []string{"paged/16+lru"}, labels("--enable-prefix-caching"))
	assert.Equal(t, []string{"paged/16"}, labels("--no-enable-prefix-caching"))
}

// A bad output path fails before the simulation runs: nothing is printed on stdout, and
// the probe file is not left behind.
func TestSimChecksOutputsFirst(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := runKV(append(append([]string{"sim"}, quick["sim"]...), "--num-prompts", "100000", "--no-charts=false", "--out-dir", "/proc/nope")...)
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	code, _, errOut := runKV(append(append([]string{"sim"}, quick["sim"]...), "--no-charts=false", "--out-dir", dir)...)
	require.Equal(t, 0, code, errOut)
	matches, _ := filepath.Glob(filepath.Join(dir, ".kvpage-probe-*"))
	assert.Empty(t, matches)
}

// Grammar of counts of one.
func TestGrammarOfOne(t *testing.T) {
	assert.Equal(t, "1 output", plural(1, "output", "outputs"))
	assert.Equal(t, "2 outputs", plural(2, "output", "outputs"))
	assert.Equal(t, "1,000 outputs", plural(1000, "output", "outputs"))
	assert.Equal(t, "the 1 GPU", theGPUs(1))
	assert.Equal(t, "the 8 GPUs", theGPUs(8))
	code, out, errOut := runKV("fleet", "--model", "llama-3.1-8b", "--gpu", "h100", "-tp", "1", "--concurrent", "10", "--avg-context", "1k")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "across the 1 GPU of a replica")
	assert.NotContains(t, out, "1 GPUs")
}
