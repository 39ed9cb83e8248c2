package natsjs

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Publisher publishes a server's KV events to a JetStream stream: a prefix.Observer (a
// kvevents.Recorder) whose batches, vLLM's msgpack form, go out as messages on
// "<subject>.<server>" with the headers HeaderSeq and HeaderEpoch and a Nats-Msg-Id that
// lets JetStream drop a duplicate. Publishing is asynchronous: the scheduler's goroutine
// only copies events (the Recorder), the Recorder's sender hands each batch to nats.go
// without waiting for the stream's acknowledgement; when MaxPending batches await one, the
// batch is refused and counted (a gap its subscribers see by sequence number).
type Publisher struct {
	*kvevents.Recorder
	sink *sink
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Server is the server's name in the subject: one NATS subject token.
	Server string
	// Stream is the stream to publish to (created if missing).
	Stream StreamConfig
	// Epoch identifies this run; zero takes the connection's time in nanoseconds when the
	// publisher starts (an identifier, never used in a decision but "is this the same run").
	Epoch uint64
	// MaxPending bounds the batches published and not yet acknowledged (1,024).
	MaxPending int
	// Events are the Recorder's options (encoding, queue, batch size).
	Events []kvevents.Option
}

// Server returns the server's name.
func (p *Publisher) Server() string { return p.sink.server }

// Epoch returns the identifier of this publisher's run (HeaderEpoch).
func (p *Publisher) Epoch() uint64 { return p.sink.epochN }

type sink struct {
	epochN  uint64
	js      jetstream.JetStream
	subject string
	server  string
	epoch   string
	max     int

	refused, failed, acked, tooLarge atomic.Uint64
}

// PublisherStats counts what the stream did with the batches the Recorder handed over.
type PublisherStats struct {
	kvevents.RecorderStats
	// Acked counts batches the stream stored; Failed those it did not acknowledge in
	// time or refused; Refused those refused because MaxPending awaited acknowledgement
	// (or NATS was unreachable); TooLarge those over DefaultMaxPayload.
	Acked, Failed, Refused, TooLarge uint64
}

// NewPublisher ensures the stream and returns a Publisher for cfg.Server over nc.
func NewPublisher(ctx context.Context, nc *nats.Conn, cfg PublisherConfig) (*Publisher, error) {
	if !validToken(cfg.Server) {
		return nil, fmt.Errorf("%w: server name %q", ErrInvalid, cfg.Server)
	}
	cfg.Stream.defaults()
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	if cfg.Epoch == 0 {
		cfg.Epoch = uint64(time.Now().UnixNano())
	}
	s := &sink{
		subject: cfg.Stream.Subject + "." + cfg.Server,
		server:  cfg.Server,
		epoch:   strconv.FormatUint(cfg.Epoch, 10),
		epochN:  cfg.Epoch,
		max:     cfg.MaxPending,
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(5*time.Second),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { s.failed.Add(1) }),
		jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { s.acked.Add(1) }),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s.js = js
	if _, err := EnsureStream(ctx, js, cfg.Stream); err != nil {
		return nil, err
	}
	rec, err := kvevents.NewRecorder(s, cfg.Events...)
	if err != nil {
		return nil, err
	}
	return &Publisher{Recorder: rec, sink: s}, nil
}

var _ prefix.Observer = (*Publisher)(nil)

// Send implements kvevents.Sink: it hands the batch to nats.go and returns at once.
func (s *sink) Send(seq uint64, payload []byte) error {
	if len(payload) > DefaultMaxPayload {
		s.tooLarge.Add(1)
		return fmt.Errorf("%w: batch of %d bytes", ErrInvalid, len(payload))
	}
	if s.js.PublishAsyncPending() >= s.max {
		s.refused.Add(1)
		return fmt.Errorf("%w: %d batches await acknowledgement", ErrUnavailable, s.max)
	}
	seqs := strconv.FormatUint(seq, 10)
	m := &nats.Msg{Subject: s.subject, Data: payload, Header: nats.Header{}}
	m.Header.Set(HeaderSeq, seqs)
	m.Header.Set(HeaderEpoch, s.epoch)
	// The stall wait bounds the wait should the pending count race past the check above.
	if _, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(s.server+"-"+s.epoch+"-"+seqs), jetstream.WithStallWait(10*time.Millisecond)); err != nil {
		s.refused.Add(1)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Stats returns the Recorder's counters and the stream's.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		RecorderStats: p.Recorder.Stats(),
		Acked:         p.sink.acked.Load(),
		Failed:        p.sink.failed.Load(),
		Refused:       p.sink.refused.Load(),
		TooLarge:      p.sink.tooLarge.Load(),
	}
}

// Close closes the Recorder (its last batches are handed over) and waits at most timeout
// for the stream to acknowledge what is pending. It does not close the connection.
func (p *Publisher) Close(timeout time.Duration) error {
	err := p.Recorder.Close()
	select {
	case <-p.sink.js.PublishAsyncComplete():
	case <-time.After(timeout):
	}
	return err
}
