package blocktable

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// dupStack builds the state a duplicate commit leaves (block size 4): sequences 1 and 2
// fill their first block with the same tokens, so 1's copy a0 is cached and 2's copy b0 is
// a duplicate, left uncached; 2 then fills a second block b1, committed under a0. Sequence 2
// holds b0 and b1 but not a0, which stays pinned by b1 whoever else holds it.
func dupStack(t *testing.T) *stack {
	t.Helper()
	s := newStack(t, 8, 4, Config{})
	for _, id := range []SeqID{1, 2} {
		_, err := s.m.Admit(id, &Request{Prompt: seqOf(2, 1)})
		require.NoError(t, err)
		_, err = s.m.Append(id, seqOf(2, 3), 0)
		require.NoError(t, err)
	}
	_, err := s.m.Append(2, seqOf(4, 50), 0)
	require.NoError(t, err)
	t1, _ := s.m.Blocks(1)
	t2, _ := s.m.Blocks(2)
	require.Len(t, t1, 1)
	require.Len(t, t2, 2)
	require.True(t, s.idx.IsCached(t1[0]), "a0 is cached")
	require.False(t, s.idx.IsCached(t2[0]), "b0 is a duplicate")
	require.True(t, s.idx.IsCached(t2[1]), "b1 is committed under a0")
	return s
}

// Preempting 1 releases a0's last holder, but a0 stays pinned under b1: nothing becomes
// available, so a Preempt that needs one block must refuse rather than report success.
func TestManagerPreemptCountsPinnedParentAsHeld(t *testing.T) {
	s := dupStack(t)
	before := s.pool.Available()
	out, err := s.m.Preempt(PreemptRequest{Need: 1, Protect: []SeqID{2}}, nil)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks, "preempted %v", out)
	require.Empty(t, out)
	require.True(t, s.m.Contains(1))
	require.Equal(t, before, s.pool.Available())
	s.done(t)
}

// Once 1 has finished, a0 is held by nobody but pinned by b1: preempting 2 frees b0,
// makes b1 reclaimable and with it a0, three blocks in all.
func TestManagerPreemptCountsUnpinnedAncestors(t *testing.T) {
	s := dupStack(t)
	require.NoError(t, s.m.Finish(1))
	before := s.pool.Available()
	out, err := s.m.Preempt(PreemptRequest{Need: 3}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, 3, out[0].Freed)
	require.Equal(t, before+3, s.pool.Available())
	s.done(t)
}

// Freeable is what preempting a sequence alone would really make available: 1 frees
// nothing (its a0 stays pinned under 2's b1); 2 frees b0 and b1, and a0 too once 1 is gone.
func TestManagerFreeableCountsPins(t *testing.T) {
	s := dupStack(t)
	freeable := func(id SeqID) int { return s.m.info(s.m.seqs[id], s.m.soleFreeable()).Freeable }
	require.False(t, s.m.soleFreeable(), "2 committed b1 under 1's a0, which it does not hold")
	require.Equal(t, 0, freeable(1))
	require.Equal(t, 2, freeable(2))
	require.NoError(t, s.m.Finish(1))
	require.Equal(t, 3, freeable(2))
	s.done(t)
}

func TestManagerPreemptAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	s := newStack(t, 64, 4, Config{})
	req := &Request{Prompt: seqOf(10, 1), MaxTokens: 16}
	for id := SeqID(1); id <= 3; id++ {
		_, err := s.m.Admit(id, req)
		require.NoError(t, err)
	}
	seq := SeqID(4)
	var out []Preempted
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := s.m.Admit(seq, req); err != nil {
			panic(err)
		}
		var err error
		if out, err = s.m.Preempt(PreemptRequest{Need: 1}, out[:0]); err != nil || len(out) != 1 || out[0].Seq != seq {
			panic(fmt.Sprint(out, err))
		}
		seq++
	})
	require.Zero(t, allocs, "a steady-state Preempt allocates nothing")
	s.done(t)
}

// Resume takes again what the device still caches and loads only the rest from the tiers:
// with the committed path partly evicted from the device while swapped out, the cached head
// is a device hit, the evicted tail a load of what the hold kept in the host tier.
func TestManagerResumeRehitsCachedPrefix(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 0)
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(13, 1)}) // three committed blocks and one partial
	require.NoError(t, err)
	row := slices.Clone(s.m.seqs[1].t.ids)
	_, err = s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	require.Equal(t, 0, s.idx.Evict(1), "blocks awaiting their copy are not evictable")
	s.completeAll(t, true)
	require.Equal(t, 0, s.idx.Stats().Cached, "demoted blocks left the device")
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(9, 1)}) // takes the first two blocks back
	require.NoError(t, err)
	s.completeAll(t, true)
	require.Equal(t, 2, s.idx.Stats().Cached)

	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 8, res.HitTokens, "the cached head is a device hit")
	require.Equal(t, 4, res.LoadTokens, "the tail comes from the hold")
	back := s.m.seqs[1].t.ids
	require.Equal(t, s.m.seqs[2].t.ids[:2], back[:2])
	_ = row
	s.completeAll(t, true)
	require.Equal(t, 3, s.m.seqs[1].committed())
	s.done(t)
}
