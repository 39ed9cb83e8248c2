package prefix

import (
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fuzzMinimizeLimit is how many inputs go's fuzzer may try when it minimizes an input of
// this package's fuzz targets, unless -fuzzminimizetime says otherwise.
//
// Why: the fuzzer minimizes every new interesting input before it goes on, for up to
// -fuzzminimizetime (60 s by default), and its progress line counts none of those runs, so
// a long -fuzztime showed 0 execs/s for a minute after each find. The targets here are
// rapid state machines (rapid.MakeFuzz): every 8 bytes of input are one draw, so cutting a
// byte shifts all later draws, and the minimizer's pass over every subrange of bytes (a
// quadratic number of candidates, each a full machine run) never ends within the minute.
// With 50 tries a find costs a few milliseconds. A failure is not the worse for it: the
// failing input is saved as found, and rapid prints the steps it ran.
const fuzzMinimizeLimit = "50x"

func TestMain(m *testing.M) {
	flag.Parse()
	boundFuzzMinimize(flag.CommandLine)
	os.Exit(m.Run())
}

// boundFuzzMinimize sets -test.fuzzminimizetime to fuzzMinimizeLimit when fs is fuzzing
// (-test.fuzz given) and the time was not given.
func boundFuzzMinimize(fs *flag.FlagSet) {
	if f := fs.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		return
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		if err := fs.Set("test.fuzzminimizetime", fuzzMinimizeLimit); err != nil {
			panic("prefix tests: " + err.Error()) // the testing package renamed its flag
		}
	}
}

// boundFuzzMinimize bounds the fuzzer's minimization only when fuzzing, and never
// overrides a -fuzzminimizetime given on the command line; the testing package's own flag
// takes its value.
func TestBoundFuzzMinimize(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "1m0s"}, // not fuzzing: the default stays
		{[]string{"-test.fuzz", "^FuzzIndexOps$"}, fuzzMinimizeLimit},
		{[]string{"-test.fuzz", "^FuzzIndexOps$", "-test.fuzzminimizetime", "5s"}, "5s"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.String("test.fuzz", "", "")
		fs.String("test.fuzzminimizetime", "1m0s", "")
		require.NoError(t, fs.Parse(tc.args))
		boundFuzzMinimize(fs)
		assert.Equal(t, tc.want, fs.Lookup("test.fuzzminimizetime").Value.String(), "%v", tc.args)
	}
	real := flag.Lookup("test.fuzzminimizetime")
	require.NotNil(t, real, "the testing package's flag")
	old := real.Value.String()
	require.NoError(t, real.Value.Set(fuzzMinimizeLimit))
	assert.Equal(t, fuzzMinimizeLimit, real.Value.String())
	require.NoError(t, real.Value.Set(old))
}
