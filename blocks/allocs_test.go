package blocks

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hot paths allocate nothing in steady state. Only in the normal build: the race
// detector and the kvinvariants checks allocate on their own.
func TestHotPathsDoNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are only meaningful without -race and -tags kvinvariants")
	}
	p := newPool(t, 1024, WithNullBlock())
	ids := make([]ID, 0, 64)
	held := mustAllocate(t, p, 8)

	tests := []struct {
		name string
		run  func()
	}{
		{name: "Allocate into a slice with room, then Release", run: func() {
			var err error
			ids, err = p.Allocate(ids[:0], 64)
			require.NoError(t, err)
			require.NoError(t, p.Release(ids...))
		}},
		{name: "Retain then Release", run: func() {
			require.NoError(t, p.Retain(held...))
			require.NoError(t, p.Release(held...))
		}},
		{name: "Allocate zero blocks into nil", run: func() {
			_, err := p.Allocate(nil, 0)
			require.NoError(t, err)
		}},
		{name: "Stats", run: func() { _ = p.Stats().ActiveUsage() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(100, tt.run))
		})
	}
	require.NoError(t, p.CheckInvariants())
}

// Allocate alone, measured separately from Release so that one cannot hide the other.
func TestAllocateAndReleaseEachAllocateNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are only meaningful without -race and -tags kvinvariants")
	}
	p := newPool(t, 1<<16)
	ids := make([]ID, 0, 256)
	var err error
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		ids, err = p.Allocate(ids[:0], 256)
		if err != nil {
			panic(err)
		}
	}), "Allocate")
	// 101 runs of 256 blocks are held now; release them 256 at a time.
	held := make([]ID, 0, 101*256)
	for id := range 101 * 256 {
		held = append(held, ID(id))
	}
	i := 0
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if err := p.Release(held[i*256 : (i+1)*256]...); err != nil {
			panic(err)
		}
		i++
	}), "Release")
	require.NoError(t, p.CheckInvariants())
}
