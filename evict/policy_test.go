package evict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type e = Entry

// testCap is the key capacity of the policies of the hand-made scenarios.
const testCap = 64

// victims pops everything and returns the keys in order.
func victims(p Policy) []int32 {
	var out []int32
	for {
		k, ok := p.Victim()
		if !ok {
			return out
		}
		out = append(out, k)
	}
}

func addAll(p Policy, es ...e) Policy {
	for _, x := range es {
		p.Add(x)
	}
	return p
}

// TestPolicyScenarios spells out each policy's definition on a small hand-made example.
func TestPolicyScenarios(t *testing.T) {
	clock := &Counter{}
	clock.Set(10)
	tests := []struct {
		name string
		p    Policy
		add  []e
		want []int32
	}{
		{"lru: oldest first, ties by key", must(NewLRU(testCap)),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{2, 3, 5, 1}},
		{"mru: newest first, ties by key", must(NewMRU(testCap)),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{1, 3, 5, 2}},
		{"fifo: order of Add, whatever the time", must(NewFIFO(testCap)),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 1}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{5, 3, 1, 2}},
		{"fifo: adding a candidate again moves it to the back", must(NewFIFO(testCap)),
			[]e{{Key: 5}, {Key: 3}, {Key: 5}},
			[]int32{3, 5}},
		// H = 100: score = LastAccess + 100·log2(Hits+1).
		{"lfu: hits buy time, old hot blocks leave", must(NewLFU(testCap, 100)),
			[]e{
				{Key: 1, LastAccess: 100, Hits: 0}, // 100
				{Key: 2, LastAccess: 0, Hits: 3},   // 0 + 200 = 200
				{Key: 3, LastAccess: 150, Hits: 0}, // 150
				{Key: 4, LastAccess: 0, Hits: 7},   // 0 + 300 = 300
				{Key: 5, LastAccess: 301},          // 301: newer than key 4 is worth
			},
			[]int32{1, 3, 2, 4, 5}},
		{"lfu: without hits it is lru", must(NewLFU(testCap, 0)),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{2, 3, 5, 1}},
		{"priority: lower class first, lru within a class", must(NewPriority(testCap, clock)),
			[]e{
				{Key: 1, LastAccess: 1, Priority: 90},
				{Key: 2, LastAccess: 5},                                    // default 35
				{Key: 3, LastAccess: 9, Priority: 10},                      //
				{Key: 4, LastAccess: 0, Priority: 90, PriorityUntil: 10},   // until now: still 90
				{Key: 5, LastAccess: 2, Priority: DefaultPriority},         //
				{Key: 6, LastAccess: 0, Priority: 100, PriorityUntil: 9},   // expired: 35
				{Key: 7, LastAccess: 3, Priority: 250},                     // capped at 100
				{Key: 8, LastAccess: 3, Priority: 1, PriorityUntil: 11000}, // lowest
			},
			[]int32{8, 3, 6, 5, 2, 4, 1, 7}},
		// Protected share 50%: of n candidates at most n/2 (rounded down) are protected.
		{"slru: reused blocks outlive newer one-hit wonders, up to their share", must(NewSLRU(testCap, 50)),
			[]e{
				{Key: 3, LastAccess: 10, Hits: 1},
				{Key: 4, LastAccess: 11, Hits: 0},
				{Key: 1, LastAccess: 1, Hits: 5}, // protected (1 of 3)
				{Key: 2, LastAccess: 2, Hits: 2}, // protected (2 of 4)
				{Key: 5, LastAccess: 12, Hits: 1},
			},
			// Probation 3, 4, 5 goes first, oldest first; after 4 leaves, 3 candidates
			// allow 1 protected, so 1 (the older) is demoted and, being oldest, goes next.
			[]int32{3, 4, 1, 5, 2}},
		{"s3fifo: one-hit wonders first while they hold 10%", must(NewS3FIFO(testCap, 10)),
			[]e{
				{Key: 1, Hits: 4},
				{Key: 2, Hits: 1},
				{Key: 3, Hits: 2},
				{Key: 4, Hits: 0},
			},
			[]int32{2, 4, 1, 3}},
		{"s3fifo: main queue goes first when the small one is under its share", must(NewS3FIFO(testCap, 50)),
			[]e{{Key: 1, Hits: 4}, {Key: 2, Hits: 1}, {Key: 3, Hits: 2}, {Key: 4, Hits: 5}, {Key: 5, Hits: 3}},
			// small {2} is 1 of 5 < 50%: main 1, 3, 4 go; then 1 of 2 >= 50%: 2; then 5.
			[]int32{1, 3, 4, 2, 5}},
		{"scored: smallest score first, NaN first, ties by key", must(NewScored(testCap, "hits", func(x e) float64 {
			if x.Hits == 99 {
				return math.NaN()
			}
			return -float64(x.Hits)
		})),
			[]e{{Key: 4, Hits: 1}, {Key: 2, Hits: 3}, {Key: 9, Hits: 99}, {Key: 1, Hits: 1}},
			[]int32{9, 2, 1, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addAll(tt.p, tt.add...)
			assert.Equal(t, tt.want, victims(tt.p))
			assert.Zero(t, tt.p.Len())
		})
	}
}

// TestPriorityRetentionExpires checks that a block falls back to the default class once
// the shared clock passes its PriorityUntil, and not before.
func TestPriorityRetentionExpires(t *testing.T) {
	clock := &Counter{}
	p := must(NewPriority(testCap, clock))
	p.Add(e{Key: 1, LastAccess: 0, Priority: 90, PriorityUntil: 5}) // system prompt, retained until 5
	p.Add(e{Key: 2, LastAccess: 3})                                 // a chat turn at the default
	clock.Set(5)
	k, _ := p.Victim()
	assert.Equal(t, int32(2), k, "at its PriorityUntil the block still has its priority")
	p.Add(e{Key: 2, LastAccess: 3})
	clock.Set(6)
	k, _ = p.Victim()
	assert.Equal(t, int32(1), k, "past PriorityUntil it competes at the default priority, by its older time")
}

func TestRemoveAndReAdd(t *testing.T) {
	for _, pc := range policyCases() {
		t.Run(pc.name, func(t *testing.T) {
			p, _ := pc.build(testCap, &Counter{})
			assert.False(t, p.Remove(1), "remove from empty")
			_, ok := p.Victim()
			assert.False(t, ok, "victim from empty")
			p.Add(e{Key: 1, LastAccess: 1})
			p.Add(e{Key: 2, LastAccess: 2})
			p.Add(e{Key: 1, LastAccess: 3}) // replaces key 1's entry
			assert.Equal(t, 2, p.Len())
			assert.True(t, p.Remove(1))
			assert.False(t, p.Remove(1))
			assert.Equal(t, []int32{2}, victims(p))
			p.Add(e{Key: 7})
			p.Reset()
			assert.Zero(t, p.Len())
			_, ok = p.Victim()
			assert.False(t, ok, "victim after reset")
		})
	}
}

func TestByName(t *testing.T) {
	clock := &Counter{}
	for _, name := range Names() {
		f, err := ByName(name)
		require.NoError(t, err, name)
		p := must(f(testCap, clock))
		assert.Equal(t, name, p.Name())
		_, err = f(-1, clock)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%s: a negative capacity", name)
		p.Add(e{Key: testCap - 1})
		k, ok := p.Victim()
		assert.True(t, ok)
		assert.Equal(t, int32(testCap-1), k, "%s: keys up to the capacity", name)
	}
	assert.Equal(t, "lru", Names()[0], "the default comes first")
	names := Names()
	names[0] = "changed"
	assert.Equal(t, "lru", Names()[0], "Names returns a copy")

	_, err := ByName("lrfu")
	require.ErrorIs(t, err, ErrUnknownPolicy)
	var u *UnknownPolicyError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, "lrfu", u.Name)
	assert.Equal(t, Names(), u.Valid)
	assert.Contains(t, err.Error(), "lru, fifo, mru, lfu, priority, slru, s3fifo")

	lru, _ := ByName("lru")
	assert.Panics(t, func() { must(lru(4, nil)).Add(e{Key: 4}) }, "a key beyond the capacity is the caller's bug")
}

// TestLRURebase drives LRU past the times its packed heap elements hold: candidates keep
// their order, and only those older than half the range below the newest time tie at the
// oldest time and go by key, as NewLRU's internals document.
func TestLRURebase(t *testing.T) {
	p := must(NewLRU(64)) // 6 key bits: times up to 2^58 - 1 fit
	const big = uint64(1) << 60
	p.Add(e{Key: 9, LastAccess: 5})
	p.Add(e{Key: 3, LastAccess: 7})
	p.Add(e{Key: 4, LastAccess: big - 2})
	p.Add(e{Key: 2, LastAccess: big - 1})
	p.Add(e{Key: 8, LastAccess: big}) // rebases: 5 and 7 are ancient now
	p.Add(e{Key: 7, LastAccess: 6})   // older than the base: ancient too
	assert.Equal(t, 6, p.Len())
	require.NoError(t, p.(*lru).check())
	assert.Equal(t, []int32{3, 7, 9, 4, 2, 8}, victims(p))
	p.Add(e{Key: 1, LastAccess: ^uint64(0)}) // a rebase that clamps everything
	p.Add(e{Key: 0, LastAccess: 1})
	assert.Equal(t, []int32{0, 1}, victims(p))
}

func TestConstructorDefaults(t *testing.T) {
	assert.Equal(t, uint64(DefaultHalfLife), must(NewLFU(testCap, 0)).(*lfu).halfLife)
	assert.Equal(t, uint64(7), must(NewLFU(testCap, 7)).(*lfu).halfLife)
	assert.Equal(t, DefaultProtectedPercent, must(NewSLRU(testCap, 0)).(*slru).percent)
	assert.Equal(t, 100, must(NewSLRU(testCap, 100)).(*slru).percent)
	assert.Equal(t, 30, must(NewSLRU(testCap, 30)).(*slru).percent)
	assert.Equal(t, DefaultSmallPercent, must(NewS3FIFO(testCap, 0)).(*s3fifo).percent)
	assert.Equal(t, 25, must(NewS3FIFO(testCap, 25)).(*s3fifo).percent)
	assert.Equal(t, "scored", must(NewScored(testCap, "", func(Entry) float64 { return 0 })).Name())
	assert.Equal(t, 0, must(NewLRU(0)).Len(), "an empty capacity is allowed")
}

// Every constructor refuses arguments out of range with an *ArgumentError naming the
// policy and the argument, and builds nothing.
func TestConstructorsRefuseBadArguments(t *testing.T) {
	clock := &Counter{}
	score := func(Entry) float64 { return 0 }
	for _, tc := range []struct {
		name         string
		build        func() (Policy, error)
		policy, what string
	}{
		{"lru, negative", func() (Policy, error) { return NewLRU(-1) }, "lru", "capacity"},
		{"lru, beyond int32 keys", func() (Policy, error) { return NewLRU(MaxCapacity + 1) }, "lru", "capacity"},
		{"fifo", func() (Policy, error) { return NewFIFO(-5) }, "fifo", "capacity"},
		{"mru", func() (Policy, error) { return NewMRU(math.MinInt) }, "mru", "capacity"},
		{"lfu", func() (Policy, error) { return NewLFU(-1, 0) }, "lfu", "capacity"},
		{"priority, capacity", func() (Policy, error) { return NewPriority(-1, clock) }, "priority", "capacity"},
		{"priority, no clock", func() (Policy, error) { return NewPriority(testCap, nil) }, "priority", "clock"},
		{"slru, capacity", func() (Policy, error) { return NewSLRU(-1, 0) }, "slru", "capacity"},
		{"slru, percent above 100", func() (Policy, error) { return NewSLRU(testCap, 101) }, "slru", "percent"},
		{"slru, negative percent", func() (Policy, error) { return NewSLRU(testCap, -1) }, "slru", "percent"},
		{"s3fifo, capacity", func() (Policy, error) { return NewS3FIFO(MaxCapacity+1, 10) }, "s3fifo", "capacity"},
		{"s3fifo, percent", func() (Policy, error) { return NewS3FIFO(testCap, -1) }, "s3fifo", "percent"},
		{"scored, capacity", func() (Policy, error) { return NewScored(-1, "mine", score) }, "mine", "capacity"},
		{"scored, no function", func() (Policy, error) { return NewScored(testCap, "", nil) }, "scored", "score"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.build()
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Nil(t, p)
			var ae *ArgumentError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tc.policy, ae.Policy)
			assert.Equal(t, tc.what, ae.What)
			assert.Contains(t, err.Error(), tc.what)
		})
	}
}

func TestEffectivePriority(t *testing.T) {
	tests := []struct {
		e    e
		now  uint64
		want uint8
	}{
		{e{}, 0, DefaultPriority},
		{e{Priority: 90}, 1 << 60, 90},
		{e{Priority: 90, PriorityUntil: 5}, 5, 90},
		{e{Priority: 90, PriorityUntil: 5}, 6, DefaultPriority},
		{e{Priority: 1, PriorityUntil: 5}, 6, DefaultPriority},
		{e{Priority: 101}, 0, MaxPriority},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, EffectivePriority(tt.e, tt.now), "%+v at %d", tt.e, tt.now)
	}
}
