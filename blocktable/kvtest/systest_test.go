package kvtest_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
)

var (
	sysOps  = flag.Int("kvtest.ops", 100_000, "operations of TestSystemStateMachine, spread over its configurations (try -kvtest.ops=5000000 locally)")
	sysSeed = flag.Uint64("kvtest.seed", 1, "seed of TestSystemStateMachine")
)

// minCIOps is the least number of operations the plain CI run must perform.
const minCIOps = 100_000

type sysConfig struct {
	name      string
	blocks    int
	bs        int
	watermark float64
}

// sysConfigs are the shapes the whole-system test runs: a tight pool (constant eviction
// and preemption), small blocks with a watermark, and a roomy pool (long cached paths).
var sysConfigs = []sysConfig{
	{name: "tight-bs4", blocks: 41, bs: 4},
	{name: "bs2-watermark", blocks: 49, bs: 2, watermark: 0.1},
	{name: "roomy-bs8", blocks: 65, bs: 8},
}

// TestSystemStateMachine drives the whole stack (pool, prefix index, tables, Manager)
// with random admit, append, commit (an append that fills a block), fork, truncate,
// finish, abort, preempt, readmit, evict, reset and invalid calls, across many sequences
// and four namespaces, against the reference model of systest_model_test.go. After every
// step it checks, against the model: every refcount equals its number of holders (table
// entries plus the index's one reference per cached block), block conservation (free +
// evictable + held = capacity), the exact evictable count, the cached set, every
// sequence's tokens and table length, and the content of every table entry and cached
// block in a fake device memory. It also predicts every out-of-memory refusal, every prefix
// hit and every eviction count. The plain and kvinvariants runs do at least 100,000
// operations (a quarter under -race); -kvtest.ops sets how many, -kvtest.seed the seed.
func TestSystemStateMachine(t *testing.T) {
	total := *sysOps
	explicit := flagSet("kvtest.ops")
	if !explicit && raceDetector {
		total /= 4
	}
	per := (total + len(sysConfigs) - 1) / len(sysConfigs)
	done := 0
	for i, c := range sysConfigs {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t, c, *sysSeed+uint64(i))
			for range per {
				d.step()
			}
			d.drain()
			d.requireCoverage()
			done += d.ops
		})
	}
	t.Logf("%d operations", done)
	if !explicit && !raceDetector && done < minCIOps {
		t.Fatalf("ran %d operations, want at least %d", done, minCIOps)
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type waitingSeq struct {
	ns     prefix.Namespace
	tokens []int32
}

type driver struct {
	t       *testing.T
	cfg     sysConfig
	env     *kvtest.Env
	m       *blocktable.Manager
	model   *sysModel
	rng     *rand.Rand
	next    blocktable.SeqID
	waiting []waitingSeq
	systems [][]int32
	spaces  []prefix.Namespace
	recent  []string
	ops     int
	unique  int32
	count   map[string]int // outcomes seen, for requireCoverage
}

func newDriver(t *testing.T, c sysConfig, seed uint64) *driver {
	d := &driver{
		t:      t,
		cfg:    c,
		rng:    rand.New(rand.NewPCG(seed, 0x6b767465)),
		spaces: []prefix.Namespace{{}, {Salt: "a"}, {Salt: "b"}, {LoRA: "x"}},
		count:  map[string]int{},
		unique: 1_000_000,
	}
	d.model = newSysModel(c.blocks, c.bs)
	d.env = kvtest.New(t, kvtest.Config{Blocks: c.blocks, BlockSize: c.bs, Watermark: c.watermark, Observer: d.model})
	d.m = d.env.Manager
	d.model.held = d.held
	// Shared system prompts of assorted lengths, so that prompts share whole blocks, part
	// of a block, or nothing.
	for _, n := range []int{0, 3, 8, 13, 21, 30} {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(500 + 7*n + i)
		}
		d.systems = append(d.systems, s)
	}
	return d
}

func (d *driver) intn(n int) int { return d.rng.IntN(n) }

// note remembers the last operations for a failure report.
func (d *driver) note(format string, args ...any) {
	if len(d.recent) == 24 {
		d.recent = d.recent[1:]
	}
	d.recent = append(d.recent, fmt.Sprintf("%d: ", d.ops)+fmt.Sprintf(format, args...))
}

func (d *driver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s: step %d (seed %d): %s\nrecent operations:\n  %s\nstate:\n%s", d.cfg.name, d.ops, *sysSeed,
		fmt.Sprintf(format, args...), strings.Join(d.recent, "\n  "), d.env.Dump())
}

// running returns the running sequences in ID order.
func (d *driver) running() []blocktable.SeqID {
	ids := make([]blocktable.SeqID, 0, len(d.model.seqs))
	for id := range d.model.seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (d *driver) pick() (blocktable.SeqID, *modelSeq, bool) {
	ids := d.running()
	if len(ids) == 0 {
		return 0, nil, false
	}
	id := ids[d.intn(len(ids))]
	return id, d.model.seqs[id], true
}

// held counts the table entries of running sequences per block.
func (d *driver) held() holders {
	h := make(holders, d.env.Pool.NumBlocks())
	for id := range d.model.seqs {
		tbl, err := d.m.Blocks(id)
		if err != nil {
			continue // caught by verify
		}
		for _, b := range tbl {
			h[b]++
		}
	}
	return h
}

func (d *driver) refcount(held holders, b blocks.ID) int {
	n := int(held[b])
	if d.model.cache[b] != nil {
		n++
	}
	return n
}

// snapshot is the state dump without counter lines (a refused admission counts itself).
func (d *driver) snapshot() string {
	lines := strings.Split(d.env.Dump(), "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, "counters ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// deep says whether to compare whole-state dumps around a call the model predicts will
// be refused: always early on, then one step in eight (a dump costs more than the rest of
// a step; the per-step checks still cover refcounts, tables and the cache every time).
func (d *driver) deep() bool { return d.ops <= 5000 || d.ops%8 == 0 }

func (d *driver) requireUnchanged(before, op string) {
	d.t.Helper()
	if before == "" {
		return
	}
	if after := d.snapshot(); after != before {
		d.fatalf("%s failed but changed the state:\nbefore:\n%s\nafter:\n%s", op, before, after)
	}
}

func (d *driver) step() {
	d.ops++
	d.model.stored, d.model.removed, d.model.cleared = 0, 0, false
	switch r := d.intn(100); {
	case r < 17:
		d.admitNew()
	case r < 21:
		d.readmit()
	case r < 47:
		d.appendTokens(false)
	case r < 55:
		d.appendTokens(true)
	case r < 61:
		d.fork()
	case r < 67:
		d.truncate()
	case r < 79:
		d.finish()
	case r < 83:
		d.abort()
	case r < 90:
		d.preempt()
	case r < 95:
		d.evict()
	case r < 96:
		d.reset()
	default:
		d.badInput()
	}
	d.env.Log.Take()
	d.verify()
}

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
		var oob *blocktable.OutOfBlocksError
		if !errors.As(err, &oob) || !errors.Is(err, blocks.ErrOutOfBlocks) {
			d.fatalf("admit: unexpected error %v", err)
		}
		if fits {
			d.fatalf("admit refused (%v) but the model counts %d blocks needed, %d available", err, need+wm, avail)
		}
		if oob.Needed != need+wm || oob.Available != avail {
			d.fatalf("admit: error says need %d, available %d; the model counts %d, %d", oob.Needed, oob.Available, need+wm, avail)
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
		if !errors.Is(err, blocktable.ErrOutOfBlocks) {
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
	// The Manager counts a block as freed when its last sequence holder leaves it, and
	// preempting every candidate frees what they hold together (forks share blocks).
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
	all := 0
	for b, h := range held {
		if h > 0 && without[b] == 0 {
			all++
		}
	}
	var before string
	if all < req.Need && d.deep() {
		before = d.snapshot()
	}
	holding := d.model.holding(held)
	out, err := d.m.Preempt(req, nil)
	if err != nil {
		if !errors.Is(err, blocktable.ErrOutOfBlocks) || all >= req.Need {
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
	// What the victims really freed: the Manager's count, less the released cached blocks
	// that stay pinned because a cached block below them is held (a sequence whose own
	// copy was a duplicate holds the children of the index's copy, not the copy), plus
	// cached ancestors that no victim held but that the release unpinned.
	counted, stillPinned := 0, 0
	pinnedAfter, _ := d.model.pinned(after)
	for b, h := range held {
		if h > 0 && after[b] == 0 {
			counted++
			if d.model.cache[b] != nil && pinnedAfter[b] {
				stillPinned++
			}
		}
	}
	gain := holding - d.model.holding(after)
	if counted < req.Need || gain < counted-stillPinned {
		d.fatalf("preempt %v: the Manager counts %d freed for %d needed, really %d (%d released cached blocks still pinned)", out, counted, req.Need, gain, stillPinned)
	}
	if gain < req.Need {
		d.count["preempt-short"]++ // see the report of issue 8: Preempt's count is optimistic here
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
			bad{"swap without a host pool", func() error { _, err := d.m.PreemptSeq(id, blocktable.Swap); return err }, blocktable.ErrNoHostPool},
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

// verify checks the stack against the model after every step.
func (d *driver) verify() {
	d.t.Helper()
	if d.model.err != nil {
		d.fatalf("index events: %v", d.model.err)
	}
	bs := d.cfg.bs
	ids := d.m.Seqs(nil)
	slices.Sort(ids)
	if !slices.Equal(ids, d.running()) {
		d.fatalf("the Manager knows sequences %v, the model %v", ids, d.running())
	}
	held := d.held()
	for _, id := range ids {
		s := d.model.seqs[id]
		toks, err := d.m.Tokens(id)
		if err != nil || !slices.Equal(toks, s.tokens) {
			d.fatalf("seq %d: tokens %v (%v), the model %v", id, toks, err, s.tokens)
		}
		tbl, _ := d.m.Blocks(id)
		if len(tbl) != s.blocks {
			d.fatalf("seq %d: table of %d blocks, the model %d", id, len(tbl), s.blocks)
		}
		for p, tok := range s.tokens {
			if got := d.model.dev[int(tbl[p/bs])*bs+p%bs]; got != tok {
				d.fatalf("seq %d position %d (block %d) reads token %d, wrote %d", id, p, tbl[p/bs], got, tok)
			}
		}
	}
	capacity := d.env.Pool.Capacity()
	for i := range d.env.Pool.NumBlocks() {
		b := blocks.ID(i)
		if got, want := d.env.Pool.RefCount(b), d.refcount(held, b); got != want {
			d.fatalf("block %d: refcount %d, holders %d (%d table entries, cached=%v)", b, got, want, held[b], d.model.cache[b] != nil)
		}
		c := d.model.cache[b]
		cached := c != nil
		if d.env.Index.IsCached(b) != cached {
			d.fatalf("block %d: the index says cached=%v, the model %v", b, !cached, cached)
		}
		if cached && !slices.Equal(d.model.dev[i*bs:(i+1)*bs], c.tokens) {
			d.fatalf("cached block %d holds %v but caches tokens %v", b, d.model.dev[i*bs:(i+1)*bs], c.tokens)
		}
	}
	evictable := d.model.reclaimable(held)
	if got := d.env.Index.Reclaimable(); got != evictable {
		d.fatalf("the index can reclaim %d blocks, the model %d", got, evictable)
	}
	holding := d.model.holding(held)
	free := d.env.Pool.Stats().Free
	if free+evictable+holding != capacity {
		d.fatalf("conservation: free %d + evictable %d + held %d != capacity %d", free, evictable, holding, capacity)
	}
	if got := d.env.Blocks(); got.Free != free || got.Evictable != evictable || got.Held != holding {
		d.fatalf("Env.Blocks %+v disagrees with the model (free %d, evictable %d, held %d)", got, free, evictable, holding)
	}
	// The stack's own full check is O(blocks x depth): every step at first, then sampled.
	if d.ops <= 2000 || d.ops%64 == 0 {
		if err := d.env.Check(); err != nil {
			d.fatalf("%v", err)
		}
	}
}

// drain ends every sequence, half finished and half aborted, and checks for leaks.
func (d *driver) drain() {
	for i, id := range d.running() {
		var err error
		if i%2 == 0 {
			err = d.m.Finish(id)
		} else {
			err = d.m.Abort(id)
		}
		if err != nil {
			d.fatalf("drain: %v", err)
		}
		delete(d.model.seqs, id)
		d.verify()
	}
	if err := d.env.CheckLeaks(); err != nil {
		d.fatalf("%v", err)
	}
}

// requireCoverage fails if the random walk never reached an outcome it is meant to test.
func (d *driver) requireCoverage() {
	if d.ops < 10_000 {
		return
	}
	for _, k := range []string{"admit", "admit-hit", "admit-oob", "readmit", "append", "append-oob", "commit", "cow",
		"fork", "truncate", "finish", "abort", "preempt", "preempt-oob", "evict", "reset", "bad"} {
		if d.count[k] == 0 {
			d.t.Errorf("%s: the walk never produced %q (%v)", d.cfg.name, k, d.count)
		}
	}
	d.t.Logf("%s: %v", d.cfg.name, d.count)
}
