package blocks

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func dumpPool(t *testing.T, p *Pool) string {
	var b bytes.Buffer
	require.NoError(t, p.WriteState(&b))
	return b.String()
}

// Issue 13 item 13: 2^31 Retains of one block wrapped its int32 count negative, and Release
// then reported a double free. Retain now refuses the holder that would wrap the count,
// whole call undone, state unchanged.
func TestRetainRefusesRefCountOverflow(t *testing.T) {
	p := newPool(t, 4)
	ids, err := p.Allocate(nil, 2)
	require.NoError(t, err)
	p.refs[ids[0]] = MaxRefCount - 1
	require.NoError(t, p.Retain(ids[0]), "the last holder that fits")
	require.Equal(t, MaxRefCount, p.RefCount(ids[0]))
	before := dumpPool(t, p)
	for _, call := range [][]ID{{ids[0]}, {ids[1], ids[0]}, {ids[1], ids[1], ids[0], ids[1]}} {
		err := p.Retain(call...)
		require.ErrorIs(t, err, ErrRefCountOverflow, "%v", call)
		var be *BlockError
		require.ErrorAs(t, err, &be)
		require.Equal(t, ids[0], be.ID)
		require.Equal(t, before, dumpPool(t, p), "a refused Retain changed the pool")
	}
	require.NoError(t, p.CheckInvariants())
	p.refs[ids[0]] = 1
	require.NoError(t, p.Release(ids...))
	require.Equal(t, p.Capacity(), p.NumFree())
}
