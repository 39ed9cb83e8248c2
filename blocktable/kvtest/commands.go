package kvtest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// The scenario commands: each reads its arguments, calls the stack and returns its output.

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
	if req.Resumed, err = a.boolean("resumed", false); err != nil {
		return "", err
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
		if p.Mode == blocktable.Swap {
			lines[i] += fmt.Sprintf(" awaiting=%d", p.Awaiting)
		}
	}
	return strings.Join(lines, "\n"), nil
}

func (r *Runner) cmdResume(a *args) (string, error) {
	id, err := r.seq(a, 0)
	if err != nil {
		return "", err
	}
	res, err := r.env.Manager.Resume(id)
	return result(err, fmt.Sprintf("ok hit=%d load=%d tokens=%d", res.HitTokens, res.LoadTokens, res.Tokens)), a.done()
}

// cmdTransfers takes the Manager's plans and completes every transfer in flight.
func (r *Runner) cmdTransfers(a *args) (string, error) {
	ok := true
	if v, set := a.str("ok"); set {
		ok = v != "false"
	}
	if err := a.done(); err != nil {
		return "", err
	}
	var lines []string
	plans := r.env.Manager.TakePlans(nil)
	for _, p := range plans {
		kind := "store"
		if p.Kind == prefix.Load {
			kind = "load"
		}
		lines = append(lines, fmt.Sprintf("plan %d %s %d->%d blocks=%d", p.ID, kind, p.From, p.To, p.Blocks))
	}
	seen := map[prefix.TransferID]bool{}
	for _, p := range plans {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		d, err := r.env.Manager.CompleteTransfer(p.ID, ok)
		if err != nil {
			return result(err, ""), nil
		}
		line := fmt.Sprintf("completed %d ok=%v", p.ID, ok)
		if d.Loaded {
			line += fmt.Sprintf(" seq=%s compute=%d", r.env.Name(d.Seq), d.ComputeTokens)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "ok none", nil
	}
	return strings.Join(lines, "\n"), nil
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
	look, err := a.num("lookahead", 0, -maxTokens, maxTokens)
	if err != nil {
		return "", err
	}
	dst := make([]int64, n)
	real, err := r.env.Manager.FillSlots(id, from, look, dst)
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

// cmdExplain: explain prompt=TOKENS [ns=SALT] [lora=NAME] [eagle=true] says where and why
// the lookup of that prompt stops (prefix.Index.Explain, with the Manager's len-1 cap
// unless fullhit), and keeps the answer for the miss keys of expect.
func (r *Runner) cmdExplain(a *args) (string, error) {
	spec, ok := a.str("prompt")
	if !ok {
		return "", scriptErrorf("explain needs prompt=TOKENS")
	}
	toks, err := ParseTokens(spec)
	if err != nil {
		return "", scriptErrorf("%v", err)
	}
	req := &blocktable.Request{Prompt: toks}
	req.Namespace.Salt, _ = a.str("ns")
	req.Namespace.LoRA, _ = a.str("lora")
	eagle, err := a.boolean("eagle", false)
	if err != nil {
		return "", err
	}
	if err := a.done(); err != nil {
		return "", err
	}
	if r.Env().Index == nil {
		return "", scriptErrorf("explain needs an index")
	}
	r.miss = r.Env().explain(req, eagle)
	e := r.miss
	return fmt.Sprintf("reason=%s cause=%s matched=%d shared=%d", e.Reason, e.Evicted, e.MatchedBlocks, e.SharedTokens), nil
}
