package kvtest_test

import (
	"errors"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
)

// The operations of the whole-system test: each predicts its outcome from the model, makes
// the call, checks the result and updates the model.

func (d *driver) prompt() []int32 {
	p := slices.Clone(d.systems[d.intn(len(d.systems))])
	n := 1 + d.intn(24)
	for range n {
		if d.intn(3) == 0 {
			d.unique++
			p = append(p, d.unique)
		} else {
			p = append(p, int32(d.intn(3)))
		}
	}
	return p
}

func (d *driver) admitNew() {
	if len(d.model.seqs) >= 24 {
		d.finish()
		return
	}
	d.admit(d.spaces[d.intn(len(d.spaces))], d.prompt())
}

func (d *driver) readmit() {
	if len(d.waiting) == 0 {
		d.admitNew()
		return
	}
	i := d.intn(len(d.waiting))
	w := d.waiting[i]
	d.waiting = slices.Delete(d.waiting, i, i+1)
	d.count["readmit"]++
	d.admit(w.ns, w.tokens)
}

func (d *driver) admit(ns prefix.Namespace, prompt []int32) {
	d.next++
	id := d.next
	req := &blocktable.Request{Namespace: ns, Prompt: prompt, Priority: d.intn(4)}
	if d.intn(4) == 0 {
		req.Lookahead = d.intn(5)
	}
	if d.intn(5) == 0 {
		req.Prefill = 1 + d.intn(len(prompt))
	}
	d.note("admit %d ns=%v prompt=%s prefill=%d lookahead=%d", id, ns, kvtest.FormatTokens(prompt), req.Prefill, req.Lookahead)

	held := d.held()
	hits := d.model.match(ns, prompt)
	hitTokens := len(hits) * d.cfg.bs
	tokens := len(prompt)
	if req.Prefill > 0 {
		tokens = min(tokens, hitTokens+req.Prefill)
	}
	tokens = max(tokens, hitTokens)
	need := ceilDiv(tokens+req.Lookahead, d.cfg.bs) - len(hits)
	// Hit blocks that are evictable now (unpinned) will not be once taken.
	pin, _ := d.model.pinned(held)
	taken := 0
	for _, b := range hits {
		if !pin[b] {
			taken++
		}
	}
	wm := int(d.cfg.watermark * float64(d.env.Pool.Capacity()))
	avail := d.env.Pool.Stats().Free + d.model.reclaimable(held) - taken
	fits := need+wm <= avail

	var before string
	if !fits && d.deep() { // a refusal must change nothing: keep the state to compare
		before = d.snapshot()
	}
	res, err := d.m.Admit(id, req)
	if err != nil {
		var oob *blocks.OutOfBlocksError
		if !errors.As(err, &oob) || !errors.Is(err, blocks.ErrOutOfBlocks) {
			d.fatalf("admit: unexpected error %v", err)
		}
		if fits {
			d.fatalf("admit refused (%v) but the model counts %d blocks needed, %d available", err, need+wm, avail)
		}
		if oob.Requested != need+wm || oob.Available != avail {
			d.fatalf("admit: error says need %d, available %d; the model counts %d, %d", oob.Requested, oob.Available, need+wm, avail)
		}
		d.requireUnchanged(before, "admit")
		d.count["admit-oob"]++
		return
	}
	if !fits {
		d.fatalf("admitted although the model counts %d blocks needed, %d available", need+wm, avail)
	}
	if res.HitBlocks != len(hits) || res.HitTokens != hitTokens || res.Tokens != tokens || res.NewBlocks != need {
		d.fatalf("admit result %+v; the model predicts hit %d blocks, %d tokens, %d new", res, len(hits), tokens, need)
	}
	tbl, _ := d.m.Blocks(id)
	if !slices.Equal(tbl[:len(hits)], hits) {
		d.fatalf("admit: table %v does not start with the predicted hit %v", tbl, hits)
	}
	if len(hits) > 0 {
		d.count["admit-hit"]++
	}
	d.model.seqs[id] = &modelSeq{ns: ns, tokens: slices.Clone(prompt[:tokens]), blocks: ceilDiv(tokens+req.Lookahead, d.cfg.bs)}
	d.write(id, hitTokens)
	d.count["admit"]++
}

// write stores sequence id's tokens from position from on in the fake device memory,
// through its table, as the model's forward pass would.
func (d *driver) write(id blocktable.SeqID, from int) {
	s := d.model.seqs[id]
	tbl, err := d.m.Blocks(id)
	if err != nil {
		d.fatalf("blocks of %d: %v", id, err)
	}
	bs := d.cfg.bs
	for p := from; p < len(s.tokens); p++ {
		d.model.dev[int(tbl[p/bs])*bs+p%bs] = s.tokens[p]
	}
}

func (d *driver) appendTokens(fill bool) {
	id, s, ok := d.pick()
	if !ok {
		d.admitNew()
		return
	}
	bs := d.cfg.bs
	n := 1 + d.intn(6)
	if fill { // a "commit": exactly fill the current block
		n = bs - len(s.tokens)%bs
	}
	look := 0
	if d.intn(4) == 0 {
		look = d.intn(6)
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(d.intn(3))
		if d.intn(4) == 0 {
			d.unique++
			toks[i] = d.unique
		}
	}
	d.note("append %d %s lookahead=%d", id, kvtest.FormatTokens(toks), look)

	held := d.held()
	tbl, _ := d.m.Blocks(id)
	grow := max(0, ceilDiv(len(s.tokens)+n+look, bs)-s.blocks)
	i := len(s.tokens) / bs
	cow := i < len(tbl) && d.refcount(held, tbl[i]) > 1
	need := grow
	if cow {
		need++
	}
	avail := d.env.Pool.Stats().Free + d.model.reclaimable(held)
	var before string
	if need > avail && d.deep() {
		before = d.snapshot()
	}
	res, err := d.m.Append(id, toks, look)
	if err != nil {
		if !errors.Is(err, blocks.ErrOutOfBlocks) {
			d.fatalf("append: unexpected error %v", err)
		}
		if need <= avail {
			d.fatalf("append refused (%v) but the model counts %d needed, %d available", err, need, avail)
		}
		d.requireUnchanged(before, "append")
		d.count["append-oob"]++
		return
	}
	if need > avail {
		d.fatalf("append succeeded although the model counts %d needed, %d available", need, avail)
	}
	if res.Copied != cow {
		d.fatalf("append: copied=%v, the model predicts %v", res.Copied, cow)
	}
	if cow {
		src, dst := int(res.Copy.Src)*bs, int(res.Copy.Dst)*bs
		copy(d.model.dev[dst:dst+bs], d.model.dev[src:src+bs])
		d.count["cow"]++
	}
	if res.Committed > 0 {
		d.count["commit"]++
	}
	old := len(s.tokens)
	s.tokens = append(s.tokens, toks...)
	s.blocks = max(s.blocks, ceilDiv(len(s.tokens)+look, bs))
	d.write(id, old)
	d.count["append"]++
}

func (d *driver) fork() {
	id, s, ok := d.pick()
	if !ok || len(d.model.seqs) >= 24 {
		d.finish()
		return
	}
	d.next++
	child := d.next
	d.note("fork %d %d", id, child)
	if err := d.m.Fork(id, child); err != nil {
		d.fatalf("fork: %v", err)
	}
	d.model.seqs[child] = &modelSeq{ns: s.ns, tokens: slices.Clone(s.tokens), blocks: ceilDiv(len(s.tokens), d.cfg.bs)}
	d.count["fork"]++
}

func (d *driver) truncate() {
	id, s, ok := d.pick()
	if !ok {
		return
	}
	n := d.intn(len(s.tokens) + 1)
	d.note("truncate %d %d", id, n)
	if err := d.m.Truncate(id, n); err != nil {
		d.fatalf("truncate: %v", err)
	}
	s.tokens = s.tokens[:n]
	s.blocks = ceilDiv(n, d.cfg.bs)
	d.count["truncate"]++
}

func (d *driver) finish() {
	id, _, ok := d.pick()
	if !ok {
		return
	}
	d.note("finish %d", id)
	if err := d.m.Finish(id); err != nil {
		d.fatalf("finish: %v", err)
	}
	delete(d.model.seqs, id)
	d.count["finish"]++
}

func (d *driver) abort() {
	id, _, ok := d.pick()
	if !ok {
		return
	}
	d.note("abort %d", id)
	if err := d.m.Abort(id); err != nil {
		d.fatalf("abort: %v", err)
	}
	delete(d.model.seqs, id)
	d.count["abort"]++
}

func (d *driver) preempt() {
	req := blocktable.PreemptRequest{Need: 1 + d.intn(8)}
	if id, _, ok := d.pick(); ok && d.intn(2) == 0 {
		req.Protect = []blocktable.SeqID{id}
	}
	d.note("preempt need=%d protect=%v", req.Need, req.Protect)
	// Preempting every candidate frees what they hold together (forks share blocks), and
	// what it makes available is exactly the drop in blocks held: table entries and the
	// cached paths to them (a cached block stays pinned while a block below it is held).
	held := d.held()
	tables := map[blocktable.SeqID][]blocks.ID{}
	without := slices.Clone(held)
	for id := range d.model.seqs {
		tbl, _ := d.m.Blocks(id)
		tables[id] = slices.Clone(tbl)
		if !slices.Contains(req.Protect, id) {
			dropHolder(without, tables[id])
		}
	}
	holding := d.model.holding(held)
	all := holding - d.model.holding(without)
	var before string
	if all < req.Need && d.deep() {
		before = d.snapshot()
	}
	out, err := d.m.Preempt(req, nil)
	if err != nil {
		if !errors.Is(err, blocks.ErrOutOfBlocks) || all >= req.Need {
			d.fatalf("preempt: %v, with %d blocks to gain from all candidates for %d", err, all, req.Need)
		}
		d.requireUnchanged(before, "preempt")
		d.count["preempt-oob"]++
		return
	}
	if all < req.Need {
		d.fatalf("preempt succeeded with %d blocks to gain from all candidates for %d", all, req.Need)
	}
	after := slices.Clone(held)
	for _, p := range out {
		s, ok := d.model.seqs[p.Seq]
		if !ok || slices.Contains(req.Protect, p.Seq) || d.m.Contains(p.Seq) || p.Tokens != len(s.tokens) {
			d.fatalf("preempt: bad victim %+v", p)
		}
		dropHolder(after, tables[p.Seq])
		if len(d.waiting) < 32 && len(s.tokens) > 0 {
			d.waiting = append(d.waiting, waitingSeq{ns: s.ns, tokens: s.tokens})
		}
		delete(d.model.seqs, p.Seq)
	}
	// What the victims really made available must cover the need: a Preempt that reports
	// success and leaves the caller short is a bug.
	freed := 0
	for _, p := range out {
		freed += p.Freed
	}
	if gain := holding - d.model.holding(after); gain < req.Need || freed != gain {
		d.fatalf("preempt %v: made %d blocks available (reported %d) for %d needed", out, gain, freed, req.Need)
	}
	d.count["preempt"]++
}

// dropHolder removes a table's entries from held.
func dropHolder(held holders, tbl []blocks.ID) {
	for _, b := range tbl {
		held[b]--
	}
}

func (d *driver) evict() {
	n := 1 + d.intn(4)
	d.note("evict %d", n)
	want := min(n, d.model.reclaimable(d.held()))
	got := d.env.Index.Evict(n)
	if got != want || d.model.removed != got {
		d.fatalf("evict %d: evicted %d, events removed %d, the model predicts %d", n, got, d.model.removed, want)
	}
	if got > 0 {
		d.count["evict"]++
	}
}

func (d *driver) reset() {
	d.note("reset")
	_, npinned := d.model.pinned(d.held())
	ok := npinned == 0
	var before string
	if !ok && d.deep() {
		before = d.snapshot()
	}
	err := d.env.Index.Reset()
	switch {
	case ok && err != nil:
		d.fatalf("reset refused with nothing held: %v", err)
	case !ok && !errors.Is(err, prefix.ErrBlocksHeld):
		d.fatalf("reset while blocks are held: %v", err)
	case !ok:
		d.requireUnchanged(before, "reset")
	case !d.model.cleared || d.model.cached != 0:
		d.fatalf("reset: the index did not report clearing its blocks")
	default:
		d.count["reset"]++
	}
}

// badInput makes one invalid call: it must fail with the right sentinel and change
// nothing, counters included.
func (d *driver) badInput() {
	id, s, ok := d.pick()
	unknown := d.next + 1000
	type bad struct {
		name string
		call func() error
		want error
	}
	calls := []bad{
		{"append to an unknown sequence", func() error { _, err := d.m.Append(unknown, []int32{1}, 0); return err }, blocktable.ErrUnknownSeq},
		{"finish an unknown sequence", func() error { return d.m.Finish(unknown) }, blocktable.ErrUnknownSeq},
		{"fork an unknown sequence", func() error { return d.m.Fork(unknown, unknown+1) }, blocktable.ErrUnknownSeq},
		{"admit an empty prompt", func() error { _, err := d.m.Admit(unknown, &blocktable.Request{}); return err }, blocktable.ErrInvalidArgument},
		{"preempt a negative need", func() error { _, err := d.m.Preempt(blocktable.PreemptRequest{Need: -1}, nil); return err }, blocktable.ErrInvalidArgument},
	}
	if ok {
		calls = append(calls,
			bad{"admit a duplicate", func() error {
				_, err := d.m.Admit(id, &blocktable.Request{Prompt: []int32{1}})
				return err
			}, blocktable.ErrDuplicateSeq},
			bad{"fork onto a running sequence", func() error { return d.m.Fork(id, id) }, blocktable.ErrDuplicateSeq},
			bad{"truncate past the end", func() error { return d.m.Truncate(id, len(s.tokens)+1+d.intn(3)) }, blocktable.ErrInvalidArgument},
			bad{"truncate to a negative length", func() error { return d.m.Truncate(id, -1) }, blocktable.ErrInvalidArgument},
			bad{"append with a negative lookahead", func() error { _, err := d.m.Append(id, []int32{1}, -1); return err }, blocktable.ErrInvalidArgument},
			bad{"swap without lower tiers", func() error { _, err := d.m.PreemptSeq(id, blocktable.Swap); return err }, blocktable.ErrSwapNeedsTiers},
		)
	}
	c := calls[d.intn(len(calls))]
	d.note("bad input: %s", c.name)
	before := d.env.Dump()
	if err := c.call(); !errors.Is(err, c.want) {
		d.fatalf("%s: got %v, want %v", c.name, err, c.want)
	}
	if after := d.env.Dump(); after != before {
		d.fatalf("%s changed the state:\nbefore:\n%s\nafter:\n%s", c.name, before, after)
	}
	d.count["bad"]++
}
