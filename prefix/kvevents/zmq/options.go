package zmq

import (
	"time"

	"github.com/kvpage/kvpage/internal/zmtp"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Defaults of the network limits. Every one can be set by an option.
const (
	// DefaultMaxMessage bounds one received message (the sum of its frames): the
	// decoder's payload cap plus room for the topic and the sequence number.
	DefaultMaxMessage = kvevents.DefaultMaxPayload + 8192
	// DefaultHandshakeTimeout bounds a connection's ZMTP greeting and READY exchange.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultWriteTimeout bounds one message's write to a peer; a peer that takes longer
	// is disconnected.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultSubscriberQueue is how many batches may wait for one slow subscriber before
	// the next are dropped for it (vLLM's PUB high-water mark is 100,000).
	DefaultSubscriberQueue = 10000
	// DefaultMaxPeers bounds the connections one socket of a Publisher accepts.
	DefaultMaxPeers = 256
	// DefaultLinger bounds how long Close lets queued batches reach subscribers.
	DefaultLinger = time.Second
)

// Option configures a Publisher.
type Option func(*config)

type config struct {
	events          []kvevents.Option
	topic           string
	replayEndpoint  string
	replayBatches   int
	subscriberQueue int
	maxPeers        int
	handshake       time.Duration
	writeTimeout    time.Duration
	linger          time.Duration
	sendHook        func() // tests: called by the sender before each batch
}

func defaultConfig() config {
	return config{
		replayBatches:   10000, // vLLM's buffer_steps default
		subscriberQueue: DefaultSubscriberQueue,
		maxPeers:        DefaultMaxPeers,
		handshake:       DefaultHandshakeTimeout,
		writeTimeout:    DefaultWriteTimeout,
		linger:          DefaultLinger,
	}
}

// WithEvents passes options to the publisher's kvevents.Recorder: the encoding, the queue,
// the batch size, the timestamps.
func WithEvents(opts ...kvevents.Option) Option {
	return func(c *config) { c.events = append(c.events, opts...) }
}

// WithTopic sets the topic frame of every published message (default "", as vLLM; llm-d's
// indexer expects "kv@<pod>@<model>").
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithReplay binds a ROUTER socket at endpoint that answers replay requests from a buffer
// of the last batches (default 10,000 batches, as vLLM's buffer_steps; see
// WithReplayBuffer).
func WithReplay(endpoint string) Option { return func(c *config) { c.replayEndpoint = endpoint } }

// WithReplayBuffer sets how many of the last published batches the replay socket can
// resend (at least 1).
func WithReplayBuffer(batches int) Option {
	return func(c *config) { c.replayBatches = max(batches, 1) }
}

// WithSubscriberQueue sets how many batches may wait for one subscriber (default
// DefaultSubscriberQueue, at least 1). Past it batches are dropped for that subscriber
// and counted in SubscriberDrops; the others are unaffected.
func WithSubscriberQueue(batches int) Option {
	return func(c *config) { c.subscriberQueue = max(batches, 1) }
}

// WithMaxPeers bounds the connections each of the publisher's sockets accepts at once
// (default DefaultMaxPeers, at least 1); more are closed at once and counted.
func WithMaxPeers(n int) Option { return func(c *config) { c.maxPeers = max(n, 1) } }

// WithHandshakeTimeout bounds each connection's handshake (default
// DefaultHandshakeTimeout): a peer that connects and says nothing is dropped after it.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(c *config) { c.handshake = positive(d, DefaultHandshakeTimeout) }
}

// WithWriteTimeout bounds each write to a peer (default DefaultWriteTimeout): a
// subscriber that stops reading is disconnected after it.
func WithWriteTimeout(d time.Duration) Option {
	return func(c *config) { c.writeTimeout = positive(d, DefaultWriteTimeout) }
}

// WithLinger bounds how long Close waits for queued batches to reach subscribers (default
// DefaultLinger; 0 drops them at once, as vLLM's linger of 0).
func WithLinger(d time.Duration) Option { return func(c *config) { c.linger = max(d, 0) } }

func positive(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// SubscriberOption configures a Subscriber.
type SubscriberOption func(*subscriberConfig)

type subscriberConfig struct {
	topic         string
	replay        string
	from          uint64
	resync        time.Duration
	replayTimeout time.Duration
	handshake     time.Duration
	maxMessage    int
	hashSize      int
	maxJump       uint64
	retry         time.Duration
}

func defaultSubscriberConfig() subscriberConfig {
	return subscriberConfig{
		resync:        time.Second,
		replayTimeout: 2 * time.Second,
		handshake:     DefaultHandshakeTimeout,
		maxMessage:    DefaultMaxMessage,
		maxJump:       DefaultMaxJump,
		retry:         100 * time.Millisecond,
	}
}

// DefaultMaxJump is the largest forward jump of sequence numbers a Subscriber believes:
// more than 2^32 batches cannot have been published since the last one (at a million a
// second that is an hour and more), so a larger jump is a corrupt or hostile sequence
// number, counted in Implausible and not applied.
const DefaultMaxJump = 1 << 32

// SubscribeTopic subscribes to topics starting with prefix (default "": all).
func SubscribeTopic(prefix string) SubscriberOption {
	return func(c *subscriberConfig) { c.topic = prefix }
}

// SubscribeReplay sets the server's replay (ROUTER) endpoint. Without it gaps are only
// counted.
func SubscribeReplay(endpoint string) SubscriberOption {
	return func(c *subscriberConfig) { c.replay = endpoint }
}

// SubscribeFrom sets the first sequence number wanted (default 0: everything the server
// still buffers).
func SubscribeFrom(seq uint64) SubscriberOption {
	return func(c *subscriberConfig) { c.from = seq }
}

// SubscribeResync sets how long the subscriber waits without a message before it asks for
// a replay (default 1 s; 0 disables the idle resync).
func SubscribeResync(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.resync = max(d, 0) }
}

// SubscribeReplayTimeout bounds each wait for the replay socket (default 2 s): the
// connection, each message of an answer, and, at 30 times it, a whole answer.
func SubscribeReplayTimeout(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.replayTimeout = positive(d, 2*time.Second) }
}

// SubscribeHandshakeTimeout bounds each connection's handshake (default
// DefaultHandshakeTimeout).
func SubscribeHandshakeTimeout(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.handshake = positive(d, DefaultHandshakeTimeout) }
}

// SubscribeMaxMessage bounds one received message, all frames together (default
// DefaultMaxMessage); the decoder's payload cap follows it. A larger message closes the
// connection (the subscriber reconnects and catches up by replay). It is kept within
// [64 B, 1 GiB].
func SubscribeMaxMessage(n int) SubscriberOption {
	return func(c *subscriberConfig) { c.maxMessage = min(max(n, 64), 1<<30) }
}

// SubscribeHashSize sets the length of the byte-string block hashes the decoder accepts.
// By default it is the index's HashSize() when it has one (a cluster.ClusterIndex does),
// else kvevents.DefaultHashSize.
func SubscribeHashSize(n int) SubscriberOption {
	return func(c *subscriberConfig) { c.hashSize = n }
}

// SubscribeMaxJump sets the largest forward jump of sequence numbers believed (default
// DefaultMaxJump, at least 1).
func SubscribeMaxJump(n uint64) SubscriberOption {
	return func(c *subscriberConfig) { c.maxJump = max(n, 1) }
}

// SubscribeRetry sets the first pause before reconnecting after a lost connection (default
// 100 ms; it doubles up to 32 times that while connecting keeps failing).
func SubscribeRetry(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.retry = positive(d, 100*time.Millisecond) }
}

// limits are the ZMTP limits of a received stream of at most maxMessage bytes a message.
func limits(maxMessage int) zmtp.Limits {
	return zmtp.Limits{MaxFrame: int64(maxMessage), MaxMessage: int64(maxMessage), MaxFrames: 8}
}
