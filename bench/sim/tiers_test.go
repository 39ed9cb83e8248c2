package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTiersRaiseHitRateOnConversation: on the conversation workload with a device budget
// too small for its chats, a host tier turns evicted turns into hits, the tiers' figures
// add up, and the tierless run reports none.
func TestTiersRaiseHitRateOnConversation(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-goroutine replay: nothing for the race detector (kvinvariants runs it)")
	}
	w, err := LookupWorkload("conversation")
	require.NoError(t, err)
	reqs := Prepare(w.Generate(400, 42), w.MaxModelLen).Requests
	cfg := DefaultConfig(40 << 10)
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumBatchedTokens = max(cfg.MaxNumBatchedTokens, w.MaxModelLen)
	base := Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true}
	tiered := base
	tiered.Tiers = Tiers{HostBlocks: 4096, HostGBps: 25, BlockBytes: 2 << 20}
	results, err := Compare(reqs, cfg, []Scheme{base, tiered})
	require.NoError(t, err)
	require.Nil(t, results[0].Tiers)
	tr := results[1].Tiers
	require.Len(t, tr, 2)
	require.Greater(t, results[1].PrefixHitRate, results[0].PrefixHitRate)
	require.Positive(t, tr[1].HitRate)
	require.Equal(t, (tr[1].StoredBlocks+tr[1].LoadedBlocks)*(2<<20), tr[1].BytesIn+tr[1].BytesOut)
	require.InDelta(t, float64(tr[1].BytesIn+tr[1].BytesOut)/25e9, tr[1].TransferSeconds, 1e-9)
	require.Positive(t, tr[1].Plans)
}
