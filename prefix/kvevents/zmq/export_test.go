package zmq

// WithSendHook makes the sender goroutine call hook before each batch, so that a test can
// hold it and fill the queue deterministically.
func WithSendHook(hook func()) Option { return func(c *config) { c.sendHook = hook } }

// ReplayRing exposes the replay buffer to the state-machine test.
type ReplayRing struct{ r *replayRing }

// NewReplayRing returns an empty ring of the given capacity.
func NewReplayRing(capacity int) ReplayRing { return ReplayRing{newReplayRing(capacity)} }

// Push adds a batch.
func (r ReplayRing) Push(seq uint64, payload []byte) { r.r.push(seq, payload) }

// From returns the sequence numbers of the entries from seq on.
func (r ReplayRing) From(seq uint64) []uint64 {
	var out []uint64
	for _, e := range r.r.from(nil, seq) {
		out = append(out, e.seq)
	}
	return out
}

// Check verifies the ring's invariants.
func (r ReplayRing) Check() error {
	r.r.mu.Lock()
	defer r.r.mu.Unlock()
	return r.r.checkInvariants()
}
