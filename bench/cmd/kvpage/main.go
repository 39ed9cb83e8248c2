package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
)

// command is one subcommand. Each lives in its own file and registers itself in init.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// defaultCommand runs when kvpage is called with no subcommand.
var defaultCommand = "sim"

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("kvpage: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// run dispatches to a subcommand and returns the process exit code: 0 on success (and
// for --help), 2 for bad input, 1 for any other failure.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (isHelp(args[0]) || args[0] == "help") {
		if len(args) > 1 && args[0] == "help" {
			if _, ok := commands[args[1]]; ok {
				return run([]string{args[1], "--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return 0
	}
	name := defaultCommand
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "kvpage: unknown subcommand %q (%s)\nsee kvpage --help\n", name, strings.Join(commandNames(), ", "))
		return 2
	}
	err := c.run(args, stdout, stderr)
	switch {
	case err == nil || errors.Is(err, errHelp):
		return 0
	case badInput(err):
		fmt.Fprintf(stderr, "kvpage %s: %s\nsee kvpage %s --help\n", name, tidy(err), name)
		return 2
	}
	fmt.Fprintf(stderr, "kvpage %s: %s\n", name, tidy(err))
	return 1
}

// badInput reports whether err comes from what the user gave: a flag, a file, a trace, a
// configuration that cannot run.
func badInput(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	for _, s := range []error{sim.ErrInvalidConfig, sim.ErrBadTrace, sizing.ErrBadSize, sizing.ErrUnknownModel, sizing.ErrUnknownGPU,
		sizing.ErrUnknownDType, sizing.ErrMissingField, sizing.ErrBadConfig, sizing.ErrInvalidArgument, fs.ErrNotExist, fs.ErrPermission} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// packagePrefix matches a package's own prefix at the start of a message or of a part of
// it, which the command's "kvpage CMD:" replaces.
var packagePrefix = regexp.MustCompile(`(^|: )(sim|sizing): (invalid configuration: )?`)

// tidy is err's message without the library's package prefixes: "kvpage sim: the KV
// budget ...", not "kvpage sim: sim: invalid configuration: the KV budget ...".
func tidy(err error) string {
	return packagePrefix.ReplaceAllString(err.Error(), "$1")
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvpage [SUBCOMMAND] [flags]   (no subcommand runs "+defaultCommand+")")
	fmt.Fprintln(w, "\nSubcommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, "\n"+sizeSyntax)
	fmt.Fprintln(w, "Flags are written --name (vLLM's names); -m and -tp are short for --model and --tensor-parallel-size.")
	fmt.Fprintln(w, "Exit status: 0 on success, 1 when a run fails or a plan does not fit, 2 for bad input.")
	fmt.Fprintln(w, "\nRun `kvpage SUBCOMMAND --help` for a subcommand's flags.")
}
