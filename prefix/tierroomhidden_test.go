package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// Under a write-back disk, making room in the host skips a victim whose disk slot is no
// copy: a failed load hid it (its bytes bad, dropped once the second load still reading
// it ends). The host's slot is then the block's only good lower-tier copy, and the disk
// cannot take it (one slot per block and tier, busy until that load ends). Before,
// victimBelow counted the hidden slot as a copy: the victim was dropped and counted Lost,
// and once the second load ended no tier held the block. The block gets its host slot
// back through a Hold (no good copy anywhere, so Hold copies it from the device). Rows:
// the victim alone (no room is made: the next store is refused), a victim behind it (that
// one is written down instead; MRU ranks the held block first), and the control, the
// second load ended first (the slot has gone, and the victim is written down as any).
// Both trees.
var hiddenVictimCases = []struct {
	name      string
	hostCap   int
	mru       bool // the host's policy: MRU, so that the block re-stored last is the first victim
	loadFirst bool // the second load ends before the host needs room
	tier      Tier // where the block is found at the end
	writes    int  // host-to-disk copies the room-making starts
}{
	{"the victim alone: nothing freed", 1, false, false, 1, 0},
	{"a victim behind it: that one written down", 2, true, false, 1, 1},
	{"the hidden slot gone first: written down", 1, false, true, 2, 1},
}

func hiddenVictimTiers(hostCap int, mru bool) TierConfig {
	host := TierSpec{Medium: MediumCPU, Capacity: hostCap, Write: WriteThrough}
	if mru {
		host.Policy = func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewMRU(n) }
	}
	return TierConfig{Tiers: []TierSpec{host, {Medium: MediumDisk, Capacity: 4, Write: WriteBack}}, BlockBytes: 1}
}

// hostToDisk counts the host-to-disk copies among plans.
func hostToDisk(plans []Plan) int {
	k := 0
	for _, p := range plans {
		if p.From == 1 && p.To == 2 {
			k += p.Blocks
		}
	}
	return k
}

func TestIndexMakeRoomSkipsAHiddenBelowVictim(t *testing.T) {
	for _, c := range hiddenVictimCases {
		t.Run(c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 16, WithTiers(hiddenVictimTiers(c.hostCap, c.mru)))
			drain := func() []Plan {
				plans := x.TakePlans(nil)
				completeAll(t, x, plans, true)
				return plans
			}
			pa := Prompt{Tokens: toks(100, 5)} // one full block: the block
			order := []Prompt{pa, {Tokens: toks(300, 5)}}
			if c.hostCap == 2 {
				order = append([]Prompt{{Tokens: toks(200, 5)}}, order...) // the victim behind it
			}
			for _, p := range order { // the last one's store writes the block down
				admit(t, x, pool, p).finish(t, x)
				drain()
			}
			require.Equal(t, 1, x.TierStatsOf(2).Resident, "the disk holds the block")
			x.Evict(pool.Capacity())
			_, cur := x.Peek(nil, &pa, LeaveOne)
			require.Equal(t, [MaxTiers]int{0, 0, 1, 0}, x.PeekLower(&pa, cur, LeaveOne, 0).Blocks)
			load := func() ([]blocks.ID, TransferID) {
				dst, err := pool.Allocate(nil, 1)
				require.NoError(t, err)
				ld, err := x.PrepareLoad(&pa, cur, LeaveOne, dst)
				require.NoError(t, err)
				return dst, ld
			}
			dst1, ld1 := load()
			dst2, ld2 := load() // still reads the disk's slot
			x.TakePlans(nil)
			_, err := x.CompleteTransfer(ld1, false) // the disk's bytes are bad: its slot hidden
			require.NoError(t, err)
			require.NoError(t, pool.Release(dst1...))
			second := func() {
				_, err := x.CompleteTransfer(ld2, true)
				require.NoError(t, err)
				require.NoError(t, pool.Release(dst2...))
				require.NoError(t, x.CheckInvariants())
			}

			r := admit(t, x, pool, pa) // computed again
			require.Zero(t, r.hit)
			h, err := x.Hold(r.ids[:1]) // no good copy anywhere: copied into the host
			require.NoError(t, err)
			drain()
			require.Equal(t, 1, x.HeldBlocks(h))
			require.NoError(t, x.ReleaseHold(h)) // the host's slot is a candidate again
			r.finish(t, x)
			if c.loadFirst {
				second()
			}
			lost := x.TierStatsOf(1).Lost
			admit(t, x, pool, Prompt{Tokens: toks(400, 5)}).finish(t, x) // the host needs room
			require.Equal(t, lost, x.TierStatsOf(1).Lost, "no host block lost")
			require.Equal(t, c.writes, hostToDisk(drain()))
			require.NoError(t, x.CheckInvariants())
			if !c.loadFirst {
				second()
			}
			drain()
			x.Evict(pool.Capacity())
			_, cur = x.Peek(nil, &pa, LeaveOne)
			var want [MaxTiers]int
			want[c.tier] = 1
			require.Equal(t, want, x.PeekLower(&pa, cur, LeaveOne, 0).Blocks, "the block is still in a lower tier")
			require.Equal(t, lost, x.TierStatsOf(1).Lost)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestGroupTreeMakeRoomSkipsAHiddenBelowVictim(t *testing.T) {
	for _, c := range hiddenVictimCases {
		t.Run(c.name, func(t *testing.T) {
			g := newTestTree(t, 20, 2, 1)
			require.NoError(t, g.SetTiers(hiddenVictimTiers(c.hostCap, c.mru)))
			drain := func() []Plan {
				plans := g.TakePlans(nil)
				for _, pl := range plans {
					_, _, err := g.CompleteTransfer(pl.ID, true, nil)
					require.NoError(t, err)
				}
				require.NoError(t, g.CheckInvariants())
				return plans
			}
			store := func(b blocks.ID, toks []int32) {
				require.NoError(t, g.Cache(b, pathOf(g, RootNode, toks)[0], 0))
				g.PrepareStore(b)
			}
			order := []blocks.ID{3, 5} // the block, then the one whose store writes it down
			if c.hostCap == 2 {
				order = []blocks.ID{4, 3, 5} // the victim behind it first
			}
			for _, b := range order {
				store(b, []int32{int32(b) - 2, int32(b) - 1}) // block 3 holds tokens 1, 2: node pa
				drain()
			}
			pa := pathOf(g, RootNode, []int32{1, 2})[0] // the block's node
			require.Equal(t, 1, g.TierStatsOf(2).Resident, "the disk holds the block")
			require.Equal(t, Tier(2), g.LowerTier(pa, 0))
			for _, b := range order {
				require.NoError(t, g.Uncache(b))
			}
			load := func(dst blocks.ID) TransferID {
				ld, err := g.PrepareLoad([]GroupLoad{{Node: pa, Dst: dst}})
				require.NoError(t, err)
				return ld
			}
			ld1, ld2 := load(10), load(11) // the second still reads the disk's slot
			g.TakePlans(nil)
			_, _, err := g.CompleteTransfer(ld1, false, nil) // the disk's bytes are bad: its slot hidden
			require.NoError(t, err)
			second := func() {
				_, _, err := g.CompleteTransfer(ld2, true, nil)
				require.NoError(t, err)
				require.NoError(t, g.CheckInvariants())
			}

			require.NoError(t, g.Cache(12, pa, 0)) // computed again
			h, stored, err := g.Hold([]blocks.ID{12}, nil)
			require.NoError(t, err)
			require.Equal(t, []blocks.ID{12}, stored, "no good copy anywhere: copied into the host")
			drain()
			require.Equal(t, 1, g.HeldBlocks(h))
			require.NoError(t, g.ReleaseHold(h)) // the host's slot is a candidate again
			if c.loadFirst {
				second()
			}
			lost := g.TierStatsOf(1).Lost
			store(13, []int32{7, 8}) // the host needs room
			require.Equal(t, lost, g.TierStatsOf(1).Lost, "no host block lost")
			require.Equal(t, c.writes, hostToDisk(drain()))
			require.NoError(t, g.CheckInvariants())
			if !c.loadFirst {
				second()
			}
			drain()
			require.Equal(t, c.tier, g.LowerTier(pa, 0), "the block is still in a lower tier")
			require.Equal(t, lost, g.TierStatsOf(1).Lost)
			require.NoError(t, g.CheckInvariants())
		})
	}
}
