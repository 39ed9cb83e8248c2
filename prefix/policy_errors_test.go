package prefix

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// A policy factory that fails (or returns nil) fails New with an invalid argument (which
// every package's sentinel matches, evict's included: internal/argerr), and the error
// keeps evict's own *ArgumentError when the factory's constructor refused.
func TestNewReportsPolicyErrors(t *testing.T) {
	slru := func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewSLRU(n, 101) }
	none := func(int, evict.Clock) (evict.Policy, error) { return nil, nil }
	for _, tc := range []struct {
		name  string
		f     evict.Factory
		evict bool // the error holds evict's own *ArgumentError
	}{
		{"slru with 101 percent", slru, true},
		{"priority without a clock", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewPriority(n, nil) }, true},
		{"a nil policy", none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := blocks.New(8)
			require.NoError(t, err)
			_, err = New(pool, testBS, WithPolicy(tc.f))
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorIs(t, err, evict.ErrInvalidArgument)
			var ae *evict.ArgumentError
			assert.Equal(t, tc.evict, errors.As(err, &ae), "%v", err)
		})
	}
}

// SetQuota builds the namespace's policy before it changes anything: a factory that fails
// leaves no cap and no quota slot behind.
func TestSetQuotaPolicyErrorChangesNothing(t *testing.T) {
	fail := false
	f := func(n int, _ evict.Clock) (evict.Policy, error) {
		if fail {
			return nil, &evict.ArgumentError{Policy: "test", What: "capacity", N: int64(n)}
		}
		return evict.NewLRU(n)
	}
	pool, x := newTestIndex(t, 17, WithQuotas(), WithPolicy(f))
	ns := Namespace{Salt: "t"}
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 3*testBS)}).finish(t, x)
	before := snap(x, pool)
	fail = true
	err := x.SetQuota(ns, 2)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, evict.ErrInvalidArgument)
	_, _, ok := x.Quota(ns)
	assert.False(t, ok, "no cap was set")
	assert.Equal(t, before, snap(x, pool))
	fail = false
	require.NoError(t, x.SetQuota(ns, 2))
	max, cached, ok := x.Quota(ns)
	assert.True(t, ok)
	assert.Equal(t, 2, max)
	assert.Equal(t, 3, cached)
	require.NoError(t, x.CheckInvariants())
}
