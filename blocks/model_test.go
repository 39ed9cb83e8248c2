package blocks

import (
	"errors"
	"slices"

	"github.com/stretchr/testify/require"
)

// model is a trivially correct reference for Pool with a fakeCache plugged in: a map of
// refcounts, a slice of free IDs in FIFO order, and the cache's list, each operation done
// the obvious way on copies and committed only if it succeeds.
type model struct {
	numBlocks int
	hasNull   bool
	refs      map[ID]int
	free      []ID
	cached    []ID

	allocs, releases, failed, reclaimed uint64
}

func newModel(numBlocks int, hasNull bool) *model {
	m := &model{numBlocks: numBlocks, hasNull: hasNull, refs: map[ID]int{}}
	for id := range numBlocks {
		if hasNull && id == 0 {
			continue
		}
		m.free = append(m.free, ID(id))
	}
	return m
}

func (m *model) capacity() int {
	if m.hasNull {
		return m.numBlocks - 1
	}
	return m.numBlocks
}

// check returns the sentinel error an operation on id should fail with, given refcounts,
// or nil.
func (m *model) check(id ID, refs map[ID]int, freeErr error) error {
	switch {
	case id < 0 || int(id) >= m.numBlocks:
		return ErrUnknownBlock
	case m.hasNull && id == NullID:
		return ErrNullBlock
	case refs[id] == 0:
		return freeErr
	}
	return nil
}

// retain returns the offending ID and the sentinel, or nil.
func (m *model) retain(ids []ID) (ID, error) {
	for _, id := range ids {
		if err := m.check(id, m.refs, ErrNotAllocated); err != nil {
			return id, err
		}
	}
	for _, id := range ids {
		m.refs[id]++
	}
	return 0, nil
}

func (m *model) release(ids []ID) (ID, error) {
	refs := make(map[ID]int, len(m.refs))
	for id, r := range m.refs {
		refs[id] = r
	}
	free := slices.Clone(m.free)
	for _, id := range ids {
		if err := m.check(id, refs, ErrDoubleFree); err != nil {
			return id, err
		}
		refs[id]--
		if refs[id] == 0 {
			delete(refs, id)
			free = append(free, id)
		}
	}
	m.releases += uint64(len(free) - len(m.free))
	m.refs, m.free = refs, free
	return 0, nil
}

func (m *model) reclaimable() int {
	n := 0
	for _, id := range m.cached {
		if m.refs[id] == 1 {
			n++
		}
	}
	return n
}

// allocate returns the IDs handed out, or the error's Requested/Available figures.
func (m *model) allocate(n int) (ids []ID, err error) {
	if n < 0 {
		return nil, ErrInvalidArgument
	}
	if n > len(m.free) {
		avail := len(m.free) + m.reclaimable()
		if avail < n {
			m.failed++
			return nil, &OutOfBlocksError{Requested: n, Available: avail}
		}
		// The cache evicts exactly the shortfall, oldest cached first, skipping blocks
		// someone else still holds.
		need := n - len(m.free)
		var kept []ID
		for _, id := range m.cached {
			if need > 0 && m.refs[id] == 1 {
				delete(m.refs, id)
				m.free = append(m.free, id)
				m.releases++
				m.reclaimed++
				need--
				continue
			}
			kept = append(kept, id)
		}
		m.cached = kept
	}
	ids = slices.Clone(m.free[:n])
	m.free = m.free[n:]
	for _, id := range ids {
		m.refs[id] = 1
	}
	m.allocs += uint64(n)
	return ids, nil
}

func (m *model) cache(id ID) (ID, error) {
	if slices.Contains(m.cached, id) {
		return 0, nil
	}
	if bad, err := m.retain([]ID{id}); err != nil {
		return bad, err
	}
	m.cached = append(m.cached, id)
	return 0, nil
}

func (m *model) uncache(i int) (ID, error) {
	if bad, err := m.release([]ID{m.cached[i]}); err != nil {
		return bad, err
	}
	m.cached = slices.Delete(slices.Clone(m.cached), i, i+1)
	return 0, nil
}

func (m *model) held() []ID {
	ids := make([]ID, 0, len(m.refs))
	for id := range m.refs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *model) stats() Stats {
	c := m.capacity()
	return Stats{
		Capacity: c, Free: len(m.free), InUse: c - len(m.free), Reclaimable: m.reclaimable(),
		Allocations: m.allocs, Releases: m.releases, FailedAllocations: m.failed, Reclaimed: m.reclaimed,
	}
}

// opKind is one step of a generated or fuzzed sequence.
type opKind int

const (
	opAllocate opKind = iota
	opRetain
	opRelease
	opCache
	opUncache
	numOpKinds
)

type op struct {
	kind opKind
	n    int  // opAllocate: the count; opUncache: the index into the cache
	ids  []ID // opRetain, opRelease, opCache (one ID)
}

// harness drives a real pool and the model with the same operations and requires that they
// agree on every result, every handed-out ID and the whole state after every step. It
// compares first and calls testify only on a mismatch: testify's t.Helper calls would
// otherwise take half of the fuzzer's time.
type harness struct {
	pool  *Pool
	cache *fakeCache
	model *model
}

func newHarness(t require.TestingT, numBlocks int, hasNull bool) *harness {
	var opts []Option
	if hasNull {
		opts = append(opts, WithNullBlock())
	}
	p, err := New(numBlocks, opts...)
	require.NoError(t, err)
	return &harness{pool: p, cache: newFakeCache(p), model: newModel(numBlocks, hasNull)}
}

func (h *harness) apply(t require.TestingT, o op) {
	before := takeSnapshot(h.pool)
	cachedBefore := slices.Clone(h.cache.cached)
	var (
		got, want       error
		badID           ID
		failedAllocates uint64
	)
	switch o.kind {
	case opAllocate:
		dst := make([]ID, 1, 1+max(o.n, 0))
		dst[0] = -7 // Allocate appends after what the caller already has
		var ids []ID
		dst, got = h.pool.Allocate(dst, o.n)
		ids, want = h.model.allocate(o.n)
		if want == nil {
			requireSameIDs(t, append([]ID{-7}, ids...), dst, "Allocate's IDs")
		} else {
			requireSameIDs(t, []ID{-7}, dst, "a failed Allocate returns dst unchanged")
		}
		if oob, ok := want.(*OutOfBlocksError); ok {
			var gotOOB *OutOfBlocksError
			if !errors.As(got, &gotOOB) || *oob != *gotOOB {
				require.Equal(t, oob, got, "op %+v", o)
			}
			want, failedAllocates = ErrOutOfBlocks, 1
		}
	case opRetain:
		got = h.pool.Retain(o.ids...)
		badID, want = h.model.retain(o.ids)
	case opRelease:
		got = h.pool.Release(o.ids...)
		badID, want = h.model.release(o.ids)
	case opCache:
		got = h.cache.cache(o.ids[0])
		badID, want = h.model.cache(o.ids[0])
	case opUncache:
		if len(h.model.cached) == 0 {
			return
		}
		i := o.n % len(h.model.cached)
		got = h.cache.uncache(i)
		badID, want = h.model.uncache(i)
	}
	switch {
	case want == nil:
		if got != nil {
			require.NoError(t, got, "op %+v", o)
		}
	default:
		if !errors.Is(got, want) {
			require.ErrorIs(t, got, want, "op %+v", o)
		}
		if want != ErrOutOfBlocks && want != ErrInvalidArgument {
			var be *BlockError
			if !errors.As(got, &be) || be.ID != badID {
				require.Equal(t, &BlockError{ID: badID, Err: want}, got, "the error names the first offending block")
			}
		}
		before.Stats.FailedAllocations += failedAllocates
		if !before.equal(takeSnapshot(h.pool)) {
			requireUnchanged(t, before, h.pool, 0)
		}
		requireSameIDs(t, cachedBefore, h.cache.cached, "a rejected call leaves the cache as it was")
	}
	h.requireAgree(t)
}

// requireAgree compares the whole pool with the model and checks the invariants.
func (h *harness) requireAgree(t require.TestingT) {
	if err := h.pool.CheckInvariants(); err != nil {
		require.NoError(t, err)
	}
	m := h.model
	if want, got := m.stats(), h.pool.Stats(); want != got {
		require.Equal(t, want, got, "stats")
	}
	requireSameIDs(t, m.free, freeOrder(h.pool), "free list order")
	requireSameIDs(t, m.cached, h.cache.cached, "cache contents")
	// Every refcount, including those of the IDs just outside the pool.
	for id := ID(-1); int(id) <= m.numBlocks; id++ {
		if m.refs[id] != h.pool.RefCount(id) {
			require.Equal(t, m.refs[id], h.pool.RefCount(id), "refcount of block %d", id)
		}
	}
}

// requireSameIDs compares two ID lists, nil and empty alike.
func requireSameIDs(t require.TestingT, want, got []ID, msg string) {
	if !slices.Equal(want, got) {
		require.Equal(t, want, got, msg)
	}
}
