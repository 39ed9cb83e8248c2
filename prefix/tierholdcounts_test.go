package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// HoldNeed counts only the copies Hold would prepare. A block under a root an epoch bump
// retired cannot be tiered, and Hold leaves it as it is, so it needs no copy, even when
// its tier-1 slot is still a failed load's (busy until that load's other copies end).
// Before, HoldNeed counted it in need and, being busy, capped room below need: HoldNeed
// said (2, 0) and Hold refused with a TierFullError for copies it would never make.
func TestIndexHoldNeedSkipsAnUntierableBusyBlock(t *testing.T) {
	pool, x := newTestIndex(t, 12, WithTiers(failedSlotTiers(false)))
	p := Prompt{Tokens: toks(100, 9)} // 2 full blocks
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true) // into the host
	require.Equal(t, 2, x.Evict(2))
	_, cur := x.Peek(nil, &p, LeaveOne)
	load := func() ([]blocks.ID, TransferID) {
		dst, err := pool.Allocate(nil, 2)
		require.NoError(t, err)
		ld, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
		require.NoError(t, err)
		return dst, ld
	}
	dst1, ld1 := load()
	dst2, ld2 := load() // still reading the host's slots
	x.TakePlans(nil)
	_, err := x.CompleteTransfer(ld1, false) // the host's bytes are bad: its slots are busy
	require.NoError(t, err)
	require.NoError(t, pool.Release(dst1...))
	r := admit(t, x, pool, p) // computed again, linked to the busy entries
	require.Zero(t, r.hit)
	ids := r.ids[:2]
	need, room := x.HoldNeed(ids)
	require.Equal(t, [2]int{2, 0}, [2]int{need, room}, "tierable: the copies wait for the slots")

	x.BumpEpoch(p.Namespace) // the blocks' root retires: they can no longer be tiered
	need, _ = x.HoldNeed(ids)
	require.Zero(t, need, "Hold makes no copy of a block it cannot tier")
	h, err := x.Hold(ids)
	require.NoError(t, err)
	require.Zero(t, x.HeldBlocks(h))
	require.Empty(t, x.TakePlans(nil), "no copy prepared")
	require.NoError(t, x.ReleaseHold(h))

	_, err = x.CompleteTransfer(ld2, true)
	require.NoError(t, err)
	require.NoError(t, pool.Release(dst2...))
	r.finish(t, x)
	require.NoError(t, x.CheckInvariants())
}
