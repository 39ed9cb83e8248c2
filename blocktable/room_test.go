package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appendInLast's room (tokens that still fit the table's own last block without its
// checks) is forgotten by every call that changes what the last block is or who holds it:
// after a Fork the parent's next token copies the shared block, after a Truncate or a
// Release the checks run again.
func TestRoomIsForgottenWhenTheLastBlockChanges(t *testing.T) {
	pool, err := blocks.New(16)
	require.NoError(t, err)
	tb, err := NewTable(pool, 4)
	require.NoError(t, err)
	_, err = tb.Append(1, 0) // one block, 1 token
	require.NoError(t, err)
	require.True(t, tb.appendInLast(1))
	assert.Equal(t, 2, tb.room, "the checked step leaves the rest of the block")
	require.NoError(t, tb.CheckInvariants())

	c, err := tb.Fork()
	require.NoError(t, err)
	assert.Equal(t, 0, tb.room, "the fork shares the last block")
	assert.False(t, tb.appendInLast(1), "a shared last block takes Append's copy")
	res, err := tb.Append(1, 0)
	require.NoError(t, err)
	assert.True(t, res.Copied)
	require.NoError(t, tb.CheckInvariants())
	require.NoError(t, c.CheckInvariants())

	require.True(t, tb.appendInLast(1)) // 4 tokens: the block is full
	assert.Equal(t, 0, tb.room)
	require.NoError(t, tb.Truncate(2))
	assert.Equal(t, 0, tb.room)
	require.True(t, tb.appendInLast(1))
	assert.Equal(t, 1, tb.room)
	require.NoError(t, tb.CheckInvariants())
	require.NoError(t, tb.Release())
	assert.Equal(t, 0, tb.room)
	require.NoError(t, c.Release())
}
