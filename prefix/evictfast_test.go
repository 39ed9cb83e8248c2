package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// lookalikeLRU is a policy with the LRU's fast-path methods but an order of its own: it
// evicts the most recently used candidate first (evict.NewMRU), and its fast-path methods
// would answer as an LRU does. A policy that embeds the LRU and reorders is the case this
// stands for: the index must take the fast paths for exactly evict.NewLRU's policy.
type lookalikeLRU struct {
	evict.Policy
	fastCalls *int
}

func (p lookalikeLRU) AddVictim(key int32, lastAccess uint64) (int32, bool) {
	*p.fastCalls++
	p.Add(evict.Entry{Key: key, LastAccess: lastAccess})
	return p.Victim()
}

func (p lookalikeLRU) AddAt(key int32, lastAccess uint64) {
	*p.fastCalls++
	p.Add(evict.Entry{Key: key, LastAccess: lastAccess})
}

func TestChainFastPathOnlyForTheLRUItself(t *testing.T) {
	calls := 0
	factory := func(capacity int, clock evict.Clock) (evict.Policy, error) {
		inner, err := evict.NewMRU(capacity)
		return lookalikeLRU{Policy: inner, fastCalls: &calls}, err
	}
	pool, x := newTestIndex(t, 9, WithPolicy(factory))
	// Two 4-block chains, released, then an allocation that evicts 5 blocks: chain evictions
	// add each victim's parent, the path that used to call AddVictim on any policy with one.
	for base := int32(0); base < 2; base++ {
		admit(t, x, pool, Prompt{Tokens: toks(100*base, 4*testBS)}).finish(t, x)
	}
	ids, err := pool.Allocate(nil, 5)
	require.NoError(t, err)
	require.Len(t, ids, 5)
	require.Zero(t, calls, "the index took the LRU's fast path through another policy")
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.Release(ids...))

	_, lru := newTestIndex(t, 9)
	require.NotNil(t, lru.chain, "evict.NewLRU's policy lost its fast path")
}
