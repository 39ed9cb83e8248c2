package kvevents

import (
	"fmt"
	"math"
	"time"
)

// Option configures a Batcher or a Recorder (and, through it, a transport's publisher).
type Option func(*config)

type config struct {
	intHashes     bool
	medium        string
	loraID        func(name string) (int64, bool)
	dpRank        int64
	omitDPRank    bool
	omitExtraKeys bool
	group         int
	hasGroup      bool
	now           func() float64

	// Recorder only.
	queueBatches   int
	maxBatchEvents int
	firstSeq       uint64

	err error // the first option that was refused
}

// newConfig applies opts to the defaults; an option out of range is refused with an error
// wrapping ErrInvalidArgument, so that no Batcher writes what a Decoder must refuse.
func newConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg, cfg.err
}

// refuse records the first refused option.
func (c *config) refuse(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
	}
}

func defaultConfig() config {
	return config{
		medium:         MediumGPU,
		now:            wallClock,
		queueBatches:   8192,
		maxBatchEvents: 4096,
	}
}

// wallClock is vLLM's batch timestamp, time.time(): seconds since the Unix epoch. It is data
// on the wire for consumers, never an input to any decision of this module.
func wallClock() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// WithIntHashes publishes each block hash in its 64-bit form (see Uint64), as vLLM does
// with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, instead of the hash bytes.
func WithIntHashes() Option { return func(c *config) { c.intHashes = true } }

// WithMedium sets the medium of every event (default MediumGPU); "" publishes None. A
// medium longer than MaxMediumBytes, which a Decoder refuses, is refused.
func WithMedium(m string) Option {
	return func(c *config) {
		if len(m) > MaxMediumBytes {
			c.refuse("WithMedium of %d bytes, at most %d", len(m), MaxMediumBytes)
		}
		c.medium = m
	}
}

// WithLoRAIDs maps a LoRA name to the integer adapter id that vLLM publishes as lora_id
// (deprecated there in favour of lora_name, kept for older consumers). Without it, or when
// it reports false, lora_id is None.
func WithLoRAIDs(id func(name string) (int64, bool)) Option {
	return func(c *config) { c.loraID = id }
}

// WithDataParallelRank sets the data_parallel_rank of every batch (default 0, which vLLM's
// ZMQ publisher also fills in when none is set).
func WithDataParallelRank(rank int) Option {
	return func(c *config) { c.dpRank, c.omitDPRank = int64(rank), false }
}

// WithoutDataParallelRank leaves data_parallel_rank out of every batch: the 2-element form
// that msgspec writes for a batch whose rank is None.
func WithoutDataParallelRank() Option { return func(c *config) { c.omitDPRank = true } }

// WithoutExtraKeys leaves extra_keys out of every BlockStored: the 8-element form of vLLM
// before extra_keys was added (early 2026), for consumers that decode exactly 8 fields.
func WithoutExtraKeys() Option { return func(c *config) { c.omitExtraKeys = true } }

// WithGroup writes group_idx = g on every BlockStored and BlockRemoved, after extra_keys
// and medium, as vLLM's hybrid allocator does for the KV-cache group an index caches (vLLM
// writes it for every group, 0 included; a store without extra keys then writes
// extra_keys as None before it). Without it the events have no group_idx: vLLM's form
// before the hybrid allocator, which every consumer reads. A g outside [0, MaxGroup],
// which a Decoder refuses, is refused.
func WithGroup(g int) Option {
	return func(c *config) {
		if g < 0 || g > MaxGroup {
			c.refuse("WithGroup(%d) out of [0, %d]", g, MaxGroup)
		}
		c.group, c.hasGroup = g, true
	}
}

// WithTimestamps sets the source of batch timestamps, in seconds (default: the wall clock,
// as vLLM). Tests inject a fixed or counting source.
func WithTimestamps(now func() float64) Option { return func(c *config) { c.now = now } }

// WithQueue sets how many sealed batches may wait for the sender (default 8,192, at least
// 1; vLLM's queue holds 100,000). When all are waiting, a new batch is dropped and counted,
// never waited for. Each slot keeps the memory of the largest batch it carried.
func WithQueue(batches int) Option { return func(c *config) { c.queueBatches = max(batches, 1) } }

// WithFirstSeq numbers a Recorder's batches from n instead of 0. vLLM's ZMQ publisher
// numbers from 0 at every start, as a Recorder does by default, and for a server that
// restarts with an empty cache that is right: a kvevents/zmq Subscriber takes a connection
// whose first batch is numbered below what it expected for a restart, clears the server's
// blocks and follows the new numbering (natsjs tells runs apart by its Epoch). A process
// that replaces its publisher but keeps its prefix index, and so its cached blocks, passes
// the old Recorder's LastSeq()+1, so that its subscribers carry on and keep those blocks.
// n = 2^64-1, after which a Subscriber takes every batch for a duplicate, is refused.
func WithFirstSeq(n uint64) Option {
	return func(c *config) {
		if n == math.MaxUint64 {
			c.refuse("WithFirstSeq(2^64-1): no batch could follow it")
		}
		c.firstSeq = n
	}
}

// WithMaxBatchEvents seals the open batch automatically once it holds n events (default
// 4,096, at least 1), so that a scheduler that never flushes still publishes.
func WithMaxBatchEvents(n int) Option { return func(c *config) { c.maxBatchEvents = max(n, 1) } }
