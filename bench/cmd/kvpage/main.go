// Command kvpage is the command-line face of the kvpage library: the fragmentation
// simulator (sim, the default), the capacity planner (plan, fleet) and the vLLM-compatible
// block hasher (hash). Run `kvpage help` for the list.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. Each lives in its own file and registers itself in init.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// defaultCommand runs when kvpage is called with no subcommand.
var defaultCommand = "demo"

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("kvpage: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code: 0 on success, 2 for a
// usage error, 1 for any other failure.
func run(args []string, stdout, stderr io.Writer) int {
	name := defaultCommand
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "kvpage: unknown subcommand %q\n\n", name)
		usage(stderr)
		return 2
	}
	if err := c.run(args, stdout, stderr); err != nil {
		if err == errUsage {
			return 2
		}
		fmt.Fprintf(stderr, "kvpage %s: %v\n", name, err)
		return 1
	}
	return 0
}

// errUsage is returned by a subcommand whose flags did not parse; the flag package has
// already printed the reason and the usage.
var errUsage = fmt.Errorf("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvpage [subcommand] [flags]   (no subcommand runs "+defaultCommand+")")
	fmt.Fprintln(w, "\nsubcommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `kvpage SUBCOMMAND --help` for a subcommand's flags.")
}
