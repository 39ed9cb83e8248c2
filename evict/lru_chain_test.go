package evict

import (
	"math/rand/v2"
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// twoLRUs returns two empty LRUs over keys, the first also as its *lru for the fast paths.
func twoLRUs(t *testing.T, keys int) (Policy, Policy, *lru) {
	t.Helper()
	a, err := NewLRU(keys)
	require.NoError(t, err)
	b, err := NewLRU(keys)
	require.NoError(t, err)
	return a, b, a.(*lru)
}

// TestLRUAddVictimIsAddThenVictim drives two LRUs with the same seeded calls, one taking
// AddVictim where the other takes Add then Victim (the prefix index's chain eviction,
// internal/evictfast), and requires the same victims, lengths and valid heaps throughout:
// the written-out common step must leave exactly the state the two calls leave.
func TestLRUAddVictimIsAddThenVictim(t *testing.T) {
	const keys = 64
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a, b, fast := twoLRUs(t, keys)
		now := uint64(1000)
		for step := 0; step < 5000; step++ {
			key := int32(rng.IntN(keys))
			// Old times as well as new: a parent's last access is older than its child's.
			t0 := now - uint64(rng.IntN(900))
			switch op := rng.IntN(10); {
			case op < 3:
				now++
				a.Add(Entry{Key: key, LastAccess: now})
				b.Add(Entry{Key: key, LastAccess: now})
			case op < 4:
				require.Equal(t, b.Remove(key), a.Remove(key))
			case op < 6:
				ka, oka := a.Victim()
				kb, okb := b.Victim()
				require.Equal(t, kb, ka)
				require.Equal(t, okb, oka)
			default:
				ka, oka := fast.AddVictim(key, t0)
				b.Add(Entry{Key: key, LastAccess: t0})
				kb, okb := b.Victim()
				require.Equal(t, kb, ka, "seed %d step %d", seed, step)
				require.Equal(t, okb, oka)
			}
			require.Equal(t, b.Len(), a.Len())
			require.NoError(t, fast.check(), "seed %d step %d", seed, step)
		}
	}
}

// TestLRUAddAfterVictimIsAdd drives two LRUs with the same seeded calls, one taking
// AddAfterVictim where the other takes Add, for a key that is no candidate (the prefix
// index's one-block eviction: the victim's parent), both right after a Victim and at any
// other time (AddAt's path), and requires the same victims, lengths and valid heaps.
func TestLRUAddAfterVictimIsAdd(t *testing.T) {
	const keys = 64
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		a, b, fast := twoLRUs(t, keys)
		in := map[int32]bool{}
		now := uint64(1000)
		for step := 0; step < 5000; step++ {
			key := int32(rng.IntN(keys))
			switch op := rng.IntN(10); {
			case op < 3:
				now++
				a.Add(Entry{Key: key, LastAccess: now})
				b.Add(Entry{Key: key, LastAccess: now})
				in[key] = true
			case op < 4:
				require.Equal(t, b.Remove(key), a.Remove(key))
				delete(in, key)
			case op < 7:
				ka, oka := a.Victim()
				kb, okb := b.Victim()
				require.Equal(t, kb, ka, "seed %d step %d", seed, step)
				require.Equal(t, okb, oka)
				delete(in, ka)
			default:
				if in[key] {
					continue // AddAfterVictim's caller knows the key is no candidate
				}
				// Old times as well as new: a parent's last access is older than its child's.
				t0 := now - uint64(rng.IntN(900))
				fast.AddAfterVictim(key, t0)
				b.Add(Entry{Key: key, LastAccess: t0})
				in[key] = true
			}
			require.Equal(t, b.Len(), a.Len())
			require.NoError(t, fast.check(), "seed %d step %d", seed, step)
		}
	}
}

// Under the kvinvariants tag, AddAfterVictim of a key that is already a candidate (its
// caller's broken precondition) panics instead of falling back to AddAt, which would
// re-rank the key and hide the caller's bug.
func TestLRUAddAfterVictimRefusesACandidateUnderInvariants(t *testing.T) {
	if !invariant.Enabled {
		t.Skip("the check runs under -tags kvinvariants")
	}
	_, _, p := twoLRUs(t, 8)
	p.Add(Entry{Key: 3, LastAccess: 5})
	p.Add(Entry{Key: 4, LastAccess: 6})
	_, ok := p.Victim()
	require.True(t, ok)
	require.Panics(t, func() { p.AddAfterVictim(4, 7) })
}
