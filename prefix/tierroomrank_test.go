package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// fakeRoom is a roomOwner over two lower tiers, tier 2 write-back, for makeRoom alone:
// the victims in bad are skipped (their slot below is no copy), the others are written
// down, or dropped when full says the tier below has no room.
type fakeRoom struct {
	lv      [2]slotLevel
	ents    map[int32]evict.Entry
	bad     map[int32]bool
	full    bool
	skipped int
	taken   []int32
}

func (f *fakeRoom) lowerLevel(t Tier) *slotLevel {
	if int(t) > len(f.lv) {
		return nil
	}
	return &f.lv[t-1]
}

func (f *fakeRoom) victimBelow(_ Tier, k int32) uint8 {
	if f.bad[k] {
		f.skipped++
		return belowBad
	}
	return belowNone
}

func (f *fakeRoom) keepVictim(t Tier, k int32) { f.lv[t-1].policy.Add(f.ents[k]) }

func (f *fakeRoom) writeDown(_ Tier, k int32) bool {
	if f.full {
		return false
	}
	f.taken = append(f.taken, k)
	return true
}

func (f *fakeRoom) dropVictim(_ Tier, k int32) { f.taken = append(f.taken, k) }

// tierPolicies are the policies a tier takes (TierSpec.Policy): every built-in by name,
// and a Scored one.
func tierPolicies(t *testing.T) map[string]evict.Factory {
	fs := map[string]evict.Factory{}
	for _, name := range evict.Names() {
		f, err := evict.ByName(name)
		require.NoError(t, err)
		fs[name] = f
	}
	fs["scored"] = func(n int, _ evict.Clock) (evict.Policy, error) {
		return evict.NewScored(n, "", func(e evict.Entry) float64 { return float64(e.LastAccess%7) - float64(e.Hits) })
	}
	return fs
}

// A victim makeRoom skips, its slot below no copy, keeps its rank under every tier
// policy: after the pass the tier's victims come in the order of the same policy from
// which only the victims the pass took (written down or dropped) were removed. Before,
// the skipped victims were added again as new: FIFO ranked them last, S3FIFO last in
// their queue, and SLRU kept the demotions the pass's pops had caused (the fifo, s3fifo
// and slru rows failed; the others rank by the entry alone, and passed).
func TestMakeRoomKeepsASkippedVictimsRank(t *testing.T) {
	rows := []struct {
		name string
		cap  int   // tier 1's capacity: a pass starts up to cap/64 write-backs
		bad  []int // ranks, in the policy's own order, of the victims whose slot below is bad
		full bool
		free bool // the pass frees a slot
	}{
		{"skipped between write-backs", 128, []int{0, 2, 3}, false, false},
		{"skipped, then one dropped", 16, []int{0, 1}, true, true},
		{"every victim skipped", 16, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, false, false},
	}
	for name, f := range tierPolicies(t) {
		for _, row := range rows {
			t.Run(name+"/"+row.name, func(t *testing.T) {
				clock := &evict.Counter{}
				clock.Set(1000)
				build := func() slotLevel {
					l, err := newSlotLevel(TierSpec{Capacity: row.cap, Policy: f}, clock)
					require.NoError(t, err)
					return l
				}
				below, err := newSlotLevel(TierSpec{Capacity: 4, Write: WriteBack}, clock)
				require.NoError(t, err)
				o := &fakeRoom{lv: [2]slotLevel{build(), below}, ents: map[int32]evict.Entry{}, bad: map[int32]bool{}, full: row.full}
				ref := build()
				for k := range int32(12) {
					// Old and new, one-hit wonders and reused blocks, in no order.
					e := evict.Entry{Key: k, LastAccess: 900 + uint64(k*7%12)*5, Hits: uint32(k % 4)}
					o.ents[k] = e
					o.lv[0].policy.Add(e)
					ref.policy.Add(e)
				}
				// The bad victims, by rank in the policy's order (a scratch copy drained).
				order := build()
				for k := range int32(12) {
					order.policy.Add(o.ents[k])
				}
				keys := drainKeys(order.policy)
				for _, r := range row.bad {
					o.bad[keys[r]] = true
				}
				require.Equal(t, row.free, makeRoom(o, 1))
				require.NotZero(t, o.skipped, "the pass skipped a victim")
				require.Empty(t, o.lv[0].popped)
				for _, k := range o.taken {
					require.True(t, ref.policy.Remove(k))
				}
				require.Equal(t, drainKeys(ref.policy), drainKeys(o.lv[0].policy), "the victims after the pass")
			})
		}
	}
}

func drainKeys(p evict.Policy) []int32 {
	var out []int32
	for {
		k, ok := p.Victim()
		if !ok {
			return out
		}
		out = append(out, k)
	}
}
