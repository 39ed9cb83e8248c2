package kvevents_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// collectSink keeps every payload a Recorder sends.
type collectSink struct {
	mu       sync.Mutex
	payloads [][]byte
}

func (s *collectSink) Send(_ uint64, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payloads = append(s.payloads, p)
	return nil
}

// A W4-like run (full attention and a 128-token window in one small pool, prompts sharing
// system prompts, one request after another with decode steps, evictions in both groups,
// duplicates)
// publishes its events through a Recorder. Replayed per group, they never store a prefix
// already held nor remove one not held, and end holding exactly the prefixes the Manager
// has cached per group; a cluster index fed the same batches agrees, with no unknown
// removal, and group 0's hashes are those a single-group index (Fast64, 16-token blocks)
// computes, so a router recomputes them from the prompt.
func TestHybridEventsReplayPerGroup(t *testing.T) {
	const bs = 16
	sink := &collectSink{}
	rec, err := kvevents.NewRecorder(sink)
	require.NoError(t, err)
	m, err := hybrid.New(hybrid.Config{
		Groups:    []hybrid.Spec{hybrid.FullAttention{Block: bs}, hybrid.SlidingWindow{Block: bs, Window: 128}},
		NumBlocks: 96, Observer: rec,
	})
	require.NoError(t, err)

	system := func(i int) []int32 {
		p := make([]int32, 4*bs)
		for j := range p {
			p[j] = int32(1000*i + j)
		}
		return p
	}
	var first []int32
	for r := range 60 {
		prompt := append(system(r%5), make([]int32, 24+r%3*bs)...)
		for j := 4 * bs; j < len(prompt); j++ {
			prompt[j] = int32(100000 + 97*r + j)
		}
		if r%7 == 6 {
			// Exactly the system prompt: the hit stops one block short (len - 1), and the
			// recomputed block is cached again under its prefix, a duplicate.
			prompt = system(r % 5)
		}
		if first == nil {
			first = prompt
		}
		id := blocktable.SeqID(r)
		_, err := m.Admit(id, &hybrid.Request{Prompt: prompt, MaxTokens: len(prompt) + 40})
		require.NoError(t, err)
		for step := range 40 {
			require.NoError(t, m.Append(id, []int32{int32(200000 + step)}))
		}
		require.NoError(t, m.Finish(id))
		rec.Flush()
	}
	require.NoError(t, m.CheckInvariants())
	st := m.Stats()
	require.Positive(t, st.Evictions, "the run must evict")
	require.Positive(t, st.Duplicates, "and cache duplicates")
	require.NoError(t, rec.Close())

	ci, err := cluster.NewClusterIndex(prefix.Fast64{}, bs)
	require.NoError(t, err)
	held := []map[uint64]bool{{}, {}}
	perGroup := [2]int{}
	var group0 *kvevents.Event
	dec := &kvevents.Decoder{HashSize: 8} // Fast64
	for _, p := range sink.payloads {
		b := new(kvevents.Batch)
		require.NoError(t, dec.Decode(p, b))
		for i := range b.Events {
			e := &b.Events[i]
			require.True(t, e.HasGroup, "every event names its group")
			require.Contains(t, []int{0, 1}, e.Group)
			perGroup[e.Group]++
			switch e.Kind {
			case kvevents.KindBlockStored:
				if group0 == nil && e.Group == 0 {
					group0 = e
				}
				for _, h := range e.Hashes {
					require.False(t, held[e.Group][h.Uint64()], "group %d stores a prefix it holds", e.Group)
					held[e.Group][h.Uint64()] = true
				}
			case kvevents.KindBlockRemoved:
				for _, h := range e.Hashes {
					require.True(t, held[e.Group][h.Uint64()], "group %d removes a prefix it does not hold", e.Group)
					delete(held[e.Group], h.Uint64())
				}
			}
		}
		require.NoError(t, ci.Apply("s", b))
	}
	require.Positive(t, perGroup[0])
	require.Positive(t, perGroup[1])
	require.Equal(t, st.CachedPrefixes, []int{len(held[0]), len(held[1])})
	any := map[uint64]bool{}
	for _, g := range held {
		for h := range g {
			any[h] = true
		}
	}
	cs := ci.Stats("s")
	require.Zero(t, cs.UnknownRemovals)
	require.Equal(t, len(any), cs.Blocks)

	// The first store of group 0 is the first prompt's full blocks, hashed as an Index
	// hashes them.
	require.NotNil(t, group0)
	require.False(t, group0.HasParent)
	prev := make([]byte, 8)
	prefix.Fast64{}.Root(prev)
	for i, h := range group0.Hashes {
		cur := make([]byte, 8)
		prefix.Fast64{}.Block(cur, prev, first[i*bs:(i+1)*bs], prefix.Extra{})
		require.Equal(t, cur, h.Bytes, "block %d", i)
		prev = cur
	}
}

// ResetPrefixCache reports one AllBlocksCleared, after which the Manager holds nothing
// cached and a replay holds nothing; it refuses while a sequence is admitted.
func TestHybridResetPrefixCache(t *testing.T) {
	bat := newBatcher(t)
	m, err := hybrid.New(hybrid.Config{
		Groups:    []hybrid.Spec{hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 8}},
		NumBlocks: 32, Observer: bat,
	})
	require.NoError(t, err)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	_, err = m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 12})
	require.NoError(t, err)
	require.ErrorIs(t, m.ResetPrefixCache(), blocktable.ErrInvalidArgument)
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.ResetPrefixCache())
	require.Equal(t, []int{0, 0}, m.Stats().Cached)
	require.Zero(t, m.Match(prompt))
	require.NoError(t, m.CheckInvariants())
	b := new(kvevents.Batch)
	require.NoError(t, (&kvevents.Decoder{HashSize: 8}).Decode(bat.AppendBatch(nil, 1), b))
	kinds := []kvevents.EventKind{}
	for _, e := range b.Events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []kvevents.EventKind{kvevents.KindBlockStored, kvevents.KindBlockStored, kvevents.KindAllBlocksCleared}, kinds)
	require.Equal(t, []int{0, 1}, []int{b.Events[0].Group, b.Events[1].Group})
}

// A Recorder keeps each event's group and medium across its queue: what it sends is what
// a Batcher encodes from the same events.
func TestRecorderKeepsGroupAndMedium(t *testing.T) {
	stored := &prefix.BlockStored{Hashes: make([]byte, 16), HashSize: 8, Blocks: make([]blocks.ID, 2),
		Tokens: make([]int32, 8), BlockSize: 4, Group: 1, HasGroup: true, Medium: prefix.MediumCPU}
	removed := &prefix.BlockRemoved{Hashes: make([]byte, 8), HashSize: 8, Blocks: make([]blocks.ID, 1), Group: 2, HasGroup: true, Medium: prefix.MediumDisk}
	sink := &collectSink{}
	rec, err := kvevents.NewRecorder(sink)
	require.NoError(t, err)
	rec.BlockStored(stored)
	rec.BlockRemoved(removed)
	require.NoError(t, rec.Close())
	require.Len(t, sink.payloads, 1)
	b := new(kvevents.Batch)
	require.NoError(t, (&kvevents.Decoder{HashSize: 8}).Decode(sink.payloads[0], b))
	require.Len(t, b.Events, 2)
	for i, want := range []struct {
		group  int
		medium string
	}{{1, prefix.MediumCPU}, {2, prefix.MediumDisk}} {
		e := b.Events[i]
		require.True(t, e.HasGroup)
		require.Equal(t, want.group, e.Group)
		require.Equal(t, want.medium, e.Medium)
	}
}
