package kvtest_test

import (
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
