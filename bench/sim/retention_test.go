package sim

import (
	"fmt"
	"github.com/kvpage/kvpage/internal/invariant"
	"os"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// queueOrders are the rows of the queue-ordering figure.
var queueOrders = []struct {
	name string
	o    *prefix.QueueOrder
}{
	{"fcfs", nil},
	{"cached-first, window 32", &prefix.QueueOrder{Window: 32, LeaveOne: true}},
	{"cached-first, window 32, max wait 20", &prefix.QueueOrder{Window: 32, MaxWait: 20, LeaveOne: true}},
	{"cached-first, window 32, max wait 8", &prefix.QueueOrder{Window: 32, MaxWait: 8, LeaveOne: true}},
}

// TestRetentionReplays runs the three retention replays at their bench/README.md sizes
// (smaller with -short), checks what the figures claim, and with KVPAGE_FIGURES=1 prints
// the tables of bench/README.md.
func TestRetentionReplays(t *testing.T) {
	ag, fl, qu := DefaultAgentic, DefaultFlood, DefaultQueue
	if testing.Short() || invariant.Enabled {
		// Under -race and kvinvariants every mutation re-checks the index: the full replays
		// take many minutes there. The smaller ones keep every assertion meaningful.
		ag.Sessions, fl.Events, qu.Requests = 80, 4000, 4000
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| scheme | agents' hit rate | recomputed tokens | survived a short pause | survived a long pause | evictions |\n|---|---|---|---|---|---|\n")
	got := map[string]*AgenticResult{}
	for _, sc := range AgenticSchemes {
		r, err := ReplayAgentic(ag, sc)
		require.NoError(t, err)
		got[sc.Name] = r
		fmt.Fprintf(&out, "| %s | %.1f%% | %d | %.1f%% | %.1f%% | %d |\n", r.Scheme, 100*r.HitRate(), r.Recomputed,
			100*r.ShortSurvival(), 100*r.LongSurvival(), r.Evictions)
	}
	require.Greater(t, got["session"].LongSurvival(), got["lru"].LongSurvival()+0.5, "session holds keep contexts through long pauses")
	require.Less(t, got["session"].Recomputed, got["lru"].Recomputed/4)
	require.GreaterOrEqual(t, got["pinned"].HitRate(), got["lru"].HitRate())

	fmt.Fprintf(&out, "\n| flood tenant | victim's hit rate | flood's hit rate |\n|---|---|---|\n")
	var victim [2]float64
	for i, q := range []bool{false, true} {
		r, err := ReplayFlood(fl, q)
		require.NoError(t, err)
		victim[i] = r.VictimHitRate()
		name := "no quota"
		if q {
			name = fmt.Sprintf("quota %d blocks", fl.FloodQuota)
		}
		fmt.Fprintf(&out, "| %s | %.1f%% | %.1f%% |\n", name, 100*r.VictimHitRate(), 100*ratio(r.FloodHits, r.FloodTokens))
	}
	require.Greater(t, victim[1], victim[0]+0.2, "the quota keeps the flood from flushing the victim")

	fmt.Fprintf(&out, "\n| order | hit rate | longest wait (steps) | mean wait |\n|---|---|---|---|\n")
	qr := map[string]*QueueResult{}
	for _, c := range queueOrders {
		r, err := ReplayQueue(qu, c.name, c.o)
		require.NoError(t, err)
		require.Equal(t, int64(qu.Requests), r.Count)
		qr[c.name] = r
		fmt.Fprintf(&out, "| %s | %.1f%% | %d | %.2f |\n", c.name, 100*r.HitRate(), r.LongestWait, r.MeanWait())
	}
	fcfs, warm, aged := qr["fcfs"], qr["cached-first, window 32"], qr["cached-first, window 32, max wait 8"]
	require.Greater(t, warm.HitRate(), fcfs.HitRate())
	require.Greater(t, aged.HitRate(), fcfs.HitRate())
	require.LessOrEqual(t, aged.LongestWait, warm.LongestWait, "aging bounds the longest wait")
	if os.Getenv("KVPAGE_FIGURES") != "" {
		fmt.Print(out.String())
	}
}
