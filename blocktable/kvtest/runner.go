package kvtest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// Runner executes scenario commands against an Env. RunFile drives one from a file; a
// test can also drive one line by line with Exec.
//
// The commands (names are sequence names such as r1; tokens are lists as ParseTokens
// reads them):
//
//	config [blocks=17] [bs=4] [null=true] [index=true] [host=0] [watermark=0]
//	       [eviction=NAME] [preemption=fcfs] [window=0] [fullhit=false]
//	                              build a fresh stack (before any other command)
//	admit SEQ prompt=TOKENS [ns=SALT] [lora=NAME] [prefill=N] [lookahead=N] [priority=N] [max=N]
//	can-admit SEQ ...             the same as a dry run
//	append SEQ [N | tokens=TOKENS] [lookahead=N]
//	                              N tokens continue the sequence: last token + 1, + 2, ...
//	fork PARENT CHILD
//	finish SEQ | abort SEQ
//	truncate SEQ N
//	preempt need=N [mode=recompute|swap] [protect=SEQ,SEQ]
//	preempt SEQ [mode=recompute|swap]
//	resume SEQ                    bring a swapped sequence back (Manager.Resume)
//	transfers [ok=true]           take the tiers' plans and complete every transfer
//	evict N                       evict up to N cached blocks from the index
//	reset                         drop the whole prefix cache (refused while held)
//	tick [N]                      advance the shared clock
//	fail-alloc K | shrink N | heal
//	                              fault injection (see Env.FailAllocation, Env.Shrink)
//	table SEQ | slots SEQ [from=0] [lookahead=0] [n=8] | log | stats | dump
//	expect KEY=VALUE ...          assert values (see Runner.Value for the keys)
//
// A command's output is its result ("ok ...", or "error: ..." when the stack refused it)
// and, for every command but the read-only ones, a last line "state free=F evictable=E
// held=H cached=C seqs=N": the expected state after each command.
type Runner struct {
	tb      TB
	env     *Env
	file    string
	last    blocktable.AdmitResult
	miss    prefix.Explanation // the last explain directive's
	lenient bool
}

// NewRunner returns a Runner whose Env is built by the first command (a default one
// unless that command is config).
func NewRunner(tb TB) *Runner { return &Runner{tb: tb} }

// Env returns the Runner's Env, building the default one if no command has yet.
func (r *Runner) Env() *Env {
	if r.env == nil {
		e, err := newEnv(r.tb, Config{})
		if err != nil {
			r.tb.Fatalf("kvtest: %v", err)
		}
		r.env = e
	}
	return r.env
}

// Exec runs one command line and returns its output. The error is for a malformed command
// or a failed expect; a command the stack refuses is not an error: its output says so.
func (r *Runner) Exec(line string) (string, error) {
	d := &directive{raw: line, words: strings.Fields(line)}
	if len(d.words) == 0 {
		return "", scriptErrorf("empty command")
	}
	return r.run(d)
}

// expectError is a failed expect.
type expectError struct{ msgs []string }

func (e *expectError) Error() string { return strings.Join(e.msgs, "; ") }

// IsExpectFailure reports whether an error from Exec is a failed expect (rather than a
// malformed command).
func IsExpectFailure(err error) bool {
	var e *expectError
	return errors.As(err, &e)
}

type handler struct {
	run      func(r *Runner, a *args) (string, error)
	readOnly bool // no state line
}

var commands map[string]handler

func init() {
	commands = map[string]handler{
		"config":    {run: (*Runner).cmdConfig},
		"admit":     {run: func(r *Runner, a *args) (string, error) { return r.cmdAdmit(a, false) }},
		"can-admit": {run: func(r *Runner, a *args) (string, error) { return r.cmdAdmit(a, true) }},
		"append":    {run: (*Runner).cmdAppend},
		"fork":      {run: (*Runner).cmdFork},
		"finish":    {run: (*Runner).cmdFinish},
		"abort":     {run: (*Runner).cmdAbort},
		"truncate":  {run: (*Runner).cmdTruncate},
		"preempt":   {run: (*Runner).cmdPreempt},
		"resume":    {run: (*Runner).cmdResume},
		"transfers": {run: (*Runner).cmdTransfers},
		"evict":     {run: (*Runner).cmdEvict},
		"reset":     {run: (*Runner).cmdReset},
		"tick":      {run: (*Runner).cmdTick},
		"fail-alloc": {run: func(r *Runner, a *args) (string, error) {
			k, err := a.posInt(0, 0, 1<<20)
			if err != nil {
				return "", err
			}
			r.Env().FailAllocation(k)
			return "ok", a.done()
		}},
		"shrink": {run: func(r *Runner, a *args) (string, error) {
			n, err := a.posInt(0, 0, 1<<20)
			if err != nil {
				return "", err
			}
			r.Env().Shrink(n)
			return "ok", a.done()
		}},
		"heal": {run: func(r *Runner, a *args) (string, error) {
			r.Env().Heal()
			return "ok", a.done()
		}},
		"table":   {run: (*Runner).cmdTable, readOnly: true},
		"slots":   {run: (*Runner).cmdSlots, readOnly: true},
		"log":     {run: (*Runner).cmdLog, readOnly: true},
		"stats":   {run: (*Runner).cmdStats, readOnly: true},
		"explain": {run: (*Runner).cmdExplain, readOnly: true},
		"dump": {run: func(r *Runner, a *args) (string, error) {
			return strings.TrimRight(r.Env().Dump(), "\n"), a.done()
		}, readOnly: true},
	}
}

// run executes one directive.
func (r *Runner) run(d *directive) (string, error) {
	a, err := parseArgs(d.words)
	if err != nil {
		return "", err
	}
	if a.cmd == "expect" {
		return "", r.expect(d, a)
	}
	h, ok := commands[a.cmd]
	if !ok {
		return "", scriptErrorf("unknown command %q", a.cmd)
	}
	if a.cmd != "config" {
		r.Env()
	}
	out, err := h.run(r, a)
	if err != nil {
		return "", err
	}
	if !h.readOnly {
		out += "\n" + r.stateLine()
	}
	return out, nil
}

func (r *Runner) stateLine() string {
	b := r.env.Blocks()
	return fmt.Sprintf("state free=%d evictable=%d held=%d cached=%d seqs=%d", b.Free, b.Evictable, b.Held, b.Cached, len(r.env.Manager.Seqs(nil)))
}

func result(err error, ok string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}
