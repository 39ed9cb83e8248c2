package kvevents

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// Batcher turns the prefix index's events into vLLM KV events and collects them into a
// batch. It implements prefix.Observer: plugged in with prefix.WithObserver it encodes on
// the index's goroutine (a Publisher instead copies events there and encodes them with a
// Batcher on its sender goroutine). Each event is encoded to msgpack as it arrives, into a
// buffer the Batcher reuses, so it allocates nothing once the buffer has grown to the size
// of a batch. AppendBatch seals the batch.
//
// A Batcher belongs to one goroutine: it is not safe for concurrent use.
type Batcher struct {
	cfg    config
	events byteSink // the open batch's encoded events
	n      int      // how many
	enc    *msgpack.Encoder
	out    byteSink
	outEnc *msgpack.Encoder
	hdr    [headroom]byte

	refused uint64 // events not encoded: see Refused
}

var _ prefix.Observer = (*Batcher)(nil)

// NewBatcher returns an empty Batcher. Of the options, the encoding ones apply
// (WithIntHashes, WithMedium, WithLoRAIDs, WithDataParallelRank, WithoutDataParallelRank,
// WithoutExtraKeys, WithGroup); the others are the Publisher's. An option a Decoder would
// refuse to read back (a group above MaxGroup, a medium over MaxMediumBytes) is refused
// with an error wrapping ErrInvalidArgument.
func NewBatcher(opts ...Option) (*Batcher, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newBatcher(cfg), nil
}

func newBatcher(cfg config) *Batcher {
	b := &Batcher{cfg: cfg}
	b.events.b = make([]byte, headroom, 64<<10)
	b.enc = msgpack.NewEncoder(&b.events)
	b.outEnc = msgpack.NewEncoder(&b.out)
	return b
}

// Len returns the number of events in the open batch.
func (b *Batcher) Len() int { return b.n }

// Refused returns how many events the Batcher left out because a Decoder would refuse the
// batch holding them: a LoRA name longer than MaxLoRANameBytes, a medium longer than
// MaxMediumBytes, a group outside [0, MaxGroup], a cache salt or multimodal identifier
// longer than MaxExtraKeyBytes (unless WithoutExtraKeys leaves them out). One such event would cost every consumer
// the whole batch; left out, it costs a routing miss on its blocks.
func (b *Batcher) Refused() uint64 { return b.refused }

// BlockStored encodes a BlockStored event: the chain's hashes, its parent's hash (None for
// a chain that starts its namespace), every token, the block size, lora_id, medium,
// lora_name, unless WithoutExtraKeys each block's extra keys in vLLM's order, and the
// KV-cache group's index: the event's own (HasGroup, as a prefix.GroupTree reports), else
// WithGroup's.
func (b *Batcher) BlockStored(e *prefix.BlockStored) {
	if !b.cfg.storable(e) {
		b.refused++
		return
	}
	nblocks := len(e.Blocks)
	withExtra := !b.cfg.omitExtraKeys
	group, hasGroup := b.group(e.Group, e.HasGroup)
	fields := blockStoredFieldsNoExt
	switch {
	case hasGroup:
		fields = blockStoredFieldsGroup
	case withExtra:
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
	// Tokens are most of an event's bytes: append them directly (the encoder writes to
	// b.events unbuffered, so the two interleave), in the forms EncodeInt would choose.
	b.events.b = appendMsgpackTokens(b.events.b, e.Tokens)
	_ = enc.EncodeInt(int64(e.BlockSize))
	lora := e.Namespace.LoRA
	if id, ok := b.loraID(lora); ok {
		_ = enc.EncodeInt(id)
	} else {
		_ = enc.EncodeNil()
	}
	b.encodeOptString(b.medium(e.Medium))
	b.encodeOptString(lora)
	if withExtra {
		_ = enc.EncodeArrayLen(nblocks)
		for i := range nblocks {
			var mm []string
			var offs []int
			if e.MM != nil {
				mm = e.MM[i]
			}
			if e.MMOffsets != nil {
				offs = e.MMOffsets[i]
			}
			salt := ""
			if i == 0 && len(e.Parent) == 0 {
				salt = e.Namespace.Salt // vLLM: the salt goes on the first block only
			}
			b.encodeExtraKeys(lora, mm, offs, salt)
		}
	} else if hasGroup {
		b.events.b = append(b.events.b, msgpackNil) // extra_keys None, before group_idx
	}
	if hasGroup {
		_ = enc.EncodeInt(int64(group))
	}
	b.n++
}

// BlockRemoved encodes a BlockRemoved event listing every removed block's hash.
func (b *Batcher) BlockRemoved(e *prefix.BlockRemoved) {
	if !b.cfg.removable(e) {
		b.refused++
		return
	}
	fields := blockRemovedFields
	group, hasGroup := b.group(e.Group, e.HasGroup)
	if hasGroup {
		fields = blockRemovedFieldsGrp
	}
	_ = b.enc.EncodeArrayLen(fields)
	_ = b.enc.EncodeString(TagBlockRemoved)
	_ = b.enc.EncodeArrayLen(len(e.Blocks))
	for i := range e.Blocks {
		b.encodeHash(e.Hash(i))
	}
	b.encodeOptString(b.medium(e.Medium))
	if hasGroup {
		_ = b.enc.EncodeInt(int64(group))
	}
	b.n++
}

// group is the group_idx to write, if any: the event's own (a prefix.GroupTree's events
// name their group), else WithGroup's.
func (b *Batcher) group(g int, has bool) (int, bool) {
	if has {
		return g, true
	}
	return b.cfg.group, b.cfg.hasGroup
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
	dst = append(dst, b.seal(ts)...)
	b.Discard()
	return dst
}

// Discard drops the open batch's events.
func (b *Batcher) Discard() {
	b.events.b = b.events.b[:headroom]
	b.n = 0
}

// headroom is the space kept in front of the events for the batch's header: a fixarray
// byte, a float64 (9 bytes) and an array header (at most 5 bytes).
const headroom = 1 + 9 + 5

// seal writes the batch's header into the headroom, right against the events, appends the
// rank, and returns the whole payload, which stays in the Batcher's buffer: valid until
// the Batcher is next used (the Publisher copies it out, see Publisher.publish).
func (b *Batcher) seal(ts float64) []byte {
	fields := batchFields
	if b.cfg.omitDPRank {
		fields--
	}
	b.out.b = b.hdr[:0]
	_ = b.outEnc.EncodeArrayLen(fields)
	_ = b.outEnc.EncodeFloat64(ts)
	_ = b.outEnc.EncodeArrayLen(b.n)
	start := headroom - len(b.out.b)
	copy(b.events.b[start:], b.out.b)
	b.out.b = nil
	if !b.cfg.omitDPRank {
		_ = b.enc.EncodeInt(b.cfg.dpRank)
	}
	return b.events.b[start:]
}

func (b *Batcher) encodeHash(h []byte) {
	if b.cfg.intHashes {
		_ = b.enc.EncodeUint(vllmhash.Uint64(h))
		return
	}
	if len(h) < 256 { // every hash: bin8 written directly, as EncodeBytes writes it
		b.events.b = append(append(b.events.b, msgpackBin8, byte(len(h))), h...)
		return
	}
	_ = b.enc.EncodeBytes(h)
}

// msgpackBin8 and msgpackNil are the codes of a byte string shorter than 256 bytes and
// of nil, written directly on the per-block paths.
const (
	msgpackBin8 = 0xc4
	msgpackNil  = 0xc0
)

func (b *Batcher) encodeOptString(s string) {
	if s == "" {
		_ = b.enc.EncodeNil()
		return
	}
	_ = b.enc.EncodeString(s)
}

// encodeExtraKeys writes one block's entry of extra_keys: None, or the tuple of LoRA name,
// multimodal keys and salt, as generate_block_hash_extra_keys builds it. A multimodal key
// is its identifier, or, given offsets (the (identifier, offset) form), the 2-tuple
// [identifier, offset], as msgspec encodes vLLM's tuple.
func (b *Batcher) encodeExtraKeys(lora string, mm []string, offs []int, salt string) {
	n := len(mm)
	if lora != "" {
		n++
	}
	if salt != "" {
		n++
	}
	if n == 0 {
		b.events.b = append(b.events.b, msgpackNil)
		return
	}
	_ = b.enc.EncodeArrayLen(n)
	if lora != "" {
		_ = b.enc.EncodeString(lora)
	}
	for i, h := range mm {
		if offs != nil {
			_ = b.enc.EncodeArrayLen(2)
			_ = b.enc.EncodeString(h)
			_ = b.enc.EncodeInt(int64(offs[i]))
			continue
		}
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

// intForm is a shortest encoding of a non-negative integer, by bits.Len32 of the value:
// n argument bytes after an initial byte that is code, or, where mask is 0xff, the value
// itself (msgpack's positive fixint, CBOR's values below 24).
type intForm struct{ n, code, mask byte }

// msgpackUintForm gives msgpack's forms: fixint below 128, then uint8, uint16, uint32.
var msgpackUintForm = func() (t [33]intForm) {
	for l := range t {
		switch {
		case l <= 7:
			t[l] = intForm{0, 0, 0xff}
		case l <= 8:
			t[l] = intForm{1, 0xcc, 0}
		case l <= 16:
			t[l] = intForm{2, 0xcd, 0}
		default:
			t[l] = intForm{4, 0xce, 0}
		}
	}
	return t
}()

// appendMsgpackTokens appends each token as appendMsgpackInt would. Token widths vary at
// random, so instead of a branch per token (a misprediction every other token) it looks
// the form up and always stores 8 bytes at once, keeping only the form's length. (The CBOR
// twin, appendCBORTokens, is the same loop: Go would not specialise a shared one.)
func appendMsgpackTokens(dst []byte, toks []int32) []byte {
	dst = slices.Grow(dst, 5*len(toks)+8)
	n := len(dst)
	buf := dst[:cap(dst)]
	for _, t := range toks {
		if t < 0 {
			n = len(appendMsgpackInt(buf[:n], t))
			continue
		}
		v := uint32(t)
		f := msgpackUintForm[bits.Len32(v)]
		w := uint64(f.code|byte(v)&f.mask)<<56 | uint64(v<<(32-8*uint32(f.n)))<<24
		binary.BigEndian.PutUint64(buf[n:n+8], w)
		n += 1 + int(f.n)
	}
	return buf[:n]
}

// appendMsgpackInt appends v in msgpack's shortest integer form, as msgspec and
// vmihailenco's EncodeInt write it: positive fixint, uint8/16/32 for other non-negative
// values, negative fixint, int8/16/32 for other negative ones.
func appendMsgpackInt(dst []byte, v int32) []byte {
	switch {
	case v >= 0 && v <= 0x7f:
		return append(dst, byte(v))
	case v >= 0 && v <= 0xff:
		return append(dst, 0xcc, byte(v))
	case v >= 0 && v <= 0xffff:
		return append(dst, 0xcd, byte(v>>8), byte(v))
	case v >= 0:
		return append(dst, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= -128:
		return append(dst, 0xd0, byte(v))
	case v >= -32768:
		return append(dst, 0xd1, byte(v>>8), byte(v))
	default:
		return append(dst, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// byteSink is the msgpack encoder's writer: an append-only byte slice. Writes never fail.
type byteSink struct{ b []byte }

func (s *byteSink) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }

func (s *byteSink) WriteByte(c byte) error { s.b = append(s.b, c); return nil }

// medium is an event's medium field: the tier the event names (a lower tier of the
// index's WithTiers), else the configured medium of the device (WithMedium).
func (b *Batcher) medium(m string) string {
	if m != "" {
		return m
	}
	return b.cfg.medium
}

// storable and removable report whether a Decoder accepts what the event's fields become
// on the wire (the configured ones were checked by newConfig): an event's own medium (a
// tier's name), group and LoRA name come from the index, unchecked.
func (c *config) storable(e *prefix.BlockStored) bool {
	return len(e.Namespace.LoRA) <= MaxLoRANameBytes && len(e.Medium) <= MaxMediumBytes &&
		(!e.HasGroup || e.Group >= 0 && e.Group <= MaxGroup) &&
		(c.omitExtraKeys || c.extraKeysFit(e))
}

// extraKeysFit reports whether every string the event's extra_keys would hold (the salt,
// the multimodal identifiers) fits in MaxExtraKeyBytes; the LoRA name fits when lora_name
// does.
func (c *config) extraKeysFit(e *prefix.BlockStored) bool {
	if len(e.Namespace.Salt) > MaxExtraKeyBytes && len(e.Parent) == 0 {
		return false
	}
	for _, mm := range e.MM {
		for _, id := range mm {
			if len(id) > MaxExtraKeyBytes {
				return false
			}
		}
	}
	return true
}

func (c *config) removable(e *prefix.BlockRemoved) bool {
	return len(e.Medium) <= MaxMediumBytes && (!e.HasGroup || e.Group >= 0 && e.Group <= MaxGroup)
}
