package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Commit refuses a retention priority above evict.MaxPriority, in the prompt's Retention
// or in one of its ranges, and changes nothing; MaxPriority itself is taken.
func TestCommitRefusesPriorityAboveMax(t *testing.T) {
	cases := []struct {
		name string
		p    Prompt
		ok   bool
	}{
		{"max", Prompt{Retention: Retention{Priority: evict.MaxPriority}}, true},
		{"range at max", Prompt{RetentionRanges: []RetentionRange{{Start: 0, End: 4, Priority: evict.MaxPriority}}}, true},
		{"101", Prompt{Retention: Retention{Priority: evict.MaxPriority + 1}}, false},
		{"255", Prompt{Retention: Retention{Priority: 255}}, false},
		{"a range's 200", Prompt{RetentionRanges: []RetentionRange{{Start: 0, End: 4}, {Start: 4, End: 0, Priority: 200}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 8)
			p := tc.p
			p.Tokens = toks(1, 2*testBS)
			ids, cur := x.Peek(nil, &p, LeaveOne)
			require.Empty(t, ids)
			ids, err := pool.Allocate(nil, 2)
			require.NoError(t, err)
			before, cur0 := snap(x, pool), cur
			_, err = x.Commit(&cur, &p, ids)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, 2, x.Stats().Cached)
				return
			}
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Equal(t, before, snap(x, pool), "nothing changed")
			assert.Equal(t, cur0, cur, "the cursor is unmoved")
		})
	}
}
