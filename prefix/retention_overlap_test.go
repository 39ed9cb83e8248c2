package prefix

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A prompt's retention ranges must not overlap, as TensorRT-LLM's KvCacheRetentionConfig
// requires ("Token ranges must be non-overlapping"; the VALID and INVALID cases below are
// its constructor's own examples, End 0 for its None). Commit used to take them and let
// the last range holding a block's first token win; it now refuses them with
// ErrRangesOverlap (an ErrInvalidArgument), changing nothing. Ranges may come in any order,
// and ranges that touch do not overlap.
func TestCommitRefusesOverlappingRanges(t *testing.T) {
	rr := func(se ...int) []RetentionRange {
		var out []RetentionRange
		for i := 0; i < len(se); i += 2 {
			out = append(out, RetentionRange{Start: se[i], End: se[i+1], Priority: 50})
		}
		return out
	}
	cases := []struct {
		name   string
		ranges []RetentionRange
		ok     bool
	}{
		{"trt-llm valid: [(0, 64), (90, 128)]", rr(0, 64, 90, 128), true},
		{"trt-llm valid: [(0, None)]", rr(0, 0), true},
		{"trt-llm valid: [(50, 100), (30, 40)]", rr(50, 100, 30, 40), true},
		{"trt-llm valid: [(0, 30), (30, 50), (60, 80)]", rr(0, 30, 30, 50, 60, 80), true},
		{"trt-llm invalid: [(0, None), (30, 50)]", rr(0, 0, 30, 50), false},
		{"trt-llm invalid: [(0, 64), (60, 80)]", rr(0, 64, 60, 80), false},
		{"trt-llm invalid: [(0, 128), (64, 256)]", rr(0, 128, 64, 256), false},
		{"out of order, overlapping", rr(60, 80, 0, 64), false},
		{"out of order, the open one last in tokens", rr(60, 0, 0, 30, 30, 60), true},
		{"out of order, the open one not last in tokens", rr(30, 50, 0, 0), false},
		{"two open ranges", rr(10, 0, 20, 0), false},
		{"the same start", rr(8, 16, 8, 12), false},
		{"one inside another, past a gap", rr(0, 4, 8, 64, 70, 80, 10, 12), false},
		{"a range inside an earlier one", rr(0, 100, 200, 300, 10, 20), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 8)
			p := Prompt{Tokens: toks(1, 2*testBS), RetentionRanges: tc.ranges}
			ranges := append([]RetentionRange(nil), tc.ranges...)
			ids, cur := x.Peek(nil, &p, LeaveOne)
			require.Empty(t, ids)
			ids, err := pool.Allocate(nil, 2)
			require.NoError(t, err)
			before, cur0 := snap(x, pool), cur
			_, err = x.Commit(&cur, &p, ids)
			assert.Equal(t, ranges, p.RetentionRanges, "the caller's ranges are not reordered")
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, 2, x.Stats().Cached)
				return
			}
			require.ErrorIs(t, err, ErrRangesOverlap)
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Equal(t, before, snap(x, pool), "nothing changed")
			assert.Equal(t, cur0, cur, "the cursor is unmoved")
		})
	}
}

// A prompt gives at most MaxRetentionRanges ranges: one more is refused with a *SizeError
// before any range is read pair by pair, and nothing changes; the most are accepted.
func TestCommitBoundsRetentionRanges(t *testing.T) {
	for _, n := range []int{MaxRetentionRanges, MaxRetentionRanges + 1} {
		pool, x := newTestIndex(t, 8)
		ranges := make([]RetentionRange, n)
		for i := range ranges {
			ranges[i] = RetentionRange{Start: n - i, End: n - i + 1, Priority: 50} // unsorted, disjoint
		}
		p := Prompt{Tokens: toks(1, 2*testBS), RetentionRanges: ranges}
		ids, err := pool.Allocate(nil, 2)
		require.NoError(t, err)
		var cur Cursor
		before := snap(x, pool)
		_, err = x.Commit(&cur, &p, ids)
		if n <= MaxRetentionRanges {
			require.NoError(t, err, "%d ranges", n)
			continue
		}
		var se *SizeError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.EqualValues(t, n, se.N)
		assert.Equal(t, before, snap(x, pool), "nothing changed")
		assert.Equal(t, Cursor{}, cur)
	}
}
