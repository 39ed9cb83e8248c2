package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The check values of ../shared/workloads.md: if any of these moves, the workloads are no
// longer the ones other systems were measured on.
func TestW3TraceCheckValues(t *testing.T) {
	tr := NewW3Trace()
	choices := make([]int, 8)
	for i := range choices {
		choices[i] = tr.Requests[i].Choice
	}
	assert.Equal(t, []int{1, 1, 27, 0, 8, 0, 26, 2}, choices, "first 8 choices")
	assert.Equal(t, []int32{75413, 44291, 43858, 79764}, tr.System[0][:4], "system prompt 0")
	assert.Equal(t, tr.System[0][:4], W2Prompt()[:4], "W2 prompt starts like system prompt 0")

	counts := make([]int, W3SystemPrompts)
	for _, r := range tr.Requests {
		counts[r.Choice]++
		require.Len(t, r.Prompt, 2560)
		require.Len(t, r.Output, 128)
	}
	assert.Equal(t, []int{5570, 2744, 1704, 1280, 945, 804, 612, 590}, counts[:8], "requests per prompt 0..7")
	assert.Equal(t, []int{146, 124, 124, 122}, counts[28:], "requests per prompt 28..31")
}

func TestZipfFallsBackToLastIndex(t *testing.T) {
	// A cdf that rounding left short of 1: draws at or above 0.75 fall to the last index.
	z := &Zipf{cdf: []float64{0.25, 0.5, 0.75, 0.75}}
	r := NewSplitMix64(1)
	seen := map[int]int{}
	for range 1000 {
		seen[z.Draw(r)]++
	}
	assert.Positive(t, seen[3], "draws past the cdf go to the last index")
	assert.Zero(t, seen[4])
}
