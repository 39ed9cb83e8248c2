package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Replica names the router replica: its durable consumer is "router-<Replica>", so
	// every replica reads every batch, and a replica that restarts resumes after the
	// last batch it acknowledged.
	Replica string
	// Stream is the stream to read (created if missing).
	Stream StreamConfig
	// FromStart replays the whole stream before following it: for a replica whose index
	// does not survive its restart (in memory), or after a Redis restart that lost the
	// index. It recreates the durable consumer.
	FromStart bool
	// MaxAckPending bounds the batches delivered and not yet applied (256).
	MaxAckPending int
	// MaxPayload bounds a batch read (DefaultMaxPayload): a longer one is counted and
	// skipped.
	MaxPayload int
	// HashSize is the length of the byte-string block hashes the servers send: their
	// hasher's Size() (32 for vLLM's sha256 schemes, 8 for prefix.Fast64). 0 means the
	// index's HashSize() when it has one (a cluster.ClusterIndex does), else
	// kvevents.DefaultHashSize. A batch with hashes of another length is Malformed, so a
	// wrong size drops every batch. Integer hashes are read whatever it is.
	HashSize int
	// Retry is the wait between attempts to apply a batch the index refused (100 ms);
	// Subscriber retries until the index takes it or the Subscriber closes, keeping
	// every server's batches in order.
	Retry time.Duration
}

// Subscriber applies the batches of every server publishing to a stream to one index
// (a cluster.Index, in memory or in Redis), each server's batches once and in order. It
// runs one goroutine; its methods are safe for concurrent use.
type Subscriber struct {
	index kvevents.Applier
	cfg   SubscriberConfig
	cons  jetstream.Consumer
	iter  jetstream.MessagesContext
	done  chan struct{}
	stop  chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	servers map[string]*serverState
	stats   SubscriberStats
}

type serverState struct {
	epoch   string
	next    uint64 // next sequence number expected
	applied bool   // next is meaningful
}

// SubscriberStats counts what a Subscriber did.
type SubscriberStats struct {
	// Applied counts batches applied; Duplicates batches seen again (a redelivery, a
	// replay over batches already applied) and skipped.
	Applied, Duplicates uint64
	// Lost counts sequence numbers never received: batches the publisher dropped, or
	// the stream discarded under its limits.
	Lost uint64
	// Restarts counts publishers seen under a new epoch: their server restarted with an
	// empty cache, so its entries were cleared.
	Restarts uint64
	// Malformed counts batches that did not decode, had no valid headers or server
	// name, or were over MaxPayload: skipped.
	Malformed uint64
	// Retries counts attempts to apply a batch the index refused.
	Retries uint64
}

// NewSubscriber creates (or resumes) the replica's durable consumer and starts applying.
func NewSubscriber(ctx context.Context, js jetstream.JetStream, index kvevents.Applier, cfg SubscriberConfig) (*Subscriber, error) {
	if !validToken(cfg.Replica) {
		return nil, fmt.Errorf("%w: replica name %q", ErrInvalid, cfg.Replica)
	}
	cfg.Stream.defaults()
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = 256
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 100 * time.Millisecond
	}
	if cfg.HashSize == 0 {
		cfg.HashSize = kvevents.DefaultHashSize
		if h, ok := index.(interface{ HashSize() int }); ok {
			cfg.HashSize = h.HashSize()
		}
	}
	if cfg.HashSize < 1 || cfg.HashSize > kvevents.MaxHashSize {
		return nil, fmt.Errorf("%w: hash size %d", ErrInvalid, cfg.HashSize)
	}
	st, err := EnsureStream(ctx, js, cfg.Stream)
	if err != nil {
		return nil, err
	}
	name := "router-" + cfg.Replica
	if cfg.FromStart {
		if err := st.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: cfg.Stream.Subject + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: cfg.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %s: %v", ErrUnavailable, name, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(cfg.MaxAckPending, 4*cfg.MaxPayload))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s := &Subscriber{
		index: index, cfg: cfg, cons: cons, iter: iter,
		done: make(chan struct{}), stop: make(chan struct{}),
		servers: make(map[string]*serverState),
	}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s, nil
}

func (s *Subscriber) run() {
	defer close(s.done)
	dec := kvevents.Decoder{HashSize: s.cfg.HashSize, MaxPayload: s.cfg.MaxPayload}
	var b kvevents.Batch
	for {
		msg, err := s.iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			// A missed heartbeat, a disconnect: nats.go resumes pulling once NATS is back.
			// Wait a little so that an error returned at once cannot spin the loop.
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.handle(msg, &dec, &b)
	}
}

func (s *Subscriber) handle(msg jetstream.Msg, dec *kvevents.Decoder, b *kvevents.Batch) {
	server, seq, epoch, ok := s.parse(msg)
	if !ok {
		s.count(func(st *SubscriberStats) { st.Malformed++ })
		_ = msg.Ack()
		return
	}
	s.mu.Lock()
	ss := s.servers[server]
	if ss == nil {
		ss = &serverState{epoch: epoch}
		s.servers[server] = ss
	}
	restarted := ss.epoch != epoch
	dup := !restarted && ss.applied && seq < ss.next
	s.mu.Unlock()
	if dup {
		s.count(func(st *SubscriberStats) { st.Duplicates++ })
		_ = msg.Ack()
		return
	}
	if restarted {
		// The server restarted with an empty cache: what the index holds of it is stale.
		reset := kvevents.Batch{Events: []kvevents.Event{{Kind: kvevents.KindAllBlocksCleared}}}
		if !s.apply(msg, server, &reset) {
			return
		}
		s.mu.Lock()
		*ss = serverState{epoch: epoch}
		s.stats.Restarts++
		s.mu.Unlock()
	}
	if err := dec.Decode(msg.Data(), b); err != nil {
		s.advance(ss, seq, false)
		_ = msg.Ack()
		return
	}
	if !s.apply(msg, server, b) {
		return
	}
	s.advance(ss, seq, true)
	_ = msg.Ack()
}

// apply applies b, retrying while the index refuses it (Redis down): the server's later
// batches wait behind it, so order holds. It returns false when the Subscriber closed.
func (s *Subscriber) apply(msg jetstream.Msg, server string, b *kvevents.Batch) bool {
	for {
		if err := s.index.Apply(server, b); err == nil {
			return true
		}
		s.count(func(st *SubscriberStats) { st.Retries++ })
		_ = msg.InProgress() // keep the stream from redelivering it meanwhile
		select {
		case <-s.stop:
			return false
		case <-time.After(s.cfg.Retry):
		}
	}
}

// advance records seq as dealt with (applied, or malformed) under the lock WaitFor waits
// on, so a waiter sees the counters of the batch it waited for.
func (s *Subscriber) advance(ss *serverState, seq uint64, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if applied {
		s.stats.Applied++
	} else {
		s.stats.Malformed++
	}
	if ss.applied && seq > ss.next {
		s.stats.Lost += seq - ss.next
	} else if !ss.applied && seq > 0 {
		s.stats.Lost += seq // joined a run whose first batches the stream no longer has
	}
	ss.applied = true
	if seq == ^uint64(0) {
		ss.next = seq // no wrap: a later batch of this epoch is a duplicate
	} else {
		ss.next = seq + 1
	}
	s.cond.Broadcast()
}

func (s *Subscriber) count(f func(*SubscriberStats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

func (s *Subscriber) parse(msg jetstream.Msg) (server string, seq uint64, epoch string, ok bool) {
	if len(msg.Data()) > s.cfg.MaxPayload {
		return "", 0, "", false
	}
	server, found := strings.CutPrefix(msg.Subject(), s.cfg.Stream.Subject+".")
	if !found || !validToken(server) {
		return "", 0, "", false
	}
	h := msg.Headers()
	seq, err := strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
	epoch = h.Get(HeaderEpoch)
	if err != nil || epoch == "" || len(epoch) > 32 {
		return "", 0, "", false
	}
	return server, seq, epoch, true
}

// Stats returns the counters.
func (s *Subscriber) Stats() SubscriberStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// WaitFor waits until server's batch seq of the publisher run epoch (Publisher.Epoch) is
// applied or passed, or ctx ends.
func (s *Subscriber) WaitFor(ctx context.Context, server string, epoch, seq uint64) error {
	ep := strconv.FormatUint(epoch, 10)
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if ss := s.servers[server]; ss != nil && ss.epoch == ep && ss.applied && ss.next > seq {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.cond.Wait()
	}
}

// Close stops the Subscriber and waits for its goroutine (a batch being retried is left
// unacknowledged for the stream to redeliver). The durable consumer stays: a replica
// that starts again resumes after its last acknowledged batch.
func (s *Subscriber) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.iter.Stop()
	<-s.done
	return nil
}
