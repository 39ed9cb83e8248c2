package blocktable

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestSequenceLayout keeps a sequence record's fields where sequence's comment puts them:
// a decode loop visits every running record once a step, and each line of it that the
// step reads is a cache miss by the next visit. A decode step reads the first two lines
// (lookup, step); a decode commit of a plain prompt adds nothing beyond the third, which a
// block's fill reads in every run; the prompt's lines are read by neither.
func TestSequenceLayout(t *testing.T) {
	var s sequence
	line := func(off uintptr) int { return int(off / 64) }
	tb := unsafe.Offsetof(s.t)
	for name, off := range map[string]uintptr{
		"id": unsafe.Offsetof(s.id), "state": unsafe.Offsetof(s.state), "plain": unsafe.Offsetof(s.plain),
		"stale": unsafe.Offsetof(s.stale), "dup": unsafe.Offsetof(s.dup),
		"tokens": unsafe.Offsetof(s.tokens) + unsafe.Sizeof(s.tokens) - 1, "cur": unsafe.Offsetof(s.cur) + unsafe.Sizeof(s.cur) - 1,
	} {
		require.Equal(t, 0, line(off), "%s belongs on the decode step's first line", name)
	}
	for name, off := range map[string]uintptr{
		"t.room": tb + unsafe.Offsetof(s.t.room), "t.tokens": tb + unsafe.Offsetof(s.t.tokens),
		"t.ids": tb + unsafe.Offsetof(s.t.ids) + unsafe.Sizeof(s.t.ids) - 1,
	} {
		require.Equal(t, 1, line(off), "%s belongs on the decode step's second line", name)
	}
	for name, off := range map[string]uintptr{
		"loading": unsafe.Offsetof(s.loading), "fresh": unsafe.Offsetof(s.fresh), "freshStep": unsafe.Offsetof(s.freshStep),
	} {
		require.LessOrEqual(t, line(off), 2, "%s is read by every decode commit", name)
	}
	require.Equal(t, uintptr(64), tb, "the table starts on the second line")
	require.Greater(t, line(unsafe.Offsetof(s.prompt)), 2, "the prompt is read by no decode step")
}
