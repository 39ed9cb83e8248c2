package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

func priorityIndex(t *testing.T, n int, opts ...Option) (*blocks.Pool, *Index) {
	t.Helper()
	return newTestIndex(t, n, append([]Option{WithPolicy(evict.NewPriority)}, opts...)...)
}

func prioOf(x *Index, id blocks.ID) (uint8, uint64) {
	n := nodeOf(id)
	until := uint64(0)
	if x.until != nil {
		until = x.until[n]
	}
	return x.nodes[n].prio, until
}

// Token ranges give blocks their own retention, TensorRT-LLM's shape: the range that
// holds a block's first token gives it its retention (ranges do not overlap:
// retention_overlap_test.go), blocks in no range take Prompt.Retention, durations count
// from the commit on the index's clock.
func TestRetentionRanges(t *testing.T) {
	pool, x := priorityIndex(t, 16)
	p := Prompt{Tokens: toks(1, 4*testBS), Retention: Retention{Priority: 20},
		RetentionRanges: []RetentionRange{
			{Start: 0, End: testBS, Priority: 90},                       // block 0: a system prompt
			{Start: testBS, End: testBS + 1, Priority: 60, Duration: 5}, // block 1: its first token
			{Start: 3 * testBS, Priority: 10},                           // block 3 and beyond (decode)
		}}
	r := admit(t, x, pool, p)
	now := x.clock.Now()
	got := [][2]uint64{}
	for _, id := range r.ids {
		pr, until := prioOf(x, id)
		got = append(got, [2]uint64{uint64(pr), until})
	}
	require.Equal(t, [][2]uint64{{90, 0}, {60, now + 5}, {20, 0}, {10, 0}}, got)
	r.finish(t, x)
	// The policy sees it: block 3 (10) goes first, then block 2 (20), then block 1 (60,
	// lapsed to the default 35 once the clock passes its duration), the system prompt last.
	for range 6 {
		x.clock.Tick()
	}
	var order []blocks.ID
	for range 4 {
		before := x.cached
		require.Equal(t, 1, x.Evict(1))
		require.Equal(t, before-1, x.cached)
		for _, id := range r.ids {
			if !x.IsCached(id) && !contains(order, id) {
				order = append(order, id)
			}
		}
	}
	require.Equal(t, []blocks.ID{r.ids[3], r.ids[2], r.ids[1], r.ids[0]}, order)
}

func contains(ids []blocks.ID, id blocks.ID) bool {
	for _, b := range ids {
		if b == id {
			return true
		}
	}
	return false
}

// Pins hold blocks against eviction within a budget; beyond it a pin is granted in part
// and the caller told how much.
func TestPinBudget(t *testing.T) {
	pool, x := newTestIndex(t, 16, WithPinBudget(3))
	sys := admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)})
	sys.finish(t, x)
	ids, _ := x.Peek(nil, &Prompt{Tokens: toks(1, 4*testBS)}, false)
	require.Len(t, ids, 4)

	res, err := x.Pin(ids[:2])
	require.NoError(t, err)
	require.Equal(t, PinResult{Granted: 2}, res)
	res, err = x.Pin(ids) // two already pinned cost nothing; one more fits; the last is refused
	require.NoError(t, err)
	require.Equal(t, PinResult{Granted: 3, Refused: 1}, res)
	require.Equal(t, 3, x.Pinned())
	require.Equal(t, 2, x.Pins(ids[0]))
	require.Equal(t, 1, x.Pins(ids[2]))
	require.Equal(t, 1, x.Reclaimable(), "only the unpinned tail can go")
	require.NoError(t, x.CheckInvariants())

	require.Equal(t, 1, x.Evict(10))
	require.True(t, x.IsCached(ids[2]))

	require.ErrorIs(t, x.Unpin([]blocks.ID{ids[2], ids[2]}), ErrNotPinned, "one pin on it, not two")
	require.Equal(t, 1, x.Pins(ids[2]), "a refused Unpin changes nothing")
	require.NoError(t, x.Unpin(ids[:3]))
	require.NoError(t, x.Unpin(ids[:2]))
	require.Zero(t, x.Pinned())
	require.Equal(t, 3, x.Reclaimable())
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, x.Reset())

	_, x0 := newTestIndex(t, 16) // no budget: every pin refused
	r := admit(t, x0, pool0(t, x0), Prompt{Tokens: toks(1, 2*testBS)})
	res, err = x0.Pin(r.ids[:2])
	require.NoError(t, err)
	require.Equal(t, PinResult{Refused: 2}, res)
}

func pool0(t *testing.T, x *Index) *blocks.Pool { return x.pool }

// A session's blocks stay over default traffic while its pause lasts, lapse on their own
// after it, and go back at once on ReleaseSession.
func TestSessionHold(t *testing.T) {
	pool, x := priorityIndex(t, 9) // 8 usable blocks
	turn := admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)})
	ids := append([]blocks.ID(nil), turn.ids...)
	turn.finish(t, x)
	now := x.clock.Now()
	held, err := x.HoldSession(7, ids, Retention{Priority: SessionPriority, Until: now + 100})
	require.NoError(t, err)
	require.Equal(t, 3, held)
	require.Equal(t, 1, x.Sessions())

	// Other traffic, newer than the session: still the session's blocks stay.
	other := admit(t, x, pool, Prompt{Tokens: toks(100, 3*testBS)})
	other.finish(t, x)
	require.Equal(t, 3, x.Evict(3))
	for _, id := range ids {
		require.True(t, x.IsCached(id), "held by the session")
	}
	// Released: back to the default, older than nothing else left, evicted next.
	n, ok := x.ReleaseSession(7)
	require.True(t, ok)
	require.Equal(t, 3, n)
	_, ok = x.ReleaseSession(7)
	require.False(t, ok)
	require.Equal(t, 3, x.Evict(3))
	require.Zero(t, x.Stats().Cached)

	// A pause that ends lapses by itself.
	turn = admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)})
	ids = append(ids[:0], turn.ids...)
	turn.finish(t, x)
	_, err = x.HoldSession(8, ids, Retention{Priority: SessionPriority, Until: x.clock.Now() + 2})
	require.NoError(t, err)
	other = admit(t, x, pool, Prompt{Tokens: toks(100, 2*testBS)})
	other.finish(t, x)
	for range 3 {
		x.clock.Tick()
	}
	require.Equal(t, 2, x.Evict(2))
	require.False(t, x.IsCached(ids[1]), "the pause is over: oldest first again")
	require.NoError(t, x.CheckInvariants())
}
