package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"

	"github.com/stretchr/testify/require"
)

// TestTierLookupAllocatesNothing: a lookup that continues past the device into host memory
// (Peek then PeekLower, as every admission with tiers does) allocates nothing in steady
// state, like the device-only lookup. The prompt is demoted first, so the host tier holds
// all three of its blocks and PeekLower walks them.
func TestTierLookupAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Tokens: toks(100, 13)}
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	var dst []blocks.ID
	hit, cur := x.Peek(dst, &p, LeaveOne)
	require.Empty(t, hit)
	require.Equal(t, 3, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
	lower := 0
	allocs := testing.AllocsPerRun(200, func() {
		var c Cursor
		dst, c = x.Peek(dst[:0], &p, LeaveOne)
		lower = x.PeekLower(&p, c, LeaveOne, 0).Lower
	})
	require.Equal(t, 3, lower, "the lookup must reach the host tier for the test to mean anything")
	require.Zero(t, allocs, "Peek + PeekLower allocated")
}
