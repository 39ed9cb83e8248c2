package blocks

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFaultsHidden(t *testing.T) {
	// Free list 7 8 1 3; reclaimable 2 4 (see cachedPool).
	tests := []struct {
		name      string
		hidden    int
		n         int
		numFree   int
		available int
		wantErr   bool
		wantIDs   []ID
		reclaims  []int
	}{
		{name: "none hidden", hidden: 0, n: 4, numFree: 4, available: 6, wantIDs: []ID{7, 8, 1, 3}},
		{name: "two hidden, free list covers", hidden: 2, n: 2, numFree: 2, available: 4, wantIDs: []ID{7, 8}},
		{name: "two hidden, reclaim the rest", hidden: 2, n: 3, numFree: 2, available: 4, wantIDs: []ID{7, 8, 1}, reclaims: []int{1}},
		{name: "two hidden, too many", hidden: 2, n: 5, numFree: 2, available: 4, wantErr: true},
		{name: "hidden eats reclaimable", hidden: 5, n: 1, numFree: 0, available: 1, wantIDs: []ID{7}, reclaims: []int{2}},
		{name: "all hidden", hidden: 6, n: 1, numFree: 0, available: 0, wantErr: true},
		{name: "more hidden than exist", hidden: 100, n: 0, numFree: 0, available: 0, wantIDs: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c := cachedPool(t)
			f := &Faults{Hidden: tt.hidden}
			p.SetFaults(f)
			require.Same(t, f, p.Faults())
			require.Equal(t, tt.numFree, p.NumFree())
			require.Equal(t, tt.available, p.Available())
			before := takeSnapshot(p)
			ids, err := p.Allocate(nil, tt.n)
			if tt.wantErr {
				var oob *OutOfBlocksError
				require.ErrorAs(t, err, &oob)
				require.Equal(t, tt.available, oob.Available)
				requireUnchanged(t, before, p, 1)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantIDs, ids)
			require.Equal(t, tt.reclaims, c.calls)
			require.NoError(t, p.CheckInvariants())
			p.SetFaults(nil)
			require.Equal(t, p.Stats().Free, p.NumFree(), "removing the faults restores the real count")
		})
	}
}

func TestFaultsFailIn(t *testing.T) {
	p := newPool(t, 9, WithNullBlock())
	f := &Faults{FailIn: 3}
	p.SetFaults(f)
	mustAllocate(t, p, 1)
	require.Equal(t, 8-1, p.Available(), "an armed failure two allocations away does not trip on Available")
	_, err := p.Allocate(nil, 0)
	require.NoError(t, err, "an allocation of no block does not count")
	mustAllocate(t, p, 2)
	require.Equal(t, 1, f.FailIn)

	before := takeSnapshot(p)
	_, err = p.Allocate(nil, 1)
	require.True(t, errors.Is(err, ErrOutOfBlocks))
	requireUnchanged(t, before, p, 1)
	require.Equal(t, 0, f.FailIn)
	require.Equal(t, 1, f.Tripped)
	mustAllocate(t, p, 1) // spent: the next one succeeds

	f.FailIn = 1
	require.Equal(t, 0, p.Available(), "the check before an allocation receives the failure")
	require.Equal(t, 4, p.Available(), "and only once")
	require.Equal(t, 2, f.Tripped)
}

func TestWriteState(t *testing.T) {
	p, _ := cachedPool(t)
	p.SetFaults(&Faults{Hidden: 1})
	var b strings.Builder
	require.NoError(t, p.WriteState(&b))
	require.Equal(t, `pool capacity=8 null=true free=4 held=4
  free 7 8 1 3
  held 2x1 4x1 5x1 6x2
  counters allocations=6 releases=2 failed=0 reclaimed=0
  faults hidden=1 failin=0 tripped=0
`, b.String())

	// A deep snapshot: a rejected call leaves the text unchanged.
	_, err := p.Allocate(nil, -1)
	require.Error(t, err)
	var after strings.Builder
	require.NoError(t, p.WriteState(&after))
	require.Equal(t, b.String(), after.String())
}
