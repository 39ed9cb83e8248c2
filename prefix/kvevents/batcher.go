package kvevents

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix"
)

// Batcher turns the prefix index's events into vLLM KV events and collects them into a
// batch. It implements prefix.Observer: plug it in with prefix.WithObserver (a Publisher
// embeds one and does that for you). Each event is encoded to msgpack as it arrives, into a
// buffer the Batcher reuses, so observing allocates nothing once the buffer has grown to
// the size of a batch. AppendBatch seals the batch.
//
// A Batcher belongs to the index's goroutine: it is not safe for concurrent use.
type Batcher struct {
	cfg    config
	events byteSink // the open batch's encoded events
	n      int      // how many
	enc    *msgpack.Encoder
	out    byteSink
	outEnc *msgpack.Encoder
}

var _ prefix.Observer = (*Batcher)(nil)

// NewBatcher returns an empty Batcher. Of the options, the encoding ones apply
// (WithIntHashes, WithMedium, WithLoRAIDs, WithDataParallelRank, WithoutDataParallelRank,
// WithoutExtraKeys); the others are the Publisher's.
func NewBatcher(opts ...Option) *Batcher {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return newBatcher(cfg)
}

func newBatcher(cfg config) *Batcher {
	b := &Batcher{cfg: cfg}
	b.events.b = make([]byte, 0, 64<<10)
	b.enc = msgpack.NewEncoder(&b.events)
	b.outEnc = msgpack.NewEncoder(&b.out)
	return b
}

// Len returns the number of events in the open batch.
func (b *Batcher) Len() int { return b.n }

// BlockStored encodes a BlockStored event: the chain's hashes, its parent's hash (None for
// a chain that starts its namespace), every token, the block size, lora_id, medium,
// lora_name, and, unless WithoutExtraKeys, each block's extra keys in vLLM's order.
func (b *Batcher) BlockStored(e *prefix.BlockStored) {
	nblocks := len(e.Blocks)
	withExtra := !b.cfg.omitExtraKeys
	fields := blockStoredFieldsNoExt
	if withExtra {
		fields = blockStoredFields
	}
	enc := b.enc
	_ = enc.EncodeArrayLen(fields)
	_ = enc.EncodeString(TagBlockStored)
	_ = enc.EncodeArrayLen(nblocks)
	for i := range nblocks {
		b.encodeHash(e.Hash(i))
	}
	if len(e.Parent) == 0 {
		_ = enc.EncodeNil()
	} else {
		b.encodeHash(e.Parent)
	}
	_ = enc.EncodeArrayLen(len(e.Tokens))
	for _, t := range e.Tokens {
		_ = enc.EncodeInt(int64(t))
	}
	_ = enc.EncodeInt(int64(e.BlockSize))
	lora := e.Namespace.LoRA
	if id, ok := b.loraID(lora); ok {
		_ = enc.EncodeInt(id)
	} else {
		_ = enc.EncodeNil()
	}
	b.encodeOptString(b.cfg.medium)
	b.encodeOptString(lora)
	if withExtra {
		_ = enc.EncodeArrayLen(nblocks)
		for i := range nblocks {
			var mm []string
			if e.MM != nil {
				mm = e.MM[i]
			}
			salt := ""
			if i == 0 && len(e.Parent) == 0 {
				salt = e.Namespace.Salt // vLLM: the salt goes on the first block only
			}
			b.encodeExtraKeys(lora, mm, salt)
		}
	}
	b.n++
}

// BlockRemoved encodes a BlockRemoved event listing every removed block's hash.
func (b *Batcher) BlockRemoved(e *prefix.BlockRemoved) {
	_ = b.enc.EncodeArrayLen(blockRemovedFields)
	_ = b.enc.EncodeString(TagBlockRemoved)
	_ = b.enc.EncodeArrayLen(len(e.Blocks))
	for i := range e.Blocks {
		b.encodeHash(e.Hash(i))
	}
	b.encodeOptString(b.cfg.medium)
	b.n++
}

// AllBlocksCleared encodes an AllBlocksCleared event.
func (b *Batcher) AllBlocksCleared() {
	_ = b.enc.EncodeArrayLen(allBlocksClearedFields)
	_ = b.enc.EncodeString(TagAllBlocksCleared)
	b.n++
}

// AppendBatch seals the open batch: it appends to dst the msgpack of
// [ts, [events...], data_parallel_rank] (the rank left out under WithoutDataParallelRank),
// empties the Batcher and returns the extended dst. An empty batch is valid.
func (b *Batcher) AppendBatch(dst []byte, ts float64) []byte {
	b.out.b = dst
	fields := batchFields
	if b.cfg.omitDPRank {
		fields--
	}
	_ = b.outEnc.EncodeArrayLen(fields)
	_ = b.outEnc.EncodeFloat64(ts)
	_ = b.outEnc.EncodeArrayLen(b.n)
	b.out.b = append(b.out.b, b.events.b...)
	if !b.cfg.omitDPRank {
		_ = b.outEnc.EncodeInt(b.cfg.dpRank)
	}
	dst, b.out.b = b.out.b, nil
	b.events.b = b.events.b[:0]
	b.n = 0
	return dst
}

// Discard drops the open batch's events.
func (b *Batcher) Discard() {
	b.events.b = b.events.b[:0]
	b.n = 0
}

func (b *Batcher) encodeHash(h []byte) {
	if b.cfg.intHashes {
		_ = b.enc.EncodeUint(Uint64(h))
		return
	}
	_ = b.enc.EncodeBytes(h)
}

func (b *Batcher) encodeOptString(s string) {
	if s == "" {
		_ = b.enc.EncodeNil()
		return
	}
	_ = b.enc.EncodeString(s)
}

// encodeExtraKeys writes one block's entry of extra_keys: None, or the tuple of LoRA name,
// multimodal hashes and salt, as generate_block_hash_extra_keys builds it.
func (b *Batcher) encodeExtraKeys(lora string, mm []string, salt string) {
	n := len(mm)
	if lora != "" {
		n++
	}
	if salt != "" {
		n++
	}
	if n == 0 {
		_ = b.enc.EncodeNil()
		return
	}
	_ = b.enc.EncodeArrayLen(n)
	if lora != "" {
		_ = b.enc.EncodeString(lora)
	}
	for _, h := range mm {
		_ = b.enc.EncodeString(h)
	}
	if salt != "" {
		_ = b.enc.EncodeString(salt)
	}
}

func (b *Batcher) loraID(name string) (int64, bool) {
	if name == "" || b.cfg.loraID == nil {
		return 0, false
	}
	return b.cfg.loraID(name)
}

// byteSink is the msgpack encoder's writer: an append-only byte slice. Writes never fail.
type byteSink struct{ b []byte }

func (s *byteSink) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }

func (s *byteSink) WriteByte(c byte) error { s.b = append(s.b, c); return nil }
