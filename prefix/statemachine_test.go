package prefix

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"pgregory.net/rapid"
)

// machine drives an index and the reference model with the same random operations and
// compares them after every step: matches, commit results, eviction victims in order,
// reclaimable counts, and CheckInvariants on both the index and the pool.
type machine struct {
	pool    *blocks.Pool
	x       *Index
	m       *model
	reqs    []*mreq
	evicted []blocks.ID
	stored  int
	bs      int
}

type mreq struct {
	p         Prompt
	ids       []blocks.ID
	committed int // blocks passed by the cursor
	cur       Cursor
	detached  bool
}

var machineNamespaces = []Namespace{{}, {LoRA: "a"}, {Salt: "s"}}

func newMachine(t *rapid.T) *machine {
	bs := rapid.SampledFrom([]int{4, 16}).Draw(t, "blockSize")
	mc := &machine{m: newModel(bs), bs: bs}
	n := rapid.IntRange(4, 24).Draw(t, "poolBlocks")
	var err error
	mc.pool, err = blocks.New(n, blocks.WithNullBlock())
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithObserver(&recorder{
		onRemoved: func(ids []blocks.ID) { mc.evicted = append(mc.evicted, ids...) },
		onStored:  func(e *BlockStored) { mc.stored += len(e.Blocks) },
	})}
	if rapid.Bool().Draw(t, "sha256") {
		opts = append(opts, WithHasher(NewSHA256()))
	}
	if rapid.Bool().Draw(t, "evictLRU") {
		lru, err := evict.ByName("lru") // the WithPolicy path, with the default's order
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithPolicy(lru))
	}
	if rapid.Bool().Draw(t, "collide") {
		opts = append(opts, withKeyMask(0x3)) // four keys for every block: constant collisions
	}
	if rapid.Bool().Draw(t, "mmPairs") {
		mc.m.pairs = true
		opts = append(opts, WithMMKeyForm(MMKeyIdentifierOffset))
	}
	mc.x, err = New(mc.pool, bs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// drawPrompt draws a prompt over a tiny alphabet so that prefixes are shared often.
// With blocks of 16, tokens are mostly 0 so that whole blocks still repeat.
func drawPrompt(t *rapid.T, bs int) Prompt {
	p := Prompt{Namespace: rapid.SampledFrom(machineNamespaces).Draw(t, "ns")}
	n := rapid.IntRange(1, 5*bs).Draw(t, "len")
	p.Tokens = make([]int32, n)
	for i := range p.Tokens {
		p.Tokens[i] = drawToken(t, bs)
	}
	if rapid.IntRange(0, 4).Draw(t, "mm") == 0 {
		off := rapid.IntRange(0, n-1).Draw(t, "mmOff")
		p.MM = []MMInput{{Hash: rapid.SampledFrom([]string{"x", "y"}).Draw(t, "mmHash"), Offset: off, Length: rapid.IntRange(1, n-off).Draw(t, "mmLen")}}
	}
	return p
}

func drawToken(t *rapid.T, bs int) int32 {
	if bs > 4 {
		return int32(rapid.IntRange(0, 2*bs).Draw(t, "tok") / (2*bs - 1)) // 0 or 1, mostly 0
	}
	return rapid.Int32Range(0, 1).Draw(t, "tok")
}

// allocate allocates n blocks and checks that the victims are the model's, in order.
func (mc *machine) allocate(t *rapid.T, dst []blocks.ID, n int) ([]blocks.ID, bool) {
	if mc.pool.Available() < n {
		return dst, false
	}
	want := mc.m.evict(n - min(n, mc.pool.NumFree()))
	mc.evicted = mc.evicted[:0]
	dst, err := mc.pool.Allocate(dst, n)
	if err != nil {
		t.Fatalf("allocate %d: %v", n, err)
	}
	if !slices.Equal(want, mc.evicted) && !(len(want) == 0 && len(mc.evicted) == 0) {
		t.Fatalf("evicted %v, model evicts %v", mc.evicted, want)
	}
	return dst, true
}

func (mc *machine) commit(t *rapid.T, r *mreq, upto int) {
	ids := r.ids[r.committed:upto]
	want := mc.m.commit(&r.p, r.committed, ids, &r.detached)
	got, err := mc.x.Commit(&r.cur, &r.p, ids)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got != want {
		t.Fatalf("commit blocks %d..%d: got %+v, model %+v", r.committed, upto, got, want)
	}
	r.committed = upto
}

func (mc *machine) Admit(t *rapid.T) {
	r := &mreq{p: drawPrompt(t, mc.bs)}
	leaveOne := rapid.Bool().Draw(t, "leaveOne")
	r.ids, r.cur = mc.x.Peek(nil, &r.p, HitLimit(leaveOne))
	if want := mc.m.match(&r.p, leaveOne); !slices.Equal(r.ids, want) && len(r.ids)+len(want) > 0 {
		t.Fatalf("match %v: got %v, model %v", r.p, r.ids, want)
	}
	r.committed = len(r.ids)
	if err := mc.x.Acquire(r.ids); err != nil {
		t.Fatal(err)
	}
	mc.m.acquire(r.ids)
	need := (len(r.p.Tokens)+mc.bs-1)/mc.bs - len(r.ids)
	var ok bool
	if r.ids, ok = mc.allocate(t, r.ids, need); !ok {
		if err := mc.x.Release(r.ids); err != nil {
			t.Fatal(err)
		}
		mc.m.release(r.ids)
		return
	}
	full := len(r.p.Tokens) / mc.bs
	mc.commit(t, r, rapid.IntRange(r.committed, full).Draw(t, "commitUpTo"))
	mc.reqs = append(mc.reqs, r)
}

func (mc *machine) pick(t *rapid.T) (int, *mreq) {
	if len(mc.reqs) == 0 {
		return -1, nil // no request: the action does nothing (skipping would starve the fuzzer)
	}
	i := rapid.IntRange(0, len(mc.reqs)-1).Draw(t, "req")
	return i, mc.reqs[i]
}

// Grow appends tokens (a decode step or a prefill chunk) and commits every full block.
func (mc *machine) Grow(t *rapid.T) {
	_, r := mc.pick(t)
	if r == nil {
		return
	}
	k := rapid.IntRange(1, 2*mc.bs).Draw(t, "grow")
	need := (len(r.p.Tokens)+k+mc.bs-1)/mc.bs - len(r.ids)
	var ok bool
	if r.ids, ok = mc.allocate(t, r.ids, need); !ok {
		return
	}
	for range k {
		r.p.Tokens = append(r.p.Tokens, drawToken(t, mc.bs))
	}
	mc.commit(t, r, len(r.p.Tokens)/mc.bs)
}

// Finish releases everything a request holds (Abort is the same without the last commit).
func (mc *machine) Finish(t *rapid.T) {
	i, r := mc.pick(t)
	if r == nil {
		return
	}
	if rapid.Bool().Draw(t, "commitFirst") {
		mc.commit(t, r, len(r.p.Tokens)/mc.bs)
	}
	if err := mc.x.Release(r.ids); err != nil {
		t.Fatal(err)
	}
	mc.m.release(r.ids)
	mc.reqs = slices.Delete(mc.reqs, i, i+1)
}

func (mc *machine) Lookup(t *rapid.T) {
	p := drawPrompt(t, mc.bs)
	got, _ := mc.x.Peek(nil, &p, WholePrompt)
	if want := mc.m.match(&p, false); !slices.Equal(got, want) && len(got)+len(want) > 0 {
		t.Fatalf("lookup: got %v, model %v", got, want)
	}
}

func (mc *machine) Evict(t *rapid.T) {
	n := rapid.IntRange(0, 4).Draw(t, "n")
	want := mc.m.evict(n)
	mc.evicted = mc.evicted[:0]
	if got := mc.x.Evict(n); got != len(want) || (len(want) > 0 && !slices.Equal(mc.evicted, want)) {
		t.Fatalf("evict(%d): %d blocks %v, model %v", n, got, mc.evicted, want)
	}
}

func (mc *machine) Reset(t *rapid.T) {
	before := snap(mc.x, mc.pool)
	err := mc.x.Reset()
	if mc.m.held() > 0 {
		if err == nil || snap(mc.x, mc.pool).stats != before.stats {
			t.Fatalf("reset with held blocks: err %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	mc.m.reset()
}

// BadRelease releases a cached block nobody acquired: an error, and nothing changes.
func (mc *machine) BadRelease(t *rapid.T) {
	ids := mc.m.cachedIDs()
	var free []blocks.ID
	for _, id := range ids {
		if mc.m.holders[id] == 0 {
			free = append(free, id)
		}
	}
	if len(free) == 0 {
		return // every cached block is held
	}
	id := rapid.SampledFrom(free).Draw(t, "id")
	before := snap(mc.x, mc.pool)
	if err := mc.x.Release([]blocks.ID{id}); err == nil {
		t.Fatalf("released unacquired block %d", id)
	}
	if after := snap(mc.x, mc.pool); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a failed release changed the state")
	}
}

// EvictBlocks drops a few blocks, mostly cached ones (held or not, leaves or not), as a
// server does for blocks whose KV failed: the model drops them and everything below, in
// the same order as the events; a bad ID fails the call and changes nothing.
func (mc *machine) EvictBlocks(t *rapid.T) {
	cached := mc.m.cachedIDs()
	var ids []blocks.ID
	for range rapid.IntRange(0, 3).Draw(t, "drops") {
		if len(cached) > 0 && rapid.IntRange(0, 3).Draw(t, "dropCached") > 0 {
			ids = append(ids, rapid.SampledFrom(cached).Draw(t, "drop"))
		} else {
			ids = append(ids, blocks.ID(rapid.IntRange(0, mc.pool.NumBlocks()-1).Draw(t, "dropAny")))
		}
	}
	mc.evicted = mc.evicted[:0]
	if rapid.IntRange(0, 7).Draw(t, "dropBad") == 0 {
		bad := rapid.SampledFrom([]blocks.ID{-1, blocks.ID(mc.pool.NumBlocks())}).Draw(t, "badID")
		ids = slices.Insert(ids, rapid.IntRange(0, len(ids)).Draw(t, "badAt"), bad)
		before := snap(mc.x, mc.pool)
		got, err := mc.x.EvictBlocks(nil, ids)
		if !errors.Is(err, ErrInvalidArgument) || len(got) != 0 || len(mc.evicted) != 0 {
			t.Fatalf("evict blocks %v: %v, %v dropped, events %v", ids, err, got, mc.evicted)
		}
		if after := snap(mc.x, mc.pool); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("a failed EvictBlocks changed the state")
		}
		return
	}
	want := mc.m.dropBlocks(ids)
	got, err := mc.x.EvictBlocks(nil, ids)
	if err != nil {
		t.Fatalf("evict blocks %v: %v", ids, err)
	}
	if !slices.Equal(got, want) || !slices.Equal(mc.evicted, want) {
		t.Fatalf("evict blocks %v: dropped %v, events %v, model %v", ids, got, mc.evicted, want)
	}
}

func (mc *machine) Check(t *rapid.T) {
	if err := mc.x.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := mc.pool.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	s := mc.x.Stats()
	if s.Cached != len(mc.m.entries) {
		t.Fatalf("cached %d, model %d", s.Cached, len(mc.m.entries))
	}
	if got, want := mc.x.Reclaimable(), mc.m.reclaimable(); got != want {
		t.Fatalf("reclaimable %d, model %d", got, want)
	}
	if got, want := mc.x.Stats().Inserts-mc.x.Stats().Evictions-mc.x.Stats().Dropped, uint64(s.Cached); got != want {
		t.Fatalf("inserts - evictions - dropped = %d, cached %d", got, want)
	}
	// A namespace has a root with children exactly while the model caches blocks of it,
	// and roots freed come back as slots: never more than there are namespaces.
	for _, ns := range machineNamespaces {
		r := mc.x.rootOf(ns)
		has := r != 0 && mc.x.nodes[r].children > 0
		if want := mc.m.hasNamespace(ns); has != want {
			t.Fatalf("namespace %+v: root %d with children %v, model caches blocks %v", ns, r, has, want)
		}
	}
	if slots := len(mc.x.nodes) - mc.x.nb - 1; slots > len(machineNamespaces) {
		t.Fatalf("%d root slots for %d namespaces", slots, len(machineNamespaces))
	}
	for _, id := range mc.m.cachedIDs() {
		if want := 1 + mc.m.holders[id]; mc.pool.RefCount(id) < want {
			t.Fatalf("block %d: refcount %d, model needs at least %d", id, mc.pool.RefCount(id), want)
		}
	}
}

// leakCheck releases every request and evicts everything: the pool must be whole again.
func (mc *machine) leakCheck(t *rapid.T) {
	for _, r := range mc.reqs {
		if err := mc.x.Release(r.ids); err != nil {
			t.Fatal(err)
		}
	}
	mc.x.Evict(mc.pool.Capacity())
	if mc.x.Stats().Cached != 0 || mc.pool.NumFree() != mc.pool.Capacity() {
		t.Fatalf("leak: %d cached, %d of %d free", mc.x.Stats().Cached, mc.pool.NumFree(), mc.pool.Capacity())
	}
}

func runMachine(t *rapid.T) {
	mc := newMachine(t)
	t.Repeat(neverStuck(map[string]func(*rapid.T){
		"Admit": mc.Admit, "Grow": mc.Grow, "Finish": mc.Finish, "Lookup": mc.Lookup,
		"Evict": mc.Evict, "Reset": mc.Reset, "BadRelease": mc.BadRelease,
		"EvictBlocks": mc.EvictBlocks,
		"":            mc.Check,
	}))
	mc.leakCheck(t)
}

func TestIndexStateMachine(t *testing.T) {
	rapid.Check(t, runMachine)
}

// FuzzIndexOps runs the state machine on fuzzer-chosen bytes.
func FuzzIndexOps(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{255, 0, 255, 0, 255, 0, 17, 42, 99, 3, 3, 3, 3},
		[]byte("two requests share a system prompt, then the pool runs dry"),
	} {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(runMachine))
}
