package evict

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"pgregory.net/rapid"
)

// TestPoliciesAgainstReference is the state-machine test: random Add, Remove, Victim, clock
// ticks and Reset on every policy and on its reference model, comparing every answer and
// finally the whole remaining victim order, with the policy's check after every step. Keys
// come from a small set, so that keys are often re-added while they are candidates.
func TestPoliciesAgainstReference(t *testing.T) {
	runModel(t, 24, 4)
}

// TestPoliciesAgainstReferenceLarge does the same with hundreds of candidates, so that
// heaps are deep, the B-tree of Priority splits and merges nodes, and SLRU and S3FIFO see
// their shares at realistic sizes.
func TestPoliciesAgainstReferenceLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large model test")
	}
	if invariant.Enabled {
		// The policies check themselves after every mutation here: keep sizes moderate
		// (still several B-tree nodes) so that -race stays fast.
		runModel(t, 96, 32)
		return
	}
	runModel(t, 320, 64)
}

func runModel(t *testing.T, keys, bulk int) {
	for _, pc := range policyCases() {
		t.Run(pc.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := newMachine(rt, pc, keys)
				key := rapid.IntRange(0, keys-1)
				b := rapid.Byte()
				add := func(rt *rapid.T) {
					m.add(m.entryFrom(key.Draw(rt, "key"), b.Draw(rt, "age"), b.Draw(rt, "hits"),
						b.Draw(rt, "prio"), b.Draw(rt, "until")))
				}
				rt.Repeat(map[string]func(*rapid.T){
					"add": add,
					"addMany": func(rt *rapid.T) {
						for range rapid.IntRange(1, bulk).Draw(rt, "n") {
							add(rt)
						}
					},
					"remove": func(rt *rapid.T) { m.remove(int32(key.Draw(rt, "key"))) },
					"victim": func(rt *rapid.T) { m.victim() },
					"victims": func(rt *rapid.T) {
						for range rapid.IntRange(1, bulk).Draw(rt, "n") {
							m.victim()
						}
					},
					"tick": func(rt *rapid.T) { m.tick(rapid.IntRange(1, 8).Draw(rt, "ticks")) },
					"reset": func(rt *rapid.T) {
						if rapid.IntRange(0, 9).Draw(rt, "reset?") == 0 {
							m.reset()
						}
					},
				})
				m.drain()
			})
		})
	}
}

// FuzzPolicy runs a byte program (see machine.run) on one policy chosen by the first byte
// and on its reference model.
func FuzzPolicy(f *testing.F) {
	cases := policyCases()
	for i := range cases {
		f.Add(append([]byte{byte(i)}, seedProgram...))
		f.Add([]byte{byte(i), 0, 1, 2, 3, 4, 5, 1, 9, 8, 7, 6, 5, 4, 6, 3, 2, 1, 7, 4, 4})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		pc := cases[int(data[0])%len(cases)]
		newMachine(t, pc, 24).run(data[1:])
	})
}

// seedProgram adds a mix of entries (old and new, hit and not, prioritised and expiring),
// removes one, ticks past some retention times, and pops.
var seedProgram = []byte{
	0, 1, 0, 0, 0, 0, // key 1, one hit-free entry
	1, 2, 30, 3, 5, 1, // key 2, old, reused, priority 90 until soon
	2, 3, 2, 6, 3, 2, // key 3, recent, reused
	0, 4, 10, 1, 1, 3, // key 4, priority 1
	0, 5, 40, 2, 6, 4, // key 5, very old, priority 100
	3, 3, // remove key 3
	6, 5, // tick 6
	4,
	0, 3, 0, 5, 2, 5, // key 3 back with more hits
	6, 5, 5, 4, 5, 5, 5,
}
