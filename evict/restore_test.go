package evict

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// restoreCases are the policies whose order depends on their history, so that they must
// implement Restorer: given back with Add, their victims would lose their place.
var restoreCases = map[string]bool{"fifo": true, "slru": true, "slru/50": true, "slru/100": true, "s3fifo": true, "s3fifo/40": true}

// A cache pops victims, takes some (they leave) and gives the others back (the prefix
// index's lower tiers skip a victim whose copy below is bad): a Restorer undoes every pop,
// last first, and the cache Removes the ones it took; any other policy gets the ones it
// skipped back by Add with their own entries. Either way, the victims that follow are
// those of the reference model from which only the taken ones were Removed. Before
// Restorer, FIFO ranked a victim given back as just arrived, S3FIFO likewise in its
// queue, and SLRU kept the demotions the pops had caused.
func TestVictimsGivenBackKeepTheirRank(t *testing.T) {
	for _, pc := range policyCases() {
		t.Run(pc.name, func(t *testing.T) {
			p, _ := pc.build(1, &Counter{})
			_, isRestorer := p.(Restorer)
			require.Equal(t, restoreCases[pc.name], isRestorer, "a history-ranked policy is a Restorer, no other needs to be")
			rapid.Check(t, func(rt *rapid.T) {
				m := newMachine(rt, pc, 12)
				entries := map[int32]Entry{}
				for range rapid.IntRange(0, 30).Draw(rt, "ops") {
					switch rapid.IntRange(0, 5).Draw(rt, "op") {
					case 0, 1, 2:
						e := m.entryFrom(rapid.IntRange(0, 11).Draw(rt, "key"), rapid.Byte().Draw(rt, "age"),
							rapid.Byte().Draw(rt, "hits"), rapid.Byte().Draw(rt, "prio"), rapid.Byte().Draw(rt, "until"))
						m.add(e)
						entries[e.Key] = e
					case 3:
						m.remove(int32(rapid.IntRange(0, 11).Draw(rt, "key")))
					case 4:
						m.victim()
					case 5:
						m.tick(rapid.IntRange(1, 6).Draw(rt, "ticks"))
					}
				}
				type pop struct {
					k     int32
					taken bool
				}
				var pass []pop
				for range rapid.IntRange(0, m.p.Len()).Draw(rt, "pops") {
					k, ok := m.p.Victim()
					require.True(rt, ok)
					pass = append(pass, pop{k, rapid.Bool().Draw(rt, "taken")})
				}
				if r, ok := m.p.(Restorer); ok {
					for i := len(pass) - 1; i >= 0; i-- {
						r.Restore(pass[i].k)
					}
					for _, v := range pass {
						if v.taken {
							require.True(rt, m.p.Remove(v.k))
						}
					}
				} else {
					for _, v := range pass {
						if !v.taken {
							m.p.Add(entries[v.k])
						}
					}
				}
				for _, v := range pass {
					if v.taken {
						m.ref.Remove(v.k)
					}
				}
				m.check("after the pass")
				m.drain()
			})
		})
	}
}

// Restore of a key that is a candidate is the caller's bug, and panics.
func TestRestoreOfACandidatePanics(t *testing.T) {
	for _, pc := range policyCases() {
		p, _ := pc.build(4, &Counter{})
		r, ok := p.(Restorer)
		if !ok {
			continue
		}
		p.Add(Entry{Key: 1, LastAccess: 1, Hits: 3})
		require.Panics(t, func() { r.Restore(1) }, pc.name)
	}
}
