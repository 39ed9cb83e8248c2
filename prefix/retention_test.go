package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entryLog is an evict.Policy (LRU inside) that remembers the last Entry added per key.
type entryLog struct {
	evict.Policy
	last map[int32]evict.Entry
}

func (l *entryLog) Add(e evict.Entry) { l.last[e.Key] = e; l.Policy.Add(e) }

// TestRetentionReachesThePolicy: the retention a Prompt carries is stored with each block
// its Commit caches, given to the policy when the block becomes evictable, updated by a
// later commit that asks for one, and left alone by a commit that asks for none.
func TestRetentionReachesThePolicy(t *testing.T) {
	var log *entryLog
	pool, x := newTestIndex(t, 16, WithPolicy(func(n int, _ evict.Clock) (evict.Policy, error) {
		lru, err := evict.NewLRU(n)
		log = &entryLog{Policy: lru, last: map[int32]evict.Entry{}}
		return log, err
	}))
	sys := Prompt{Tokens: toks(1, 2*testBS), Retention: Retention{Priority: 90, Until: 1000}}
	r := admit(t, x, pool, sys)
	r.finish(t, x)
	leaf := int32(r.ids[1])
	assert.Equal(t, uint8(90), log.last[leaf].Priority)
	assert.Equal(t, uint64(1000), log.last[leaf].PriorityUntil)

	// A request without retention hits the same blocks and commits nothing new: they keep 90.
	plain := Prompt{Tokens: cat(toks(1, 2*testBS), toks(50, testBS))}
	r = admit(t, x, pool, plain)
	r.finish(t, x)
	assert.Equal(t, uint8(0), log.last[int32(r.ids[2])].Priority, "its own block has the default")
	require.Equal(t, 1, x.Evict(1)) // the plain request's block: its parent, the leaf, is a candidate again
	assert.Equal(t, uint8(90), log.last[leaf].Priority, "the system prompt's leaf again, with its retention")

	// A commit that asks for a retention gives it to the blocks it finds cached.
	var c Cursor
	ids, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	_, err = x.Commit(&c, &Prompt{Tokens: toks(1, 2*testBS), Retention: Retention{Priority: 10}}, ids)
	require.NoError(t, err)
	require.NoError(t, pool.Release(ids...))
	assert.Equal(t, uint8(10), log.last[leaf].Priority)
	assert.Zero(t, log.last[leaf].PriorityUntil)
	require.NoError(t, x.CheckInvariants())
}
