package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// flagSet is one subcommand's flags, the same rules for every subcommand: vLLM's names
// written --name (the flag package accepts -name too), a few short aliases (-m, -tp),
// --help on stdout with exit status 0, and a bad flag reported as one line that names it
// followed by "see kvpage CMD --help", with exit status 2 (see usageError).
type flagSet struct {
	name    string
	intro   string // the help text above the flags
	fs      *flag.FlagSet
	aliases map[string]string // alias -> the flag it stands for
	set     map[string]bool   // flags given on the command line, by their full name
}

func newFlagSet(name, intro string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, help by parse
	fs.Usage = func() {}
	return &flagSet{name: name, intro: intro, fs: fs, aliases: map[string]string{}, set: map[string]bool{}}
}

// alias registers short as another name of the flag long.
func (f *flagSet) alias(short, long string) {
	fl := f.fs.Lookup(long)
	if fl == nil {
		panic("kvpage: alias of an unknown flag: " + long)
	}
	f.fs.Var(fl.Value, short, "alias of --"+long)
	f.aliases[short] = long
}

// errHelp is returned by parse after it printed the help: the subcommand stops, status 0.
var errHelp = errors.New("help printed")

// parse parses args; it prints the help and returns errHelp for -h, -help or --help, and
// returns a *usageError naming the flag for anything it cannot parse.
func (f *flagSet) parse(args []string, stdout io.Writer) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.printHelp(stdout)
			return errHelp
		}
		return &usageError{msg: f.rewrite(err.Error())}
	}
	if f.fs.NArg() > 0 {
		return badFlag("unexpected argument %q: %s takes flags only", f.fs.Arg(0), f.name)
	}
	f.fs.Visit(func(fl *flag.Flag) {
		name := fl.Name
		if long, ok := f.aliases[name]; ok {
			name = long
		}
		f.set[name] = true
	})
	return nil
}

var flagInMessage = regexp.MustCompile(`(flag provided but not defined: |flag needs an argument: |for flag )-([A-Za-z0-9-]+)`)

// rewrite turns the flag package's messages ("invalid value "x" for flag -gpu: ...") into
// this command's spelling ("--gpu: invalid value "x": ...").
func (f *flagSet) rewrite(msg string) string {
	m := flagInMessage.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	name := m[2]
	dashes := "--"
	if _, ok := f.aliases[name]; (ok && len(name) <= 2) || name[0] >= '0' && name[0] <= '9' {
		dashes = "-" // a short alias, or a negative number taken for a flag
	}
	flagName := dashes + name
	switch {
	case strings.HasPrefix(m[1], "flag provided"):
		return "unknown flag " + flagName
	case strings.HasPrefix(m[1], "flag needs"):
		return flagName + " needs a value"
	}
	// invalid value "x" for flag -name: reason
	before, after, _ := strings.Cut(msg, m[0])
	return flagName + ": " + strings.TrimSpace(before) + strings.TrimPrefix(after, "")
}

// printHelp writes the intro and every flag, aliases beside their flag, as --name.
func (f *flagSet) printHelp(w io.Writer) {
	fmt.Fprint(w, f.intro)
	fmt.Fprintln(w, "Flags:")
	shorts := map[string]string{}
	for short, long := range f.aliases {
		shorts[long] = short
	}
	var flags []*flag.Flag
	f.fs.VisitAll(func(fl *flag.Flag) {
		if _, isAlias := f.aliases[fl.Name]; !isAlias {
			flags = append(flags, fl)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, fl := range flags {
		kind, usage := flag.UnquoteUsage(fl)
		switch fl.Value.(type) {
		case *bytesValue:
			kind = "SIZE"
		case *sizeValue:
			kind = "TOKENS"
		case *countValue:
			kind = "COUNT"
		}
		line := "  --" + fl.Name
		if s, ok := shorts[fl.Name]; ok {
			dashes := "-"
			if len(s) > 2 {
				dashes = "--"
			}
			line += ", " + dashes + s
		}
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintln(w, line)
		if d := fl.DefValue; d != "" && d != "0" && d != "false" {
			usage += " (default " + d + ")"
		}
		for _, l := range wrap(usage, 84) {
			fmt.Fprintln(w, "        "+l)
		}
	}
	fmt.Fprintf(w, "\nExit status: 0 on success, 1 when the run fails or (plan, fleet) does not fit, 2 for bad input.\n")
}

// wrap breaks s into lines of at most width bytes at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// usageError is bad input found by a subcommand: a flag that does not parse, a value out
// of range, a file that cannot be read. run prints it on one line, points at --help, and
// exits with status 2. err, when not nil, is what it wraps (badFlag's %w), so that a
// caller's errors.Is still finds the library's typed error under it.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Unwrap() error { return e.err }

// badFlag is a usageError formatted as fmt.Errorf formats it: an error given with %w
// stays in its chain.
func badFlag(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	u := &usageError{msg: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		u.err = err // it wraps one error or several (%w): keep them all in the chain
	}
	return u
}

// sizeValue is a flag holding a token count parsed as vLLM parses it (sizing.ParseSize:
// 8k = 8,000, 8K = 8,192), and "auto" (or vLLM's -1) where allowAuto is set.
type sizeValue struct {
	n         int64
	set, auto bool
	allowAuto bool
}

func (v *sizeValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	if v.auto {
		return "auto"
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *sizeValue) Set(s string) error {
	if t := strings.ToLower(strings.TrimSpace(s)); v.allowAuto && (t == "auto" || t == "-1") {
		v.n, v.set, v.auto = 0, true, true
		return nil
	}
	n, err := sizing.ParseSize(s)
	if err != nil {
		var se *sizing.SizeError
		if errors.As(err, &se) {
			return errors.New(se.Reason)
		}
		return err
	}
	v.n, v.set, v.auto = n, true, false
	return nil
}

// bytesValue is a flag holding a byte size (sizing.ParseBytes: 80GB = 80 x 10^9, 80GiB =
// 80 x 2^30).
type bytesValue struct {
	n   int64
	set bool
}

func (v *bytesValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *bytesValue) Set(s string) error {
	n, err := sizing.ParseBytes(s)
	if err != nil {
		var se *sizing.SizeError
		if errors.As(err, &se) {
			return errors.New(se.Reason)
		}
		return err
	}
	v.n, v.set = n, true
	return nil
}

// checkFloat checks a float flag: a finite number in [lo, hi] (open at lo when loOpen).
// NaN, infinities and values such as 1e308 get a message that says the range.
func checkFloat(name string, v, lo, hi float64, loOpen bool, unit string) error {
	ok := !math.IsNaN(v) && v <= hi && (v > lo || (!loOpen && v == lo))
	if ok {
		return nil
	}
	open := "["
	if loOpen {
		open = "("
	}
	return badFlag("--%s %s is out of range: want a number in %s%s, %s]%s", name, strconv.FormatFloat(v, 'g', -1, 64), open,
		strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi, 'f', -1, 64), unit)
}

// maxGiB bounds the GiB flags: sizing.MaxBytes.
const maxGiB = float64(sizing.MaxBytes) / (1 << 30)

// Ranges every subcommand applies alike.
const (
	minMaxModelLen = 2 // one prompt token and one output token
	maxBlockSize   = 1 << 16
)

func checkMaxModelLen(v *sizeValue) error {
	if v.set && !v.auto && (v.n < minMaxModelLen || v.n > sizing.MaxTokens) {
		return badFlag("--max-model-len must be between %d and %s tokens, got %s", minMaxModelLen, commas(sizing.MaxTokens), commas(v.n))
	}
	return nil
}

func checkBlockSize(n int) error {
	if n < 1 || n > maxBlockSize {
		return badFlag("--block-size must be between 1 and %d tokens, got %d", maxBlockSize, n)
	}
	return nil
}
