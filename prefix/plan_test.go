package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// PlanRelease counts what releases would make available, alone and combined, and the
// count matches what the releases then really make available.
func TestPlanRelease(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	// r1: cached a, b, c and an uncached partial block d.
	r1 := admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS+2)})
	var plan ReleasePlan
	require.Equal(t, 4, x.PlanRelease(&plan, r1.ids), "alone, r1 frees d and unpins c, b, a")

	// r2 hits a and b, and adds its own cached e under b and a partial f.
	r2 := admit(t, x, pool, Prompt{Tokens: cat(toks(1, 2*testBS), toks(900, testBS+1))})
	require.Equal(t, 2, r2.hit)
	plan.Reset()
	require.Equal(t, 2, x.PlanRelease(&plan, r1.ids), "a and b stay held by r2")
	plan.Reset()
	require.Equal(t, 2, x.PlanRelease(&plan, r2.ids), "a and b stay held by r1")
	plan.Reset()
	first := x.PlanRelease(&plan, r1.ids)
	second := x.PlanRelease(&plan, r2.ids)
	require.Equal(t, []int{2, 4}, []int{first, second}, "together they free all six")

	before := pool.Available()
	r1.finish(t, x)
	require.Equal(t, before+first, pool.Available())
	plan.Reset()
	require.Equal(t, 4, x.PlanRelease(&plan, r2.ids), "r2 alone now frees a and b too")
	r2.finish(t, x)
	require.Equal(t, before+first+second, pool.Available())
	plan.Reset()
	require.Equal(t, 0, x.PlanRelease(&plan, nil))
}

// A plan's generation wrapping clears its stamps: a block loaded at generation 1 before
// the wrap is loaded again after it, not read as the earlier plan left it.
func TestPlanReleaseGenerationWraps(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS+2)})
	var plan ReleasePlan
	require.Equal(t, 4, x.PlanRelease(&plan, r.ids))
	require.Equal(t, uint32(1), plan.gen)
	plan.gen = ^uint32(0) // as if 2^32-2 Resets had passed
	plan.Reset()
	require.Equal(t, uint32(1), plan.gen)
	require.Equal(t, 4, x.PlanRelease(&plan, r.ids), "the same count as on a fresh plan")
}
