package hybrid

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// mostHeldFirst is a user's policy that is not ordered and reads Held and Freeable: the
// sequences holding the most blocks first (ties by ID), skipping those that free nothing,
// until their Freeable covers the need.
type mostHeldFirst struct{}

func (mostHeldFirst) Name() string { return "most-held" }
func (mostHeldFirst) Victims(dst []int, c []evict.Candidate, need int) []int {
	idx := make([]int, len(c))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c[a].Held != c[b].Held {
			return c[b].Held - c[a].Held
		}
		return int(c[a].ID) - int(c[b].ID)
	})
	freed := 0
	for _, i := range idx {
		if freed >= need {
			break
		}
		if c[i].Freeable > 0 {
			dst = append(dst, i)
			freed += c[i].Freeable
		}
	}
	return dst
}

// TestPreemptKeptFreeableMatchesPlan drives two Managers in lockstep through random
// hybrid models (full attention, sliding windows, Mamba in both modes, chunked local
// attention; one to three groups) and random admissions (shared prefixes, chunked
// prefills, hit limits, readmissions of victims), forks, appends, reserves, extends,
// finishes, dropped blocks and preemptions (random needs and protected sets), with or
// without a host tier (write-through or write-back, whose copies in flight hold blocks;
// transfers completed or failed at random), with the cost policy or a user's policy: one reads every candidate's Freeable and Held from the
// accounting kept as the sequences run, the other plans them over the blocks each holds
// (planFreeable), as Preempt did before. They must report the same Freeable for every
// running sequence after every step, choose the same victims, free the same blocks and fail
// alike; a successful Preempt frees at least the need; and CheckInvariants (which checks the
// kept figures against each sequence's tables and a plan of its release, per group) holds.
func TestPreemptKeptFreeableMatchesPlan(t *testing.T) {
	for _, policy := range []evict.Preemption{evict.NewCostPreemption(), mostHeldFirst{}} {
		t.Run(policy.Name(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { checkKeptFreeable(rt, policy) })
		})
	}
}

func checkKeptFreeable(rt *rapid.T, policy evict.Preemption) {
	const bs = 4
	var tiers *prefix.TierConfig
	switch rapid.IntRange(0, 2).Draw(rt, "tiers") {
	case 1:
		tiers = &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 24, Write: prefix.WriteThrough}}, BlockBytes: 64}
	case 2:
		tiers = &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 24, Write: prefix.WriteBack}}, BlockBytes: 64, FreeTarget: 3}
	}
	// Windows from one token and chunked local attention, with tiers too: a lower-tier hit
	// that needs none of its blocks loaded is a pure hit (TestTierHitLoadingNothing).
	minWindow, kinds := 1, 4
	var specs []Spec
	for g := range rapid.IntRange(1, 3).Draw(rt, "groups") {
		switch rapid.IntRange(0, kinds).Draw(rt, fmt.Sprint("kind", g)) {
		case 0:
			specs = append(specs, FullAttention{Block: bs})
		case 1:
			specs = append(specs, SlidingWindow{Block: bs, Window: rapid.IntRange(minWindow, 3*bs+1).Draw(rt, fmt.Sprint("window", g))})
		case 2:
			specs = append(specs, Mamba{Block: bs, Mode: MambaAll})
		case 3:
			specs = append(specs, Mamba{Block: bs, Mode: MambaAlign})
		default:
			specs = append(specs, ChunkedLocal{Block: bs, Chunk: bs * rapid.IntRange(1, 3).Draw(rt, fmt.Sprint("chunk", g))})
		}
	}
	nb := rapid.IntRange(8, 80).Draw(rt, "blocks")
	up := rapid.Bool().Draw(rt, "uncached first")
	var ms [2]*Manager
	for i := range ms {
		var err error
		ms[i], err = New(Config{Groups: specs, NumBlocks: nb, Preemption: policy, FreeUncachedFirst: up, Tiers: tiers})
		require.NoError(rt, err)
		require.True(rt, ms[i].fa.on)
	}
	ms[1].planFreeable = true
	live := map[blocktable.SeqID]bool{}
	var waiting [][]int32
	next := blocktable.SeqID(1)
	check := func(op string) {
		for _, m := range ms {
			require.NoError(rt, m.CheckInvariants(), op)
		}
		for id := range live {
			f0, err0 := ms[0].Freeable(id)
			f1, err1 := ms[1].Freeable(id)
			require.NoError(rt, err0)
			require.NoError(rt, err1)
			require.Equal(rt, f1, f0, "%s: Freeable of %d", op, id)
		}
	}
	both := func(op string, f func(m *Manager) error) bool {
		e0, e1 := f(ms[0]), f(ms[1])
		require.Equal(rt, fmt.Sprint(e1), fmt.Sprint(e0), op)
		check(op)
		return e0 == nil
	}
	pick := func() (blocktable.SeqID, bool) {
		if len(live) == 0 {
			return 0, false
		}
		ids := make([]blocktable.SeqID, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return rapid.SampledFrom(ids).Draw(rt, "seq"), true
	}
	admit := func(rt *rapid.T, prompt []int32, resumed bool) {
		n := len(prompt)
		req := Request{Prompt: prompt, MaxTokens: n + rapid.IntRange(0, 12).Draw(rt, "extra"),
			Priority: rapid.IntRange(0, 2).Draw(rt, "priority"), Resumed: resumed,
			HitLimit: rapid.IntRange(0, n).Draw(rt, "hit limit")}
		if rapid.Bool().Draw(rt, "chunked") {
			req.Prefill = rapid.IntRange(1, n).Draw(rt, "prefill")
		}
		id := next
		next++
		if both("admit", func(m *Manager) error { r := req; _, err := m.Admit(id, &r); return err }) {
			live[id] = true
		}
	}
	rt.Repeat(map[string]func(*rapid.T){
		"admit": func(rt *rapid.T) {
			n := rapid.IntRange(1, 28).Draw(rt, "len")
			prompt := make([]int32, n)
			base := int32(rapid.IntRange(0, 2).Draw(rt, "base")) * 1000
			for i := range prompt {
				prompt[i] = base + int32(i)
			}
			if rapid.Bool().Draw(rt, "own tail") {
				prompt[n-1] = int32(next) + 100000
			}
			admit(rt, prompt, false)
		},
		"readmit": func(rt *rapid.T) {
			if len(waiting) == 0 {
				rt.Skip()
			}
			i := rapid.IntRange(0, len(waiting)-1).Draw(rt, "waiting")
			prompt := waiting[i]
			waiting = slices.Delete(waiting, i, i+1)
			admit(rt, prompt, true)
		},
		"fork": func(rt *rapid.T) {
			p, ok := pick()
			if !ok {
				rt.Skip()
			}
			id := next
			next++
			if both("fork", func(m *Manager) error { return m.Fork(p, id) }) {
				live[id] = true
			}
		},
		"append": func(rt *rapid.T) {
			id, ok := pick()
			if !ok {
				rt.Skip()
			}
			tok := []int32{int32(rapid.IntRange(0, 2).Draw(rt, "tok"))}
			both("append", func(m *Manager) error { return m.Append(id, tok) })
			ms[0].TakeCopies(nil)
			ms[1].TakeCopies(nil)
		},
		"reserve": func(rt *rapid.T) {
			id, ok := pick()
			if !ok {
				rt.Skip()
			}
			n := rapid.IntRange(1, 6).Draw(rt, "n")
			both("reserve", func(m *Manager) error { return m.Reserve(id, n) })
		},
		"extend": func(rt *rapid.T) {
			id, ok := pick()
			if !ok {
				rt.Skip()
			}
			n := rapid.IntRange(1, 8).Draw(rt, "n")
			both("extend", func(m *Manager) error { return m.Extend(id, n) })
		},
		"finish": func(rt *rapid.T) {
			id, ok := pick()
			if !ok {
				rt.Skip()
			}
			delete(live, id)
			both("finish", func(m *Manager) error { return m.Finish(id) })
		},
		"evict blocks": func(rt *rapid.T) {
			b := []blocks.ID{blocks.ID(rapid.IntRange(1, nb-1).Draw(rt, "block"))}
			both("evict blocks", func(m *Manager) error { m.EvictBlocks(b); return nil })
		},
		"transfers": func(rt *rapid.T) {
			if tiers == nil {
				rt.Skip()
			}
			var plans [2][]prefix.Plan
			for i, m := range ms {
				plans[i] = m.TakePlans(nil)
			}
			require.Equal(rt, plans[1], plans[0])
			seen := map[prefix.TransferID]bool{}
			for _, p := range plans[0] {
				if !seen[p.ID] {
					seen[p.ID] = true
					ok := rapid.Bool().Draw(rt, "transfer ok")
					both("complete", func(m *Manager) error { _, err := m.CompleteTransfer(p.ID, ok); return err })
				}
			}
		},
		"preempt": func(rt *rapid.T) {
			// Recompute only: swap preemption through the tiers is the tiers' own (and a
			// swapped window sequence's readmission panics in the load it plans, a defect
			// left to their owner).
			req := blocktable.PreemptRequest{Need: rapid.IntRange(1, nb/2).Draw(rt, "need")}
			if id, ok := pick(); ok && rapid.Bool().Draw(rt, "protect") {
				req.Protect = []blocktable.SeqID{id}
			}
			ids := sortedIDs(live)
			var toks [][]int32 // read before preempting, for readmissions
			for _, id := range ids {
				tk, err := ms[0].Tokens(id)
				require.NoError(rt, err)
				toks = append(toks, append([]int32(nil), tk...))
			}
			var outs [2][]blocktable.Preempted
			var errs [2]string
			for i, m := range ms {
				free := m.st.free()
				out, err := m.Preempt(req, nil)
				outs[i], errs[i] = out, fmt.Sprint(err)
				if err == nil {
					require.GreaterOrEqual(rt, m.st.free()-free, req.Need, "a successful Preempt frees the need")
				}
			}
			require.Equal(rt, errs[1], errs[0], "preempt %+v", req)
			require.Equal(rt, outs[1], outs[0], "preempt %+v", req)
			for _, v := range outs[0] {
				delete(live, v.Seq)
				waiting = append(waiting, toks[slices.Index(ids, v.Seq)])
			}
			check("preempt")
		},
	})
}

func sortedIDs(live map[blocktable.SeqID]bool) []blocktable.SeqID {
	ids := make([]blocktable.SeqID, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestCostPreemptPlansOnlyTheVictims: with the cost policy, Preempt reads every candidate's
// Freeable from the accounting and plans the release of the victims alone, so the table
// entries it visits are the victims' (200 running sequences of 20 blocks in two groups,
// with a shared prefix; preempting for one block takes one victim), however many run.
func TestCostPreemptPlansOnlyTheVictims(t *testing.T) {
	for _, c := range []struct {
		name    string
		running int
		shared  bool
	}{{"few", 2, false}, {"many", 200, false}, {"many shared", 200, true}} {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 8}},
				NumBlocks: c.running*40 + 10, Preemption: evict.NewCostPreemption()})
			require.NoError(t, err)
			for id := range c.running {
				prompt := make([]int32, 40)
				for i := range prompt {
					prompt[i] = int32(id*1000 + i)
					if c.shared && i < 20 {
						prompt[i] = int32(i)
					}
				}
				_, err := m.Admit(blocktable.SeqID(id), &Request{Prompt: prompt, MaxTokens: 44})
				require.NoError(t, err)
			}
			m.pre.visited = 0
			out, err := m.Preempt(blocktable.PreemptRequest{Need: 1}, nil)
			require.NoError(t, err)
			require.Len(t, out, 1)
			require.Equal(t, 20, m.pre.visited, "the victim's 10 entries in each group, nobody else's")
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// TestKeptFreeableWithCopiesInFlight: a copy to a lower tier holds a reference on the
// block it reads, which no sequence's note records. While one is in flight Freeable is
// planned (the block stays held when its sequence goes), and the kept figures, which count
// sequences, are right again once it completes: Freeable, Preempt's choice and
// CheckInvariants' comparison with a plan agree throughout, under the cost policy.
func TestKeptFreeableWithCopiesInFlight(t *testing.T) {
	for _, write := range []prefix.WritePolicy{prefix.WriteThrough, prefix.WriteBack} {
		t.Run(fmt.Sprint(write), func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 4}},
				NumBlocks: 16, Preemption: evict.NewCostPreemption(),
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: write}},
					BlockBytes: 64, FreeTarget: 4}})
			require.NoError(t, err)
			_, err = m.Admit(1, &Request{Prompt: toks(0, 13), MaxTokens: 16}) // 3 full blocks a group
			require.NoError(t, err)
			_, err = m.Admit(2, &Request{Prompt: toks(0, 9), MaxTokens: 12}) // hits 8 of 1's tokens
			require.NoError(t, err)
			_, err = m.Admit(3, &Request{Prompt: toks(500, 6), MaxTokens: 8})
			require.NoError(t, err)
			require.NoError(t, m.Finish(3)) // its blocks join the free queue: write-back's victims
			freeable := func() map[blocktable.SeqID]int {
				out := map[blocktable.SeqID]int{}
				for _, id := range []blocktable.SeqID{1, 2} {
					f, err := m.Freeable(id)
					require.NoError(t, err)
					m.planBegin()
					require.Equal(t, m.planRelease(m.seqs[id]), f, "Freeable of %d is its release's plan", id)
					out[id] = f
				}
				return out
			}
			require.NoError(t, m.CheckInvariants())
			plans := m.TakePlans(nil)
			require.NotEmpty(t, plans, "copies in flight")
			require.False(t, m.kept(), "planned while copies are in flight")
			inFlight := freeable()
			require.NoError(t, m.CheckInvariants())
			for _, p := range plans {
				_, err := m.CompleteTransfer(p.ID, true)
				require.NoError(t, err)
			}
			require.True(t, m.kept(), "kept once every copy completed")
			done := freeable()
			require.NoError(t, m.CheckInvariants())
			if write == prefix.WriteThrough {
				require.Less(t, inFlight[1], done[1], "1's cached blocks were held by their copies")
			}
			free := m.Stats().Free
			out, err := m.Preempt(blocktable.PreemptRequest{Need: 1}, nil)
			require.NoError(t, err)
			require.Len(t, out, 1)
			require.GreaterOrEqual(t, m.Stats().Free-free, 1)
			require.NoError(t, m.CheckInvariants())
		})
	}
}
