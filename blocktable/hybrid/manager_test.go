package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

func seqTokens(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

// A pure sliding-window model (Mistral 7B: one 4,096-token window group) gets prefix
// hits: a hit needs only the blocks the window covers before its end. Once the blocks
// that left the first sequence's window are evicted (nearest the window first, the order
// they were released in), the hit falls back to the cached run from the prompt's start.
func TestPureSlidingWindowHits(t *testing.T) {
	const bs, window = 16, 4096
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.SlidingWindow{Block: bs, Window: window}}, NumBlocks: 700})
	require.NoError(t, err)
	prompt := seqTokens(6000, 0)
	hit, err := m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 6100})
	require.NoError(t, err)
	require.Zero(t, hit)
	require.NoError(t, m.Append(1, []int32{1}))
	tb, _ := m.Table(1, 0)
	released := 0
	for _, b := range tb {
		if b == blocks.NullID {
			released++
		}
	}
	require.Equal(t, (6000-window+1)/bs, released, "blocks wholly outside the window go to the null block")
	require.NoError(t, m.Finish(1))
	require.Equal(t, 5984, m.Match(prompt), "374 blocks: the last 256 before the end are cached")

	// 7 more blocks than were never used: the first 7 released (blocks 118 down to 112).
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(16*(699-376+7), 1<<20), MaxTokens: 16 * 330})
	require.NoError(t, err)
	require.NoError(t, m.Finish(2))
	require.Equal(t, uint64(7), m.Stats().Evictions)
	hit = m.Match(prompt)
	require.Equal(t, 112*bs, hit, "blocks 0-111 are cached and start at the prompt's start")
	got, err := m.Admit(3, &hybrid.Request{Prompt: prompt, MaxTokens: 6100})
	require.NoError(t, err)
	require.Equal(t, hit, got)
	require.NoError(t, m.CheckInvariants())
}

// FreeUncachedFirst reuses a released block that holds no cached prefix before it evicts
// any cached block (vLLM's newer free order); the default keeps vLLM ff1b90a2's order, in
// which it waits its turn at the end of the queue.
func TestFreeUncachedFirst(t *testing.T) {
	for _, first := range []bool{false, true} {
		m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4}}, NumBlocks: 5, FreeUncachedFirst: first})
		require.NoError(t, err)
		admit := func(id blocktable.SeqID, toks []int32) []blocks.ID {
			_, err := m.Admit(id, &hybrid.Request{Prompt: toks, MaxTokens: len(toks)})
			require.NoError(t, err)
			tb, _ := m.Table(id, 0)
			return append([]blocks.ID(nil), tb...)
		}
		require.Equal(t, []blocks.ID{1, 2}, admit(1, seqTokens(8, 0))) // both cached
		require.NoError(t, m.Finish(1))                                // queue 3 4 2 1
		require.Equal(t, []blocks.ID{3}, admit(2, seqTokens(3, 100)))  // partial: not cached
		require.NoError(t, m.Finish(2))
		if first {
			require.Equal(t, []blocks.ID{3}, admit(3, seqTokens(3, 200)), "queue 3 4 2 1")
		} else {
			require.Equal(t, []blocks.ID{4}, admit(3, seqTokens(3, 200)), "queue 4 2 1 3")
		}
		require.NoError(t, m.Finish(3))
		admit(4, seqTokens(8, 300))
		if first {
			require.Zero(t, m.Stats().Evictions, "3 and 4, both uncached: nothing evicted")
		} else {
			require.Equal(t, uint64(2), m.Stats().Evictions, "2 and 1: both cached blocks evicted")
		}
		require.NoError(t, m.CheckInvariants())
	}
}

// Admit changes nothing when the pool cannot hold every group's need, hit blocks taken
// off the free queue included; Append likewise.
func TestOutOfBlocksChangesNothing(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 9})
	require.NoError(t, err)
	_, err = m.Admit(1, &hybrid.Request{Prompt: seqTokens(16, 0), MaxTokens: 20})
	require.NoError(t, err)
	before := m.Stats()
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(16, 50), MaxTokens: 20})
	require.True(t, errors.Is(err, blocks.ErrOutOfBlocks), "%v", err)
	require.Equal(t, before, m.Stats())
	require.NoError(t, m.CheckInvariants())
	_, err = m.Admit(1, &hybrid.Request{Prompt: seqTokens(4, 0), MaxTokens: 4})
	require.True(t, errors.Is(err, blocktable.ErrDuplicateSeq))
	require.True(t, errors.Is(m.Append(9, []int32{1}), blocktable.ErrUnknownSeq))
	require.True(t, errors.Is(m.Append(1, nil), blocktable.ErrInvalidArgument))
	require.True(t, errors.Is(m.Finish(9), blocktable.ErrUnknownSeq))
	_, err = hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 16}, hybrid.SlidingWindow{Block: 8, Window: 4}}, NumBlocks: 9, MatchUnit: 16})
	require.True(t, errors.Is(err, blocktable.ErrInvalidArgument), "a match unit must divide every block size")
	_, err = hybrid.NewSpec("no such kind", hybrid.Params{})
	require.Error(t, err)
}

// The registry builds the built-in kinds by name and takes new ones.
func TestRegistry(t *testing.T) {
	s, err := hybrid.NewSpec(hybrid.KindSlidingWindow, hybrid.Params{BlockSize: 16, Window: 128})
	require.NoError(t, err)
	require.Equal(t, hybrid.SlidingWindow{Block: 16, Window: 128}, s)
	_, err = hybrid.NewSpec(hybrid.KindSlidingWindow, hybrid.Params{BlockSize: 16})
	require.Error(t, err, "a window is required")
	require.NoError(t, hybrid.Register("test_scratch", func(p hybrid.Params) (hybrid.Spec, error) {
		return hybrid.NonCacheable{Block: p.BlockSize, Name: "test_scratch"}, nil
	}))
	require.Error(t, hybrid.Register("test_scratch", nil))
	s, err = hybrid.NewSpec("test_scratch", hybrid.Params{BlockSize: 8})
	require.NoError(t, err)
	require.Equal(t, "test_scratch", s.Kind())
	require.Contains(t, hybrid.Kinds(), hybrid.KindMamba)
}

// A Mamba hybrid gets hits shorter than vLLM's inflated block: with Qwen3-Next's state
// vLLM's uniform pages give attention 544-token blocks, so a 300-token shared prefix hits
// nothing; with 16-token blocks (a pool per page size, or carved pages) it hits 288 tokens,
// the state cached at that block's end.
func TestMambaHybridHitsBelowInflatedBlock(t *testing.T) {
	shared := seqTokens(300, 0)
	prompt := func(tail int32) []int32 { return append(append([]int32(nil), shared...), seqTokens(300, tail)...) }
	for _, c := range []struct {
		block, want int
	}{{544, 0}, {16, 288}} {
		m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
			hybrid.FullAttention{Block: c.block}, hybrid.Mamba{Block: c.block, Mode: hybrid.MambaAll},
		}, NumBlocks: 200})
		require.NoError(t, err)
		_, err = m.Admit(1, &hybrid.Request{Prompt: prompt(1000), MaxTokens: 600})
		require.NoError(t, err)
		require.NoError(t, m.Finish(1))
		require.Equal(t, c.want, m.Match(prompt(5000)), "block %d", c.block)
		require.NoError(t, m.CheckInvariants())
	}
}

// Namespaces never share blocks, a namespace's root goes when its last block is evicted
// (no root kept per tenant forever), and HitLimit caps a hit to one every group can serve.
func TestNamespacesAndHitLimit(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 8},
	}, NumBlocks: 24})
	require.NoError(t, err)
	p := seqTokens(21, 0)
	salted := prefix.Namespace{Salt: "tenant-a"}
	_, err = m.Admit(1, &hybrid.Request{Prompt: p, MaxTokens: 21, Namespace: salted})
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	require.Zero(t, m.Match(p), "the default namespace sees nothing of tenant-a's")
	require.Equal(t, 20, matchOf(t, m, &hybrid.Request{Prompt: p, Namespace: salted}))
	require.Zero(t, matchOf(t, m, &hybrid.Request{Prompt: p, Namespace: prefix.Namespace{LoRA: "tenant-a"}}))
	// A cap below the window's reach: the fixed point under 10 tokens is 8.
	require.Equal(t, 8, matchOf(t, m, &hybrid.Request{Prompt: p, Namespace: salted, HitLimit: 10}))
	got, err := m.Admit(2, &hybrid.Request{Prompt: p, MaxTokens: 21, Namespace: salted, HitLimit: 10})
	require.NoError(t, err)
	require.Equal(t, 8, got)
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Finish(2))
	// Fill the pool from the default namespace until tenant-a's blocks are all evicted.
	for i := range 3 {
		id := blocktable.SeqID(10 + i)
		_, err = m.Admit(id, &hybrid.Request{Prompt: seqTokens(40, int32(1000*(i+1))), MaxTokens: 40})
		require.NoError(t, err)
		require.NoError(t, m.Finish(id))
	}
	require.Zero(t, matchOf(t, m, &hybrid.Request{Prompt: p, Namespace: salted}))
	require.NoError(t, m.CheckInvariants())
	before := m.Stats().Nodes
	_, err = m.Admit(20, &hybrid.Request{Prompt: p, MaxTokens: 21, Namespace: salted})
	require.NoError(t, err)
	require.NoError(t, m.CheckInvariants())
	require.Greater(t, m.Stats().Nodes, before)
}
