package kvtest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
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
//	swapin SEQ
//	evict N                       evict up to N cached blocks from the index
//	reset                         drop the whole prefix cache (refused while held)
//	tick [N]                      advance the shared clock
//	fail-alloc K | shrink N | heal
//	                              fault injection (see Env.FailAllocation, Env.Shrink)
//	table SEQ | slots SEQ [from=0] [n=8] | log | stats | dump
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
		"swapin":    {run: (*Runner).cmdSwapIn},
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
		"table": {run: (*Runner).cmdTable, readOnly: true},
		"slots": {run: (*Runner).cmdSlots, readOnly: true},
		"log":   {run: (*Runner).cmdLog, readOnly: true},
		"stats": {run: (*Runner).cmdStats, readOnly: true},
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

func (r *Runner) cmdConfig(a *args) (string, error) {
	if r.env != nil {
		if !r.lenient {
			return "", scriptErrorf("config must come before every other command")
		}
		r.env.Heal()
		r.env.AbortAll()
	}
	var c Config
	var err error
	get := func(key string, dst *int, lo, hi int) {
		if err == nil {
			*dst, err = a.num(key, *dst, lo, hi)
		}
	}
	c.Blocks, c.BlockSize = 17, 4
	get("blocks", &c.Blocks, 1, 4096)
	get("bs", &c.BlockSize, 1, 256)
	get("host", &c.HostBlocks, 0, 4096)
	get("window", &c.SlidingWindow, 0, maxTokens)
	if err != nil {
		return "", err
	}
	null, err := a.boolean("null", true)
	if err != nil {
		return "", err
	}
	index, err := a.boolean("index", true)
	if err != nil {
		return "", err
	}
	if c.FullPromptHit, err = a.boolean("fullhit", false); err != nil {
		return "", err
	}
	c.NoNullBlock, c.NoIndex = !null, !index
	if w, ok := a.str("watermark"); ok {
		if c.Watermark, err = strconv.ParseFloat(w, 64); err != nil {
			return "", scriptErrorf("watermark=%q: %v", w, err)
		}
	}
	c.Eviction, _ = a.str("eviction")
	if name, ok := a.str("preemption"); ok {
		if c.Preemption, err = evict.PreemptionByName(name); err != nil {
			return "", scriptErrorf("%v", err)
		}
	}
	if err := a.done(); err != nil {
		return "", err
	}
	e, err := newEnv(r.tb, c)
	if err != nil {
		return "", scriptErrorf("config: %v", err)
	}
	r.env = e
	return "ok", nil
}

func (r *Runner) seq(a *args, i int) (blocktable.SeqID, error) {
	name, err := a.posName(i)
	if err != nil {
		return 0, err
	}
	return r.env.Seq(name), nil
}

func (r *Runner) cmdAdmit(a *args, dry bool) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	req := &blocktable.Request{}
	spec, ok := a.str("prompt")
	if !ok {
		return "", scriptErrorf("admit needs prompt=TOKENS")
	}
	if req.Prompt, err = ParseTokens(spec); err != nil {
		return "", scriptErrorf("%v", err)
	}
	req.Namespace = prefix.Namespace{}
	req.Namespace.Salt, _ = a.str("ns")
	req.Namespace.LoRA, _ = a.str("lora")
	for _, f := range []struct {
		key string
		dst *int
	}{{"prefill", &req.Prefill}, {"lookahead", &req.Lookahead}, {"priority", &req.Priority}, {"max", &req.MaxTokens}} {
		if *f.dst, err = a.num(f.key, 0, -maxTokens, maxTokens); err != nil {
			return "", err
		}
	}
	if err := a.done(); err != nil {
		return "", err
	}
	var res blocktable.AdmitResult
	if dry {
		res, err = r.env.Manager.CanAdmit(id, req)
	} else {
		res, err = r.env.Manager.Admit(id, req)
		if err == nil {
			r.last = res
		}
	}
	return result(err, fmt.Sprintf("ok hit=%d new=%d tokens=%d", res.HitTokens, res.NewBlocks, res.Tokens)), nil
}

func (r *Runner) cmdAppend(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	var toks []int32
	spec, explicit := a.str("tokens")
	switch {
	case explicit && len(a.pos) > 1:
		return "", scriptErrorf("append takes a count or tokens=, not both")
	case explicit:
		if toks, err = ParseTokens(spec); err != nil {
			return "", scriptErrorf("%v", err)
		}
	default:
		n := 1
		if len(a.pos) > 1 {
			if n, err = a.posInt(1, 0, maxTokens); err != nil {
				return "", err
			}
		}
		next := int32(0)
		if have, err := r.env.Manager.Tokens(id); err == nil && len(have) > 0 {
			next = have[len(have)-1] + 1
		}
		toks = make([]int32, n)
		for i := range toks {
			toks[i] = next + int32(i)
		}
	}
	look, err := a.num("lookahead", 0, -maxTokens, maxTokens)
	if err != nil {
		return "", err
	}
	if err := a.done(); err != nil {
		return "", err
	}
	res, err := r.env.Manager.Append(id, toks, look)
	ok := fmt.Sprintf("ok new=%d committed=%d", res.NewBlocks, res.Committed)
	if res.Copied {
		ok += fmt.Sprintf(" copy=%d->%d", res.Copy.Src, res.Copy.Dst)
	}
	return result(err, ok), nil
}

func (r *Runner) cmdFork(a *args) (string, error) {
	p, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	c, err := r.seq(a, 1)
	if err != nil {
		return "", err
	}
	return result(r.env.Manager.Fork(p, c), "ok"), a.done()
}

func (r *Runner) cmdFinish(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	return result(r.env.Manager.Finish(id), "ok"), a.done()
}

func (r *Runner) cmdAbort(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	return result(r.env.Manager.Abort(id), "ok"), a.done()
}

func (r *Runner) cmdTruncate(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	n, err := a.posInt(1, -maxTokens, maxTokens)
	if err != nil {
		return "", err
	}
	return result(r.env.Manager.Truncate(id, n), "ok"), a.done()
}

func parseMode(a *args) (blocktable.PreemptMode, error) {
	switch m, _ := a.str("mode"); m {
	case "", "recompute":
		return blocktable.Recompute, nil
	case "swap":
		return blocktable.Swap, nil
	default:
		return 0, scriptErrorf("mode=%q: want recompute or swap", m)
	}
}

func (r *Runner) cmdPreempt(a *args) (string, error) {
	mode, err := parseMode(a)
	if err != nil {
		return "", err
	}
	var out []blocktable.Preempted
	if len(a.pos) > 0 {
		id, err := r.seq(a, 0)
		if err != nil {
			return "", err
		}
		if err := a.done(); err != nil {
			return "", err
		}
		p, err := r.env.Manager.PreemptSeq(id, mode)
		if err != nil {
			return result(err, ""), nil
		}
		out = append(out, p)
	} else {
		req := blocktable.PreemptRequest{Mode: mode}
		if req.Need, err = a.num("need", 0, -1<<20, 1<<20); err != nil {
			return "", err
		}
		if list, ok := a.str("protect"); ok {
			for _, name := range strings.Split(list, ",") {
				if err := checkName(name); err != nil {
					return "", err
				}
				req.Protect = append(req.Protect, r.env.Seq(name))
			}
		}
		if err := a.done(); err != nil {
			return "", err
		}
		if out, err = r.env.Manager.Preempt(req, nil); err != nil {
			return result(err, ""), nil
		}
	}
	if len(out) == 0 {
		return "preempted none", nil
	}
	lines := make([]string, len(out))
	for i, p := range out {
		m := "recompute"
		if p.Mode == blocktable.Swap {
			m = "swap"
		}
		lines[i] = fmt.Sprintf("preempted %s mode=%s tokens=%d freed=%d", r.env.Name(p.Seq), m, p.Tokens, p.Freed)
		if len(p.SwapOut) > 0 {
			lines[i] += " swapout=" + formatCopies(p.SwapOut)
		}
	}
	return strings.Join(lines, "\n"), nil
}

func formatCopies(ops []blocktable.CopyOp) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%d->%d", op.Src, op.Dst)
	}
	return strings.Join(parts, ",")
}

func (r *Runner) cmdSwapIn(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	ops, err := r.env.Manager.SwapIn(id, nil)
	return result(err, "ok copies="+formatCopies(ops)), a.done()
}

func (r *Runner) cmdEvict(a *args) (string, error) {
	n, err := a.posInt(0, 0, 1<<20)
	if err != nil {
		return "", err
	}
	if r.env.Index == nil {
		return "error: no prefix index", a.done()
	}
	return fmt.Sprintf("evicted %d", r.env.Index.Evict(n)), a.done()
}

func (r *Runner) cmdReset(a *args) (string, error) {
	if r.env.Index == nil {
		return "error: no prefix index", a.done()
	}
	return result(r.env.Index.Reset(), "ok"), a.done()
}

func (r *Runner) cmdTick(a *args) (string, error) {
	n := 1
	if len(a.pos) > 0 {
		var err error
		if n, err = a.posInt(0, 0, 1<<20); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("clock=%d", r.env.Clock.Advance(uint64(n))), a.done()
}

func (r *Runner) cmdTable(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	ids, err := r.env.Manager.Blocks(id)
	if len(ids) == 0 && err == nil {
		return "(empty)", a.done()
	}
	return result(err, joinIDs(ids)), a.done()
}

func (r *Runner) cmdSlots(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	from, err := a.num("from", 0, -maxTokens, maxTokens)
	if err != nil {
		return "", err
	}
	n, err := a.num("n", 8, 0, 1024)
	if err != nil {
		return "", err
	}
	dst := make([]int64, n)
	real, err := r.env.Manager.FillSlots(id, from, dst)
	if err != nil {
		return result(err, ""), a.done()
	}
	parts := make([]string, len(dst))
	for i, s := range dst {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return fmt.Sprintf("%d real: %s", real, strings.Join(parts, ",")), a.done()
}

func (r *Runner) cmdLog(a *args) (string, error) {
	e := r.env.Log.Take()
	if len(e) == 0 {
		return "(empty)", a.done()
	}
	return strings.Join(e, "\n"), a.done()
}

func (r *Runner) cmdStats(a *args) (string, error) {
	s := r.env.Manager.Stats()
	return fmt.Sprintf("running=%d swapped=%d admitted=%d finished=%d aborted=%d forks=%d preemptions=%d swapins=%d cows=%d evictions=%d rejected=%d hitrate=%.4f",
		s.Running, s.Swapped, s.Admitted, s.Finished, s.Aborted, s.Forks, s.Preemptions, s.SwapIns, s.CopyOnWrites, s.Evictions, s.RejectedAdmissions, s.HitRate()), a.done()
}
