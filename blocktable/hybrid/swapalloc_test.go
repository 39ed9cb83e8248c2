package hybrid_test

import (
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// swapCycle is one swap of two sequences (seq 1 and 2, admitted by the caller): each is
// swapped out, its copies served, resumed, its loads served, and given one token; seq 2
// is swapped out while seq 1 is resumed and appending, so that a buffer shared between a
// swap record and a running sequence would show in either's tokens.
func swapCycle(m *hybrid.Manager, plans *[]prefix.Plan, tok int32) {
	serve := func() {
		*plans = m.TakePlans((*plans)[:0])
		for j, pl := range *plans {
			if j > 0 && (*plans)[j-1].ID == pl.ID {
				continue
			}
			if _, err := m.CompleteTransfer(pl.ID, true); err != nil {
				panic(err)
			}
		}
	}
	for _, id := range []blocktable.SeqID{1, 2} {
		if _, err := m.PreemptSeq(id, blocktable.Swap); err != nil {
			panic(err)
		}
		serve()
	}
	for _, id := range []blocktable.SeqID{1, 2} {
		if _, err := m.Resume(id); err != nil {
			panic(err)
		}
		serve()
		if err := m.Append(id, []int32{tok}); err != nil {
			panic(err)
		}
	}
}

func swapAllocManager(t testing.TB) *hybrid.Manager {
	t.Helper()
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 64, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 256}}, BlockBytes: 64}})
	require.NoError(t, err)
	return m
}

// A swap-out and its Resume allocate nothing in steady state: the swap record and its
// token buffer are reused, the tokens moved into the record rather than copied.
func TestHybridSwapAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("the invariant checks (kvinvariants, -race) allocate")
	}
	m := swapAllocManager(t)
	for i, n := range []int{13, 22} {
		_, err := m.Admit(blocktable.SeqID(i+1), &hybrid.Request{Prompt: seqTokens(n, int32(100*i)), MaxTokens: 200})
		require.NoError(t, err)
	}
	plans := make([]prefix.Plan, 0, 16)
	for range 3 {
		swapCycle(m, &plans, 7)
	}
	require.Zero(t, testing.AllocsPerRun(30, func() { swapCycle(m, &plans, 7) }))
}

// The tokens survive the swaps exactly: each sequence's tokens after any number of swaps,
// resumes and appends are what a plain model of its appends says, however the swap
// records' buffers move between sequences; and a swapped sequence's tokens do not change
// while another, resumed, appends.
func TestHybridSwapKeepsTokens(t *testing.T) {
	m := swapAllocManager(t)
	want := map[blocktable.SeqID][]int32{1: seqTokens(13, 0), 2: seqTokens(22, 100)}
	for id, p := range want {
		_, err := m.Admit(id, &hybrid.Request{Prompt: p, MaxTokens: 200})
		require.NoError(t, err)
	}
	check := func() {
		t.Helper()
		for id, w := range want {
			got, err := m.Tokens(id)
			require.NoError(t, err)
			require.Equal(t, w, got, "seq %d", id)
		}
	}
	for i := range 12 {
		// Seq 2 out and seq 1 out, then seq 1 back and growing while seq 2 is still out.
		_, err := m.PreemptSeq(2, blocktable.Swap)
		require.NoError(t, err)
		_, err = m.PreemptSeq(1, blocktable.Swap)
		require.NoError(t, err)
		completeAll(t, m, true)
		check()
		cp, err := m.AppendTokens(nil, 2) // swapped out: a copy, the caller's to change
		require.NoError(t, err)
		cp[0] = -9
		view, err := m.Tokens(2)
		require.NoError(t, err)
		require.Equal(t, len(view), cap(view), "clipped")
		check()
		_, err = m.Resume(1)
		require.NoError(t, err)
		completeAll(t, m, true)
		tok := int32(1000 + i)
		require.NoError(t, m.Append(1, []int32{tok, tok + 1}))
		want[1] = append(slices.Clone(want[1]), tok, tok+1)
		check()
		_, err = m.Resume(2)
		require.NoError(t, err)
		completeAll(t, m, true)
		require.NoError(t, m.Append(2, []int32{-tok}))
		want[2] = append(slices.Clone(want[2]), -tok)
		check()
		if i == 5 { // a finished swapped sequence gives its record back too
			_, err = m.PreemptSeq(2, blocktable.Swap)
			require.NoError(t, err)
			require.NoError(t, m.Finish(2))
			completeAll(t, m, true)
			_, err = m.Admit(2, &hybrid.Request{Prompt: want[2], MaxTokens: 200})
			require.NoError(t, err)
			completeAll(t, m, true)
		}
		require.NoError(t, m.CheckInvariants())
	}
}

// BenchmarkHybridSwap is one swap cycle of two sequences (swapCycle: two swap-outs, two
// Resumes with their copies and loads served, an append each): 0 allocs/op.
func BenchmarkHybridSwap(b *testing.B) {
	m := swapAllocManager(b)
	for i, n := range []int{13, 22} {
		if _, err := m.Admit(blocktable.SeqID(i+1), &hybrid.Request{Prompt: seqTokens(n, int32(100*i)), MaxTokens: 1 << 20}); err != nil {
			b.Fatal(err)
		}
	}
	plans := make([]prefix.Plan, 0, 16)
	swapCycle(m, &plans, 7)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		swapCycle(m, &plans, 7)
		if i%8 == 7 { // keep the sequences short: truncate back by finishing and readmitting
			b.StopTimer()
			for j, n := range []int{13, 22} {
				id := blocktable.SeqID(j + 1)
				if err := m.Finish(id); err != nil {
					b.Fatal(err)
				}
				if _, err := m.Admit(id, &hybrid.Request{Prompt: seqTokens(n, int32(100*j)), MaxTokens: 1 << 20}); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
}
