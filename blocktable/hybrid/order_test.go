package hybrid

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestPreemptOrderedMatchesFullWalk drives two Managers in lockstep through random
// admissions (shared prefixes, priorities, chunked prefills), forks, appends, extends,
// finishes and preemptions (random needs and protected sets): one Preempts by walking its
// heap in the ordered policy's order, the other by the full walk over every candidate
// (fullWalk). They must choose the same victims, free the same blocks, and fail alike.
func TestPreemptOrderedMatchesFullWalk(t *testing.T) {
	for _, name := range []string{"fcfs", "priority", "progress"} {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				var ms [2]*Manager
				nb := rapid.IntRange(8, 60).Draw(rt, "blocks")
				w := rapid.IntRange(1, 9).Draw(rt, "window")
				for i := range ms {
					p, err := evict.PreemptionByName(name)
					require.NoError(rt, err)
					ms[i], err = New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: w}},
						NumBlocks: nb, Preemption: p})
					require.NoError(rt, err)
				}
				require.NotNil(rt, ms[0].ordered)
				ms[1].fullWalk = true
				live := map[blocktable.SeqID]bool{}
				next := blocktable.SeqID(1)
				both := func(op string, f func(m *Manager) error) bool {
					e0, e1 := f(ms[0]), f(ms[1])
					require.Equal(rt, fmt.Sprint(e0), fmt.Sprint(e1), op)
					for _, m := range ms {
						require.NoError(rt, m.CheckInvariants(), op)
					}
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
				rt.Repeat(map[string]func(*rapid.T){
					"admit": func(rt *rapid.T) {
						n := rapid.IntRange(1, 24).Draw(rt, "len")
						prompt := make([]int32, n)
						base := int32(rapid.IntRange(0, 2).Draw(rt, "base")) * 1000
						for i := range prompt {
							prompt[i] = base + int32(i)
						}
						if rapid.Bool().Draw(rt, "own tail") {
							prompt[n-1] = int32(next) + 100000
						}
						req := Request{Prompt: prompt, MaxTokens: n + rapid.IntRange(0, 12).Draw(rt, "extra"),
							Priority: rapid.IntRange(0, 2).Draw(rt, "priority")}
						if rapid.Bool().Draw(rt, "chunked") {
							req.Prefill = rapid.IntRange(1, n).Draw(rt, "prefill")
						}
						id := next
						next++
						if both("admit", func(m *Manager) error { r := req; _, err := m.Admit(id, &r); return err }) {
							live[id] = true
						}
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
						both("finish", func(m *Manager) error { return m.Finish(id) })
						delete(live, id)
					},
					"preempt": func(rt *rapid.T) {
						req := blocktable.PreemptRequest{Need: rapid.IntRange(1, nb/2).Draw(rt, "need")}
						if id, ok := pick(); ok && rapid.Bool().Draw(rt, "protect") {
							req.Protect = []blocktable.SeqID{id}
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
							require.NoError(rt, m.CheckInvariants())
						}
						require.Equal(rt, errs[0], errs[1], "preempt %+v", req)
						require.Equal(rt, outs[1], outs[0], "preempt %+v", req)
						for _, v := range outs[0] {
							delete(live, v.Seq)
						}
					},
				})
			})
		})
	}
}
