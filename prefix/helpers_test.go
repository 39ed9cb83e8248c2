package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

const testBS = 4 // small blocks keep scenario tests readable

// newTestIndex returns a pool of n blocks (block 0 reserved as the null block) and an index
// over it with blocks of testBS tokens.
func newTestIndex(t testing.TB, n int, opts ...Option) (*blocks.Pool, *Index) {
	t.Helper()
	pool, err := blocks.New(n, blocks.WithNullBlock())
	require.NoError(t, err)
	x, err := New(pool, testBS, opts...)
	require.NoError(t, err)
	return pool, x
}

// toks returns n tokens base, base+1, ...
func toks(base int32, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = base + int32(i)
	}
	return t
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// request is a sequence driven the way the manager drives the index.
type request struct {
	p   Prompt
	ids []blocks.ID // every block the request holds, in table order
	hit int
	cur Cursor
}

// admit matches p, acquires the hit, allocates the rest of the prompt's blocks (a partial
// last block included) and commits the full ones.
func admit(t testing.TB, x *Index, pool *blocks.Pool, p Prompt) *request {
	t.Helper()
	r := &request{p: p}
	r.ids, r.cur = x.Peek(nil, &r.p, LeaveOne)
	x.RecordLookup(&r.p, r.cur) // admitted: counted once, as the Manager does
	r.hit = len(r.ids)
	require.NoError(t, x.Acquire(r.ids))
	need := (len(p.Tokens)+testBS-1)/testBS - r.hit
	var err error
	r.ids, err = pool.Allocate(r.ids, need)
	require.NoError(t, err)
	full := len(p.Tokens) / testBS
	_, err = x.Commit(&r.cur, &r.p, r.ids[r.hit:full])
	require.NoError(t, err)
	return r
}

func (r *request) finish(t testing.TB, x *Index) {
	t.Helper()
	require.NoError(t, x.Release(r.ids))
}

// snapshot captures everything a failed call must leave unchanged.
type snapshot struct {
	stats Stats
	pool  blocks.Stats
	refs  []int
}

func snap(x *Index, pool *blocks.Pool) snapshot {
	s := snapshot{stats: x.Stats(), pool: pool.Stats()}
	for id := 0; id < pool.NumBlocks(); id++ {
		s.refs = append(s.refs, pool.RefCount(blocks.ID(id)))
	}
	return s
}
