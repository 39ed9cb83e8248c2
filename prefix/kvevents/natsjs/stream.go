package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvpage/kvpage/internal/argerr"
	"github.com/nats-io/nats.go/jetstream"
)

// The errors of this package; each is recognised by errors.Is.
var (
	// ErrInvalid: a name that cannot be a NATS subject token or consumer name, a bound
	// out of range. It matches (errors.Is) blocks.ErrInvalidArgument and every other
	// package's invalid-argument sentinel, and they match it.
	ErrInvalid = argerr.New("natsjs: invalid argument")
	// ErrUnavailable wraps a failure to reach NATS or JetStream.
	ErrUnavailable = errors.New("natsjs: nats unavailable")
)

// Defaults of StreamConfig.
const (
	DefaultStream  = "KVPAGE_EVENTS"
	DefaultSubject = "kvpage.events"
	// DefaultMaxAge is how long the stream keeps a batch: long enough for a router that
	// restarts to rebuild its index from the stream.
	DefaultMaxAge = 24 * time.Hour
	// DefaultMaxBytes bounds the stream's storage (the oldest batches go first).
	DefaultMaxBytes = 1 << 30
	// DefaultMaxPayload bounds one batch, published or read.
	DefaultMaxPayload = 1 << 20
)

// StreamConfig names the stream the servers publish to and bounds what it keeps. The
// zero value gives the defaults.
type StreamConfig struct {
	// Name is the JetStream stream (DefaultStream).
	Name string
	// Subject is the subjects' prefix (DefaultSubject): server S publishes on
	// "<Subject>.<S>".
	Subject string
	// MaxAge, MaxBytes bound what the stream keeps (DefaultMaxAge, DefaultMaxBytes).
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas is the stream's replication in a NATS cluster (1).
	Replicas int
}

func (c *StreamConfig) defaults() {
	if c.Name == "" {
		c.Name = DefaultStream
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
}

// EnsureStream creates the stream, or updates its limits, and returns it. Publishers and
// subscribers both call it, so either may start first.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg.defaults()
	if !validToken(cfg.Name) {
		return nil, fmt.Errorf("%w: stream name %q", ErrInvalid, cfg.Name)
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       cfg.Name,
		Subjects:   []string{cfg.Subject + ".>"},
		Storage:    jetstream.FileStorage,
		MaxAge:     cfg.MaxAge,
		MaxBytes:   cfg.MaxBytes,
		MaxMsgSize: DefaultMaxPayload + 4096,
		Discard:    jetstream.DiscardOld,
		Duplicates: 2 * time.Minute,
		Replicas:   cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", ErrUnavailable, cfg.Name, err)
	}
	return s, nil
}

// validToken reports whether s can be one token of a NATS subject and a consumer or
// stream name: printable ASCII without whitespace, '.', '*', '>', '/', '\\'.
func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || strings.IndexByte(".*>/\\", c) >= 0 {
			return false
		}
	}
	return true
}

// Headers every batch carries.
const (
	// HeaderSeq is the batch's sequence number (decimal), the Recorder's: consecutive
	// from 0 for one run of the server's publisher.
	HeaderSeq = "Kvpage-Seq"
	// HeaderEpoch identifies one run of the publisher: a restarted server starts its
	// sequence numbers again from 0 under a new epoch, with an empty cache.
	HeaderEpoch = "Kvpage-Epoch"
)
