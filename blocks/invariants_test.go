package blocks

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each case breaks the structure in one way that no sequence of calls can, and
// CheckInvariants must name it.
func TestCheckInvariantsFindsCorruption(t *testing.T) {
	// Every case starts from a pool of 6 with the null block, 1 and 2 held, 3 4 5 free
	// (ring head at slot 2).
	tests := []struct {
		name    string
		corrupt func(p *Pool)
		want    string
	}{
		{name: "negative refcount", corrupt: func(p *Pool) { p.refs[1] = -1 }, want: "negative refcount"},
		{name: "leaked block", corrupt: func(p *Pool) { p.refs[3] = 1 }, want: "on the free list"},
		{name: "held block on the free list", corrupt: func(p *Pool) { p.ring[p.head] = 1 }, want: "on the free list"},
		{name: "free block off the free list", corrupt: func(p *Pool) { p.refs[1] = 0 }, want: "leaked"},
		{name: "free list holds a block twice", corrupt: func(p *Pool) { p.ring[p.head] = 4 }, want: "twice"},
		{name: "free list holds an unknown block", corrupt: func(p *Pool) { p.ring[p.head] = 77 }, want: "unknown block 77"},
		{name: "free list holds the null block", corrupt: func(p *Pool) { p.ring[p.head] = NullID }, want: "null block"},
		{name: "null block held", corrupt: func(p *Pool) { p.refs[NullID] = 1 }, want: "null block has refcount 1"},
		{name: "free count too high", corrupt: func(p *Pool) { p.nfree = 6 }, want: "free count 6"},
		{name: "free count negative", corrupt: func(p *Pool) { p.nfree = -1 }, want: "free count -1"},
		{name: "free count disagrees with refcounts", corrupt: func(p *Pool) { p.nfree = 2 }, want: "leaked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, 6, WithNullBlock())
			mustAllocate(t, p, 2)
			require.NoError(t, p.CheckInvariants())
			tt.corrupt(p)
			err := p.CheckInvariants()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// Under -tags kvinvariants (and -race) every mutation re-checks the invariants, so a broken
// structure panics at the next call instead of handing out a block twice.
func TestMutationsCheckInvariantsWhenEnabled(t *testing.T) {
	if !invariant.Enabled {
		t.Skip("invariant checks are compiled out; run with -tags kvinvariants or -race")
	}
	p := newPool(t, 6, WithNullBlock())
	mustAllocate(t, p, 2)
	p.refs[4] = 1 // a free block that claims a holder
	assert.PanicsWithValue(t, "kvpage: broken invariant: block 4 has 1 holders but is on the free list", func() {
		_ = p.Retain(1)
	})
}
