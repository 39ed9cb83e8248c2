package hybrid_test

import (
	"reflect"
	"sync"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// The cell carries every field of Stats: a field added to Stats and forgotten in
// Publish fails here, since the published copy would lack it.
func TestStatsCellCarriesEveryField(t *testing.T) {
	var c hybrid.StatsCell
	require.Equal(t, hybrid.Stats{}, c.Load(), "nothing published yet")
	m := twoGroups(t, 16)
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 12})
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	// Resumed, it hits 4 tokens and caches its second block again beside 1's: a duplicate.
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 12, Resumed: true})
	require.NoError(t, err)
	_, err = m.Admit(6, &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 12})
	require.NoError(t, err)
	require.NoError(t, m.Finish(6))
	_, err = m.Admit(3, &hybrid.Request{Prompt: seqTokens(6, 100), MaxTokens: 12})
	require.NoError(t, err)
	require.NoError(t, m.Fork(3, 4))
	require.NoError(t, m.Append(4, []int32{7})) // a copy
	_, err = m.PreemptSeq(2, blocktable.Recompute)
	require.NoError(t, err)
	m.EvictBlocks([]blocks.ID{1})
	_, err = m.Admit(5, &hybrid.Request{Prompt: seqTokens(16, 500), MaxTokens: 16}) // evicts
	require.NoError(t, err)
	c.Publish(m)
	want := m.Stats()
	got := c.Load()
	require.Equal(t, want, got)
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !tierFields[name] {
			require.False(t, v.Field(i).IsZero(), "field %s is zero in this scenario: make it non-zero", name)
		}
	}
}

// tierFields are the Stats fields only a Manager with lower tiers sets.
var tierFields = map[string]bool{"Swapped": true, "SwapOuts": true, "SwapIns": true, "LoadedTokens": true, "LoadFailedTokens": true}

// Stats and the cell carry the lower tiers' counters (they were in TierCounts alone):
// a swap out and back in, a failed load, an ok load of a prefix only the host holds, and
// a sequence left swapped out.
func TestStatsCarryTierCounters(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 0)
	p1 := seqTokens(9, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 12})
	require.NoError(t, err)
	_, err = m.PreemptSeq(1, blocktable.Swap)
	require.NoError(t, err)
	completeAll(t, m, true)
	_, err = m.Resume(1)
	require.NoError(t, err)
	completeAll(t, m, false) // the resumed load fails: 8 tokens computed after all
	require.NoError(t, m.Finish(1))
	p2 := seqTokens(9, 100)
	_, err = m.Admit(2, &hybrid.Request{Prompt: p2, MaxTokens: 12})
	require.NoError(t, err)
	_, err = m.PreemptSeq(2, blocktable.Swap)
	require.NoError(t, err)
	completeAll(t, m, true)
	require.NoError(t, m.Finish(2)) // its copies stay in the host
	r, err := m.AdmitTiered(3, &hybrid.Request{Prompt: p2, MaxTokens: 12})
	require.NoError(t, err)
	require.Equal(t, 8, r.LoadTokens)
	completeAll(t, m, true)
	_, err = m.Admit(4, &hybrid.Request{Prompt: seqTokens(9, 200), MaxTokens: 12})
	require.NoError(t, err)
	_, err = m.PreemptSeq(4, blocktable.Swap)
	require.NoError(t, err)

	st := m.Stats()
	tc := m.TierCounts()
	require.Equal(t, 1, st.Swapped)
	require.Equal(t, [4]uint64{3, 1, 8, 8}, [4]uint64{st.SwapOuts, st.SwapIns, st.LoadedTokens, st.LoadFailedTokens})
	require.Equal(t, [4]uint64{tc.SwapOuts, tc.SwapIns, tc.LoadedTokens, tc.LoadFailedTokens},
		[4]uint64{st.SwapOuts, st.SwapIns, st.LoadedTokens, st.LoadFailedTokens}, "TierCounts says the same")
	var c hybrid.StatsCell
	c.Publish(m)
	require.Equal(t, st, c.Load())
	v := reflect.ValueOf(st)
	for name := range tierFields {
		require.False(t, v.FieldByName(name).IsZero(), "field %s", name)
	}
}

// A reader on another goroutine sees whole snapshots while the scheduler publishes, and
// polling with LoadInto allocates nothing. Run it with -race.
func TestStatsCellConcurrent(t *testing.T) {
	m := twoGroups(t, 40)
	var c hybrid.StatsCell
	c.Publish(m)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var s hybrid.Stats
		for range 2000 {
			c.LoadInto(&s)
			if s.Capacity != 39 || len(s.Cached) != 2 || s.Free+s.Running > 1000 {
				t.Errorf("torn snapshot %+v", s)
				return
			}
		}
	}()
	for i := range 200 {
		id := blocktable.SeqID(i)
		_, err := m.Admit(id, &hybrid.Request{Prompt: seqTokens(9, int32(i)), MaxTokens: 12})
		require.NoError(t, err)
		c.Publish(m)
		require.NoError(t, m.Finish(id))
		c.Publish(m)
	}
	wg.Wait()
	var s hybrid.Stats
	c.LoadInto(&s)
	require.Zero(t, testing.AllocsPerRun(100, func() { c.LoadInto(&s) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { c.Publish(m) }))
}

// One cell may carry the stats of Managers with different numbers of groups (a scheduler
// that rebuilds its Manager for another model): each Load is the last Publish's, with its
// own per-group counts, and a reader never sees one Manager's fields with the other's
// groups. Run it with -race.
func TestStatsCellAcrossGroupCounts(t *testing.T) {
	one, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4}}, NumBlocks: 16})
	require.NoError(t, err)
	three, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4},
		hybrid.SlidingWindow{Block: 4, Window: 8}, hybrid.Mamba{Block: 4, Mode: hybrid.MambaAll}}, NumBlocks: 40})
	require.NoError(t, err)
	for _, m := range []*hybrid.Manager{one, three} {
		_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(9, 0), MaxTokens: 12})
		require.NoError(t, err)
	}
	var c hybrid.StatsCell
	for _, m := range []*hybrid.Manager{one, three, one, three} {
		require.NotPanics(t, func() { c.Publish(m) })
		require.Equal(t, m.Stats(), c.Load())
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var s hybrid.Stats
		for range 2000 {
			c.LoadInto(&s)
			if !(s.Capacity == 15 && len(s.Cached) == 1 && len(s.CachedPrefixes) == 1) &&
				!(s.Capacity == 39 && len(s.Cached) == 3 && len(s.CachedPrefixes) == 3) {
				t.Errorf("torn snapshot %+v", s)
				return
			}
		}
	}()
	for range 500 {
		c.Publish(one)
		c.Publish(three)
	}
	wg.Wait()
}
