package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// carveUnitPerLayer is carveUnit before it capped the total: each page at most 256
// units, and the first unit past that returned as it was. The reference for what stays.
func carveUnitPerLayer(pages []int64) (unit int64, mult []int) {
	smallest := pages[0]
	var sum int64
	for _, p := range pages {
		smallest = min(smallest, p)
		sum += p
	}
	mult = make([]int, len(pages))
	for d := int64(1); ; d++ {
		unit = (smallest + d - 1) / d
		var carved int64
		ok := true
		for i, p := range pages {
			mult[i] = int((p + unit - 1) / unit)
			carved += int64(mult[i]) * unit
			ok = ok && mult[i] <= 256
		}
		if !ok || float64(carved) <= 1.01*float64(sum) || d == 256 {
			return unit, mult
		}
	}
}

func total(mult []int) (n int) {
	for _, m := range mult {
		n += m
	}
	return n
}

// carveUnit keeps the carved pool's groups, the sum of the pages' units, within
// hybrid.New's 255; it capped each page at 256 instead, so a pool past 255 groups was
// carved and then refused (0120917). A carving that fitted before is the same.
func TestCarveUnitCapsTheTotal(t *testing.T) {
	for _, c := range []struct {
		name  string
		pages []int64
		unit  int64
		mult  []int
	}{
		{"the smallest page as the unit fits", []int64{100, 25_000}, 100, []int{1, 250}},
		{"the smallest page is too small: the smallest unit that fits", []int64{1, 1000}, 4, []int{1, 250}},
		{"two pages of 200 units", []int64{1000, 200_000, 200_000}, 1575, []int{1, 127, 127}},
		{"exact thirds", []int64{300, 300, 900}, 300, []int{1, 1, 3}},
	} {
		unit, mult := carveUnit(c.pages)
		assert.Equal(t, c.unit, unit, c.name)
		assert.Equal(t, c.mult, mult, c.name)
		assert.LessOrEqual(t, total(mult), maxPoolGroups, c.name)
		_, old := carveUnitPerLayer(c.pages)
		if total(old) <= maxPoolGroups {
			assert.Equal(t, old, mult, "%s: as before", c.name)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		pages := rapid.SliceOfN(rapid.Int64Range(1, 1<<40), 1, 6).Draw(t, "pages")
		unit, mult := carveUnit(pages)
		require.LessOrEqual(t, total(mult), maxPoolGroups)
		for i, p := range pages {
			require.GreaterOrEqual(t, int64(mult[i])*unit, p, "page %d fits its units", i)
			require.Less(t, int64(mult[i]-1)*unit, p, "page %d takes no unit it does not need", i)
		}
		if oldUnit, old := carveUnitPerLayer(pages); total(old) <= maxPoolGroups {
			require.Equal(t, oldUnit, unit)
			require.Equal(t, old, mult)
		}
	})
}

// Qwen3-Next carved in an fp4 cache carves into one pool of at most 255 groups and runs:
// its bf16 state beside its fp4 attention took 359 groups, refused by Validate
// (0120917).
func TestHybridCarvedFP4Runs(t *testing.T) {
	reqs, cfg := evictedPrefixTrace()
	s := Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: LayoutCarved, BlockSize: 16, KVCacheDType: sizing.NVFP4}
	require.NoError(t, s.Validate(&cfg))
	a, err := newHybridAlloc(&cfg, s, nil, true)
	require.NoError(t, err)
	require.Len(t, a.pools, 1)
	assert.LessOrEqual(t, len(a.pools[0].kinds), maxPoolGroups)
	assert.Greater(t, len(a.pools[0].kinds), 200, "still carved finely")
	res, err := Simulate(reqs, cfg, s)
	require.NoError(t, err)
	assert.Equal(t, len(reqs), res.Requests)
	assert.Positive(t, res.TotalSteps)
}
