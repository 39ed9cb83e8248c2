package evict

import (
	"math"

	"github.com/kvpage/kvpage/internal/invariant"
)

// tb is what the op machine needs from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// policyCase builds one policy under test together with its reference model.
type policyCase struct {
	name  string
	build func(capacity int, clock *Counter) (Policy, *refPolicy)
}

// testScore is the scoring function of the Scored case: it mixes hits and recency and
// returns NaN and -0 for some entries, to exercise the documented order of odd scores.
func testScore(e Entry) float64 {
	switch e.Hits {
	case 5:
		return math.NaN()
	case 4:
		return math.Copysign(0, -1)
	case 3:
		return 0
	}
	return float64(e.Hits)*3 - float64(e.LastAccess)/2
}

func policyCases() []policyCase {
	plain := func(kind string, mk func(n int) Policy) policyCase {
		return policyCase{kind, func(n int, c *Counter) (Policy, *refPolicy) { return mk(n), newRef(kind, c) }}
	}
	return []policyCase{
		plain("lru", func(n int) Policy { return must(NewLRU(n)) }),
		plain("fifo", func(n int) Policy { return must(NewFIFO(n)) }),
		plain("mru", func(n int) Policy { return must(NewMRU(n)) }),
		plain("lfu", func(n int) Policy { return must(NewLFU(n, 0)) }),
		{"lfu/halflife=4", func(n int, c *Counter) (Policy, *refPolicy) {
			r := newRef("lfu", c)
			r.halfLife = 4
			return must(NewLFU(n, 4)), r
		}},
		{"priority", func(n int, c *Counter) (Policy, *refPolicy) { return must(NewPriority(n, c)), newRef("priority", c) }},
		plain("slru", func(n int) Policy { return must(NewSLRU(n, 0)) }),
		{"slru/50", func(n int, c *Counter) (Policy, *refPolicy) {
			r := newRef("slru", c)
			r.percent = 50
			return must(NewSLRU(n, 50)), r
		}},
		{"slru/100", func(n int, c *Counter) (Policy, *refPolicy) {
			r := newRef("slru", c)
			r.percent = 100
			return must(NewSLRU(n, 100)), r
		}},
		plain("s3fifo", func(n int) Policy { return must(NewS3FIFO(n, 0)) }),
		{"s3fifo/40", func(n int, c *Counter) (Policy, *refPolicy) {
			r := newRef("s3fifo", c)
			r.percent = 40
			return must(NewS3FIFO(n, 40)), r
		}},
		{"scored", func(n int, c *Counter) (Policy, *refPolicy) {
			r := newRef("scored", c)
			r.score = testScore
			return must(NewScored(n, "test", testScore)), r
		}},
	}
}

// machine drives a policy and its reference model with the same operations and fails at
// the first disagreement.
type machine struct {
	t     tb
	name  string
	p     Policy
	ref   *refPolicy
	clock *Counter
	steps int
	keys  int // keys are drawn from [0, keys)
}

func newMachine(t tb, pc policyCase, keys int) *machine {
	clock := &Counter{}
	clock.Set(100) // room below for old LastAccess values
	p, ref := pc.build(keys, clock)
	return &machine{t: t, name: pc.name, p: p, ref: ref, clock: clock, keys: keys}
}

func (m *machine) add(e Entry) {
	m.t.Helper()
	m.steps++
	m.p.Add(e)
	m.ref.Add(e)
	m.check("add %+v", e)
}

func (m *machine) remove(k int32) {
	m.t.Helper()
	m.steps++
	got, want := m.p.Remove(k), m.ref.Remove(k)
	if got != want {
		m.t.Fatalf("%s step %d: Remove(%d) = %v, reference %v", m.name, m.steps, k, got, want)
	}
	m.check("remove %d", k)
}

func (m *machine) victim() {
	m.t.Helper()
	m.steps++
	gk, gok := m.p.Victim()
	wk, wok := m.ref.Victim()
	if gk != wk || gok != wok {
		m.t.Fatalf("%s step %d: Victim() = %d, %v; reference %d, %v", m.name, m.steps, gk, gok, wk, wok)
	}
	m.check("victim")
}

func (m *machine) tick(n int) {
	for range n {
		m.clock.Tick()
	}
}

func (m *machine) reset() {
	m.t.Helper()
	m.p.Reset()
	m.ref.Reset()
	m.check("reset")
}

// drain pops every remaining candidate, comparing the whole victim sequence.
func (m *machine) drain() {
	m.t.Helper()
	for m.ref.Len() > 0 {
		m.victim()
	}
	m.victim() // and both agree that nothing is left
}

func (m *machine) check(op string, args ...any) {
	m.t.Helper()
	if got, want := m.p.Len(), m.ref.Len(); got != want {
		m.t.Fatalf("%s step %d ("+op+"): Len = %d, reference %d", append(append([]any{m.name, m.steps}, args...), got, want)...)
	}
	// Under -race and -tags kvinvariants the policies check themselves (sampled); a full
	// check of a big policy at every step would make the suite slow there.
	if invariant.Enabled && m.keys > 100 {
		return
	}
	if c, ok := m.p.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			m.t.Fatalf("%s step %d: %v", m.name, m.steps, err)
		}
	}
}

// priorities are the retention priorities tests draw from: none, the extremes, the
// default, common classes, and an out-of-range value that must be capped at 100.
var priorities = []uint8{0, 1, 10, DefaultPriority, 50, 90, 100, 200}

// entryFrom builds an entry from small numbers, relative to the current time: keys from a
// small set (so keys are re-added and removed often), LastAccess up to 40 ticks old or a
// little in the future, few hits (sometimes many), and retention that may expire soon.
func (m *machine) entryFrom(key int, age, hits, prio, until byte) Entry {
	now := m.clock.Now()
	e := Entry{Key: int32(key % m.keys), LastAccess: now - uint64(age%44) + 4}
	e.Hits = uint32(hits % 7)
	if hits%31 == 30 {
		e.Hits = math.MaxUint32 - uint32(hits%3)
	}
	e.Priority = priorities[int(prio)%len(priorities)]
	if until%3 != 0 {
		e.PriorityUntil = now + uint64(until%12) - 4
	}
	return e
}

// run interprets data as a program of operations, three to six bytes each, for the fuzz
// target: op%8 selects add (0-2), remove (3), victim (4, 5), tick (6) or reset (7).
func (m *machine) run(data []byte) {
	m.t.Helper()
	for len(data) >= 6 {
		op := data[0]
		switch op % 8 {
		case 0, 1, 2:
			m.add(m.entryFrom(int(data[1]), data[2], data[3], data[4], data[5]))
			data = data[6:]
		case 3:
			m.remove(int32(int(data[1]) % m.keys))
			data = data[2:]
		case 4, 5:
			m.victim()
			data = data[1:]
		case 6:
			m.tick(int(data[1]%6) + 1)
			data = data[2:]
		case 7:
			if data[1]%8 == 0 {
				m.reset()
			} else {
				m.victim()
			}
			data = data[2:]
		}
	}
	m.drain()
}
