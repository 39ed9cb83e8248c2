package zmq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two goroutines waiting at once both wake when a batch is dealt with: the one whose batch
// it was returns, the other goes back to waiting for its own. (WaitFor's wakeup was one
// token in a buffered channel, so each batch woke exactly one waiter: the other slept
// through the batch it waited for, which is how TestReplayRetriesOnADeadConnection's fake
// publisher, waiting for batch 5 beside the test waiting for 9, missed it about once in a
// few hundred runs.) The hook orders the waits; no step depends on time, the deadline only
// bounds a failure.
func TestWaitForWakesEveryWaiter(t *testing.T) {
	blocked := make(chan uint64, 4)
	s := &Subscriber{done: make(chan struct{}), waitHook: func(seq uint64) { blocked <- seq }}
	s.cfg.maxJump = 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for _, seq := range []uint64{5, 0} { // the later batch's waiter first
		go func() { errs <- s.WaitFor(ctx, seq) }()
		require.Equal(t, seq, <-blocked)
	}
	s.mu.Lock()
	s.deliver(0, nil, false) // a malformed payload is dealt with too: counted, next moves on
	s.mu.Unlock()
	require.NoError(t, <-errs, "the waiter for batch 0 returns")
	select {
	case seq := <-blocked:
		require.EqualValues(t, 5, seq, "the waiter for batch 5 woke and waits again")
	case <-ctx.Done():
		t.Fatal("the waiter for batch 5 was not woken by batch 0")
	}
	s.mu.Lock()
	s.deliver(5, nil, false)
	s.mu.Unlock()
	require.NoError(t, <-errs, "the waiter for batch 5 returns")
}
