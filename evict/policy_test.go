package evict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type e = Entry[int32]

// victims pops everything and returns the keys in order.
func victims(p Policy[int32]) []int32 {
	var out []int32
	for {
		k, ok := p.Victim()
		if !ok {
			return out
		}
		out = append(out, k)
	}
}

func addAll(p Policy[int32], es ...e) Policy[int32] {
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
		p    Policy[int32]
		add  []e
		want []int32
	}{
		{"lru: oldest first, ties by key", NewLRU[int32](),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{2, 3, 5, 1}},
		{"mru: newest first, ties by key", NewMRU[int32](),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{1, 3, 5, 2}},
		{"fifo: order of Add, whatever the time", NewFIFO[int32](),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 1}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{5, 3, 1, 2}},
		{"fifo: adding a candidate again moves it to the back", NewFIFO[int32](),
			[]e{{Key: 5}, {Key: 3}, {Key: 5}},
			[]int32{3, 5}},
		// H = 100: score = LastAccess + 100·log2(Hits+1).
		{"lfu: hits buy time, old hot blocks leave", NewLFU[int32](100),
			[]e{
				{Key: 1, LastAccess: 100, Hits: 0}, // 100
				{Key: 2, LastAccess: 0, Hits: 3},   // 0 + 200 = 200
				{Key: 3, LastAccess: 150, Hits: 0}, // 150
				{Key: 4, LastAccess: 0, Hits: 7},   // 0 + 300 = 300
				{Key: 5, LastAccess: 301},          // 301: newer than key 4 is worth
			},
			[]int32{1, 3, 2, 4, 5}},
		{"lfu: without hits it is lru", NewLFU[int32](0),
			[]e{{Key: 5, LastAccess: 10}, {Key: 3, LastAccess: 10}, {Key: 1, LastAccess: 20}, {Key: 2, LastAccess: 5}},
			[]int32{2, 3, 5, 1}},
		{"priority: lower class first, lru within a class", NewPriority[int32](clock),
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
		{"slru: reused blocks outlive newer one-hit wonders, up to their share", NewSLRU[int32](50),
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
		{"s3fifo: one-hit wonders first while they hold 10%", NewS3FIFO[int32](10),
			[]e{
				{Key: 1, Hits: 4},
				{Key: 2, Hits: 1},
				{Key: 3, Hits: 2},
				{Key: 4, Hits: 0},
			},
			[]int32{2, 4, 1, 3}},
		{"s3fifo: main queue goes first when the small one is under its share", NewS3FIFO[int32](50),
			[]e{{Key: 1, Hits: 4}, {Key: 2, Hits: 1}, {Key: 3, Hits: 2}, {Key: 4, Hits: 5}, {Key: 5, Hits: 3}},
			// small {2} is 1 of 5 < 50%: main 1, 3, 4 go; then 1 of 2 >= 50%: 2; then 5.
			[]int32{1, 3, 4, 2, 5}},
		{"scored: smallest score first, NaN first, ties by key", NewScored("hits", func(x e) float64 {
			if x.Hits == 99 {
				return math.NaN()
			}
			return -float64(x.Hits)
		}),
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
	p := NewPriority[int32](clock)
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
			p, _ := pc.build(&Counter{})
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

func TestNewByName(t *testing.T) {
	clock := &Counter{}
	for _, name := range Names() {
		p, err := New[int32](name, clock)
		require.NoError(t, err, name)
		assert.Equal(t, name, p.Name())
	}
	assert.Equal(t, "lru", Names()[0], "the default comes first")
	names := Names()
	names[0] = "changed"
	assert.Equal(t, "lru", Names()[0], "Names returns a copy")

	_, err := New[int32]("lrfu", clock)
	require.ErrorIs(t, err, ErrUnknownPolicy)
	var u *UnknownPolicyError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, "lrfu", u.Name)
	assert.Equal(t, Names(), u.Valid)
	assert.Contains(t, err.Error(), "lru, fifo, mru, lfu, priority, slru, s3fifo")

	_, err = New[int32]("priority", nil)
	require.ErrorIs(t, err, ErrNoClock)
	p, err := New[string]("lfu", nil)
	require.NoError(t, err, "policies that do not read the time need no clock")
	p.Add(Entry[string]{Key: "b"})
	p.Add(Entry[string]{Key: "a"})
	k, _ := p.Victim()
	assert.Equal(t, "a", k, "keys of any ordered type")
}

func TestConstructorDefaults(t *testing.T) {
	assert.Equal(t, uint64(DefaultHalfLife), NewLFU[int32](0).HalfLife())
	assert.Equal(t, uint64(7), NewLFU[int32](7).HalfLife())
	assert.Equal(t, DefaultProtectedPercent, NewSLRU[int32](0).ProtectedPercent())
	assert.Equal(t, DefaultProtectedPercent, NewSLRU[int32](101).ProtectedPercent())
	assert.Equal(t, 30, NewSLRU[int32](30).ProtectedPercent())
	assert.Equal(t, DefaultSmallPercent, NewS3FIFO[int32](-1).SmallPercent())
	assert.Equal(t, 25, NewS3FIFO[int32](25).SmallPercent())
	assert.Equal(t, "scored", NewScored[int32]("", func(Entry[int32]) float64 { return 0 }).Name())
	assert.Panics(t, func() { NewPriority[int32](nil) })
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
