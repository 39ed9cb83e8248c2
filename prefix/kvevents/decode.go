package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrMalformed is wrapped by every error that Decode returns for a payload that is not a
// KV event batch.
var ErrMalformed = errors.New("kvevents: malformed event batch")

// EventKind says which event an Event is.
type EventKind uint8

// The event kinds.
const (
	KindBlockStored EventKind = iota + 1
	KindBlockRemoved
	KindAllBlocksCleared
)

// String returns the event's tag.
func (k EventKind) String() string {
	switch k {
	case KindBlockStored:
		return TagBlockStored
	case KindBlockRemoved:
		return TagBlockRemoved
	case KindAllBlocksCleared:
		return TagAllBlocksCleared
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// ExternalHash is a block hash as it travels: bytes, or a 64-bit integer.
type ExternalHash struct {
	// Bytes is the hash (nil for an integer hash).
	Bytes []byte
	// Int is the integer hash, valid when IsInt.
	Int   uint64
	IsInt bool
}

// Uint64 returns the hash's 64-bit form: the integer itself, or the last 8 bytes of the
// hash bytes read big-endian (what vLLM publishes in integer mode, and how llm-d's
// indexer keys every hash).
func (h ExternalHash) Uint64() uint64 {
	if h.IsInt {
		return h.Int
	}
	return Uint64(h.Bytes)
}

// Event is one decoded KV event. Which fields are meaningful depends on Kind.
type Event struct {
	Kind EventKind
	// Hashes are the stored or removed blocks' hashes.
	Hashes []ExternalHash
	// Parent is the stored chain's parent hash; HasParent is false for None.
	Parent    ExternalHash
	HasParent bool
	// Tokens are the stored blocks' tokens, BlockSize per block.
	Tokens    []int32
	BlockSize int
	// LoRAID, Medium and LoRAName are optional; each Has* is false for None or absent.
	LoRAID      int64
	HasLoRAID   bool
	Medium      string
	HasMedium   bool
	LoRAName    string
	HasLoRAName bool
	// ExtraKeys holds each stored block's extra keys (a nil entry for None), or is nil
	// when the field is absent or None. Elements are strings, or whatever else the sender
	// put there (newer vLLM writes [identifier, offset] pairs for multimodal inputs), as
	// msgpack's generic decoder returns them.
	ExtraKeys [][]any
}

// Batch is one decoded event batch.
type Batch struct {
	Timestamp float64
	Events    []Event
	// DataParallelRank is the sender's data-parallel rank; HasDataParallelRank is false
	// when the batch left it out or sent None.
	DataParallelRank    int64
	HasDataParallelRank bool

	// Arenas that Decode reuses; the events' slices point into them.
	hashes []ExternalHash
	bytes  []byte
	tokens []int32
}

// DecodeBatch decodes one batch payload into a new Batch.
func DecodeBatch(payload []byte) (*Batch, error) {
	var d Decoder
	b := new(Batch)
	if err := d.Decode(payload, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Decoder decodes event batches: the array form this package writes (and vLLM wrote until
// mid 2026), and also the map form that later vLLM writes for each event. It skips what it
// does not know (extra trailing array elements, unknown map keys), so that fields added
// later do not break it. A Decoder may be reused; it is not safe for concurrent use.
type Decoder struct {
	payload []byte
	r       bytes.Reader
	d       *msgpack.Decoder
	scratch []byte
	strs    map[string]string // interned medium and LoRA names: a handful of values
}

// maxInterned bounds the interned strings, so a stream of distinct names cannot grow it.
const maxInterned = 1024

// Decode decodes payload into b, reusing b's memory: the slices of a Batch that Decode
// filled stay valid until the Batch is passed to Decode again. On error b holds a partial
// batch, and the error wraps ErrMalformed.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	d.payload = payload
	d.r.Reset(payload)
	if d.d == nil {
		d.d = msgpack.NewDecoder(&d.r)
	} else {
		d.d.Reset(&d.r)
	}
	b.Events = b.Events[:0]
	b.hashes, b.bytes, b.tokens = b.hashes[:0], b.bytes[:0], b.tokens[:0]
	b.Timestamp, b.DataParallelRank, b.HasDataParallelRank = 0, 0, false
	if err := d.batch(b); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if d.r.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, d.r.Len())
	}
	return nil
}

func (d *Decoder) batch(b *Batch) error {
	n, err := d.arrayLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if n < 2 {
		return fmt.Errorf("batch has %d elements, want at least 2", n)
	}
	if b.Timestamp, err = d.d.DecodeFloat64(); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	nev, err := d.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range nev {
		// Appending before decoding, never during, keeps the pointer valid. Slices taken
		// from the arenas stay valid when an arena grows: the old array keeps its bytes.
		b.Events = append(b.Events, Event{})
		if err := d.event(b, &b.Events[len(b.Events)-1]); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	if n >= 3 {
		isNil, err := d.nilNext()
		if err != nil {
			return err
		}
		if !isNil {
			if b.DataParallelRank, err = d.int(); err != nil {
				return fmt.Errorf("data_parallel_rank: %w", err)
			}
			b.HasDataParallelRank = true
		}
	}
	return d.skip(n - 3)
}

// Fields of the events, in the array form's order after the tag.
const (
	fieldBlockHashes = "block_hashes"
	fieldParent      = "parent_block_hash"
	fieldTokenIDs    = "token_ids"
	fieldBlockSize   = "block_size"
	fieldLoRAID      = "lora_id"
	fieldMedium      = "medium"
	fieldLoRAName    = "lora_name"
	fieldExtraKeys   = "extra_keys"
)

var (
	storedFields  = []string{fieldBlockHashes, fieldParent, fieldTokenIDs, fieldBlockSize, fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys}
	removedFields = []string{fieldBlockHashes, fieldMedium}
)

func fieldsOf(k EventKind) []string {
	switch k {
	case KindBlockStored:
		return storedFields
	case KindBlockRemoved:
		return removedFields
	}
	return nil
}

func kindOf(tag []byte) (EventKind, error) {
	switch string(tag) {
	case TagBlockStored:
		return KindBlockStored, nil
	case TagBlockRemoved:
		return KindBlockRemoved, nil
	case TagAllBlocksCleared:
		return KindAllBlocksCleared, nil
	}
	return 0, fmt.Errorf("unknown event tag %q", tag)
}

func (d *Decoder) event(b *Batch, e *Event) error {
	c, err := d.d.PeekCode()
	if err != nil {
		return err
	}
	if msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 {
		return d.mapEvent(b, e)
	}
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return errors.New("event without a tag")
	}
	tag, err := d.rawString()
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	if e.Kind, err = kindOf(tag); err != nil {
		return err
	}
	names := fieldsOf(e.Kind)
	var got int
	for i := 1; i < n; i++ {
		if i-1 < len(names) {
			if err := d.field(b, e, names[i-1]); err != nil {
				return err
			}
			got++
		} else if err := d.d.Skip(); err != nil {
			return err
		}
	}
	switch {
	case e.Kind == KindBlockStored && got < 4:
		return fmt.Errorf("BlockStored with %d fields, want at least 4", got)
	case e.Kind == KindBlockRemoved && got < 1:
		return errors.New("BlockRemoved without block_hashes")
	}
	return nil
}

func (d *Decoder) mapEvent(b *Batch, e *Event) error {
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return err
	}
	if n < 0 || 2*n > d.r.Len() {
		return fmt.Errorf("map of %d entries in %d bytes", n, d.r.Len())
	}
	// The tag may come after the fields it governs, so every known field is decoded
	// whatever the kind, and the kind is checked at the end.
	var hasHashes, hasTokens bool
	for range n {
		raw, err := d.rawString()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		key := d.intern(raw)
		switch key {
		case "type":
			tag, err := d.rawString()
			if err != nil {
				return fmt.Errorf("tag: %w", err)
			}
			if e.Kind, err = kindOf(tag); err != nil {
				return err
			}
			continue
		case fieldBlockHashes:
			hasHashes = true
		case fieldTokenIDs:
			hasTokens = true
		}
		if err := d.field(b, e, key); err != nil {
			return err
		}
	}
	switch {
	case e.Kind == 0:
		return errors.New("event map without a type")
	case e.Kind == KindBlockStored && (!hasHashes || !hasTokens):
		return errors.New("BlockStored without block_hashes or token_ids")
	case e.Kind == KindBlockRemoved && !hasHashes:
		return errors.New("BlockRemoved without block_hashes")
	}
	return nil
}

// field decodes the value of the named field into e; an unknown name is skipped.
func (d *Decoder) field(b *Batch, e *Event, name string) error {
	var err error
	switch name {
	case fieldBlockHashes:
		err = d.hashList(b, e)
	case fieldParent:
		e.HasParent, err = d.hash(b, &e.Parent)
	case fieldTokenIDs:
		err = d.tokenList(b, e)
	case fieldBlockSize:
		var v int64
		if v, err = d.int(); err == nil {
			if v < 0 || v > math.MaxInt32 {
				err = fmt.Errorf("block size %d", v)
			}
			e.BlockSize = int(v)
		}
	case fieldLoRAID:
		if e.HasLoRAID, err = d.notNil(); err == nil && e.HasLoRAID {
			e.LoRAID, err = d.int()
		}
	case fieldMedium:
		if e.HasMedium, err = d.notNil(); err == nil && e.HasMedium {
			e.Medium, err = d.internedString()
		}
	case fieldLoRAName:
		if e.HasLoRAName, err = d.notNil(); err == nil && e.HasLoRAName {
			e.LoRAName, err = d.internedString()
		}
	case fieldExtraKeys:
		err = d.extraKeys(e)
	default:
		err = d.d.Skip()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (d *Decoder) hashList(b *Batch, e *Event) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	from := len(b.hashes)
	for range n {
		var h ExternalHash
		ok, err := d.hash(b, &h)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("a block hash is None")
		}
		b.hashes = append(b.hashes, h)
	}
	e.Hashes = b.hashes[from:len(b.hashes):len(b.hashes)]
	return nil
}

// hash decodes one hash (bytes or integer) into h; it returns false for nil.
func (d *Decoder) hash(b *Batch, h *ExternalHash) (bool, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return false, err
	}
	switch {
	case c == msgpcode.Nil:
		return false, d.d.DecodeNil()
	case msgpcode.IsBin(c):
		n, err := d.d.DecodeBytesLen()
		if err != nil {
			return false, err
		}
		if n < 0 || n > d.r.Len() {
			return false, fmt.Errorf("hash of %d bytes in %d", n, d.r.Len())
		}
		from := len(b.bytes)
		b.bytes = append(b.bytes, make([]byte, n)...)
		if err := d.d.ReadFull(b.bytes[from:]); err != nil {
			return false, err
		}
		*h = ExternalHash{Bytes: b.bytes[from:len(b.bytes):len(b.bytes)]}
		return true, nil
	default:
		// Integers: unsigned in vLLM's integer mode; a negative one (Python's builtin
		// hash() of old vLLM) keeps its two's-complement bits.
		v, err := d.int()
		if err != nil {
			return false, err
		}
		*h = ExternalHash{Int: uint64(v), IsInt: true}
		return true, nil
	}
}

func (d *Decoder) tokenList(b *Batch, e *Event) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	from := len(b.tokens)
	// The common forms (non-negative integers up to uint32) are read straight from the
	// payload, which the msgpack decoder reads unbuffered through d.r; anything else goes
	// through the decoder.
	pos := len(d.payload) - d.r.Len()
	p := d.payload
	for range n {
		var v int64
		switch {
		case pos < len(p) && p[pos] <= 0x7f: // positive fixint
			v, pos = int64(p[pos]), pos+1
		case pos+1 < len(p) && p[pos] == 0xcc:
			v, pos = int64(p[pos+1]), pos+2
		case pos+2 < len(p) && p[pos] == 0xcd:
			v, pos = int64(binary.BigEndian.Uint16(p[pos+1:])), pos+3
		case pos+4 < len(p) && p[pos] == 0xce:
			v, pos = int64(binary.BigEndian.Uint32(p[pos+1:])), pos+5
		default:
			if _, err := d.r.Seek(int64(pos), io.SeekStart); err != nil {
				return err
			}
			var err error
			if v, err = d.int(); err != nil {
				return err
			}
			pos = len(p) - d.r.Len()
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("token id %d out of int32 range", v)
		}
		b.tokens = append(b.tokens, int32(v))
	}
	if _, err := d.r.Seek(int64(pos), io.SeekStart); err != nil {
		return err
	}
	e.Tokens = b.tokens[from:len(b.tokens):len(b.tokens)]
	return nil
}

func (d *Decoder) extraKeys(e *Event) error {
	if ok, err := d.notNil(); err != nil || !ok {
		return err
	}
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	e.ExtraKeys = make([][]any, n)
	for i := range n {
		ok, err := d.notNil()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		k, err := d.arrayLen()
		if err != nil {
			return err
		}
		keys := make([]any, k)
		for j := range keys {
			if keys[j], err = d.d.DecodeInterface(); err != nil {
				return err
			}
		}
		e.ExtraKeys[i] = keys
	}
	return nil
}

// rawString reads a string (or bin) into the decoder's scratch buffer, valid until the next
// call.
func (d *Decoder) rawString() ([]byte, error) {
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > d.r.Len() {
		return nil, fmt.Errorf("string of %d bytes in %d", n, d.r.Len())
	}
	d.scratch = append(d.scratch[:0], make([]byte, n)...)
	return d.scratch, d.d.ReadFull(d.scratch)
}

func (d *Decoder) internedString() (string, error) {
	b, err := d.rawString()
	if err != nil {
		return "", err
	}
	return d.intern(b), nil
}

// intern returns b as a string, shared with earlier equal strings: the same medium and
// LoRA names come in every event, and a decoder that reuses its Batch allocates nothing.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.strs == nil {
		d.strs = make(map[string]string)
	}
	if len(d.strs) < maxInterned {
		d.strs[s] = s
	}
	return s
}

// int decodes an integer of any msgpack width, refusing nil and uint64 values that do not
// fit in an int64 (except as two's complement, which callers that want bits accept).
func (d *Decoder) int() (int64, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsFixedNum(c) && (c < msgpcode.Uint8 || c > msgpcode.Int64) {
		return 0, fmt.Errorf("want an integer, got code 0x%02x", c)
	}
	return d.d.DecodeInt64()
}

// arrayLen decodes an array header, refusing nil and lengths that the remaining bytes
// cannot hold (every element takes at least one byte), so hostile input cannot make the
// decoder allocate more than the payload's size.
func (d *Decoder) arrayLen() (int, error) {
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("want an array, got nil")
	}
	if n > d.r.Len() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.r.Len())
	}
	return n, nil
}

// notNil consumes a nil and returns false, or returns true leaving a non-nil value to read.
func (d *Decoder) notNil() (bool, error) {
	isNil, err := d.nilNext()
	return !isNil, err
}

func (d *Decoder) nilNext() (bool, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		return true, d.d.DecodeNil()
	}
	return false, nil
}

func (d *Decoder) skip(n int) error {
	for range n {
		if err := d.d.Skip(); err != nil {
			return err
		}
	}
	return nil
}
