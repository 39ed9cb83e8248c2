package evict

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// refVictims is the reference for every preemption policy: sort a copy of all sequences by
// the policy's definition with sort keys written out as tuples, then take them in order
// until their Freeable blocks cover need.
func refVictims(name string, running []Candidate, need int) []int {
	if need <= 0 {
		return nil
	}
	idx := make([]int, len(running))
	for i := range idx {
		idx[i] = i
	}
	// key returns the tuple that sorts ascending in preemption order.
	key := func(s Candidate) []int64 {
		switch name {
		case "fcfs":
			return []int64{-int64(s.Arrival)}
		case "priority":
			return []int64{-int64(s.Priority), -int64(s.Arrival)}
		case "progress":
			return []int64{int64(s.Output), -int64(s.Computed - s.Output)}
		}
		panic(name)
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := running[i], running[j]
		if name == "cost" {
			// Freeable 0 last; else compare Computed/Freeable as exact fractions.
			if (a.Freeable > 0) != (b.Freeable > 0) {
				if a.Freeable > 0 {
					return -1
				}
				return 1
			}
			if a.Freeable > 0 {
				l, r := int64(a.Computed)*int64(b.Freeable), int64(b.Computed)*int64(a.Freeable)
				if l != r {
					if l < r {
						return -1
					}
					return 1
				}
			}
		} else if c := slices.Compare(key(a), key(b)); c != 0 {
			return c
		}
		if a.ID != b.ID {
			if a.ID < b.ID {
				return -1
			}
			return 1
		}
		return 0 // stable: smaller index first
	})
	freed := 0
	for n, i := range idx {
		freed += max(running[i].Freeable, 0)
		if freed >= need {
			return idx[:n+1]
		}
	}
	return idx
}

func seqGen() *rapid.Generator[Candidate] {
	return rapid.Custom(func(t *rapid.T) Candidate {
		computed := rapid.IntRange(0, 64).Draw(t, "computed")
		return Candidate{
			ID:       rapid.Uint64Range(0, 12).Draw(t, "id"), // duplicates on purpose
			Priority: rapid.IntRange(-2, 3).Draw(t, "priority"),
			Arrival:  rapid.Uint64Range(0, 10).Draw(t, "arrival"),
			Computed: computed,
			Output:   rapid.IntRange(0, computed).Draw(t, "output"),
			Held:     rapid.IntRange(0, 8).Draw(t, "held"),
			Freeable: rapid.IntRange(0, 5).Draw(t, "freeable"),
		}
	})
}

// TestPreemptionAgainstReference compares every policy with the sort-based reference on
// random running sets, with and without room in dst, and checks that running is untouched
// and that what dst held before is kept.
func TestPreemptionAgainstReference(t *testing.T) {
	for _, name := range PreemptionNames() {
		t.Run(name, func(t *testing.T) {
			p, err := PreemptionByName(name)
			require.NoError(t, err)
			rapid.Check(t, func(rt *rapid.T) {
				running := rapid.SliceOfN(seqGen(), 0, 40).Draw(rt, "running")
				need := rapid.IntRange(-1, 60).Draw(rt, "need")
				before := slices.Clone(running)
				want := refVictims(name, running, need)

				var dst []int
				if rapid.Bool().Draw(rt, "room") {
					dst = make([]int, 0, 1+len(running))
				}
				dst = append(dst, -7) // a caller's earlier content
				got := p.Victims(dst, running, need)
				if got[0] != -7 {
					rt.Fatalf("dst[0] overwritten: %v", got)
				}
				if !slices.Equal(got[1:], want) && !(len(got) == 1 && len(want) == 0) {
					rt.Fatalf("Victims = %v, reference %v", got[1:], want)
				}
				if !slices.Equal(running, before) {
					rt.Fatalf("Victims modified running")
				}
			})
		})
	}
}

func TestPreemptionOrders(t *testing.T) {
	running := []Candidate{
		{ID: 10, Priority: 0, Arrival: 1, Computed: 400, Output: 100, Freeable: 4},
		{ID: 11, Priority: 1, Arrival: 2, Computed: 50, Output: 10, Freeable: 1},
		{ID: 12, Priority: 0, Arrival: 3, Computed: 300, Output: 10, Freeable: 0},
		{ID: 13, Priority: 1, Arrival: 0, Computed: 90, Output: 50, Freeable: 3},
	}
	all := 1 << 30
	tests := []struct {
		policy string
		need   int
		want   []int
	}{
		{"fcfs", all, []int{2, 1, 0, 3}},     // newest first
		{"fcfs", 1, []int{2, 1}},             // index 2 frees nothing: one more
		{"priority", all, []int{1, 3, 2, 0}}, // priority 1 (newest first), then 0
		{"priority", 3, []int{1, 3}},         // 1 + 3 blocks cover 3
		{"progress", all, []int{2, 1, 3, 0}}, // output 10 (prompt 290 before 40), 50, 100
		{"cost", all, []int{3, 1, 0, 2}},     // tokens per freed block 30, 50, 100; frees nothing
		{"cost", 0, nil},                     // nothing needed
		{"cost", -3, nil},                    // nothing needed
	}
	for _, tt := range tests {
		p, err := PreemptionByName(tt.policy)
		require.NoError(t, err)
		got := p.Victims(nil, running, tt.need)
		assert.Equal(t, tt.want, got, "%s need %d", tt.policy, tt.need)
	}
}

func TestPreemptionTiesByID(t *testing.T) {
	running := []Candidate{
		{ID: 9, Arrival: 5, Freeable: 1},
		{ID: 3, Arrival: 5, Freeable: 1},
		{ID: 7, Arrival: 5, Freeable: 1},
	}
	for _, name := range PreemptionNames() {
		p, _ := PreemptionByName(name)
		assert.Equal(t, []int{1, 2, 0}, p.Victims(nil, running, 3), name)
	}
}

// TestPreemptionSortsManyVictims reaches the heap-selection path (more than scanPicks victims,
// room for all) and the scanning path (no room) and expects the same answer.
func TestPreemptionSortsManyVictims(t *testing.T) {
	running := make([]Candidate, 50)
	for i := range running {
		running[i] = Candidate{ID: uint64(i), Arrival: uint64(i * 17 % 50), Computed: i, Freeable: i % 2}
	}
	for _, name := range PreemptionNames() {
		p, _ := PreemptionByName(name)
		want := refVictims(name, running, 20)
		require.Greater(t, len(want), scanPicks)
		assert.Equal(t, want, p.Victims(make([]int, 0, 50), running, 20), name+" heap-selected")
		assert.Equal(t, want, p.Victims(nil, running, 20), name+" scanned")
	}
}

func TestPreemptionByNameUnknown(t *testing.T) {
	_, err := PreemptionByName("random")
	require.ErrorIs(t, err, ErrUnknownPolicy)
	var u *UnknownPolicyError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, "preemption", u.Kind)
	assert.Equal(t, []string{"fcfs", "priority", "progress", "cost"}, u.Valid)
	assert.Contains(t, err.Error(), `"random"`)
	for _, n := range PreemptionNames() {
		p, err := PreemptionByName(n)
		require.NoError(t, err)
		assert.Equal(t, n, p.Name())
	}
}
