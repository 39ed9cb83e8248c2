package kvevents

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrMalformed is wrapped by every error that Decode returns for a payload that is not a
// KV event batch.
var ErrMalformed = errors.New("kvevents: malformed event batch")

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
// mid 2026), and also the map form that later vLLM writes for each event and for the
// batch. It skips what it
// does not know (extra trailing array elements, unknown map keys), so that fields added
// later do not break it. A Decoder may be reused; it is not safe for concurrent use.
//
// Every payload is treated as hostile: a Decoder refuses payloads longer than MaxPayload,
// byte-string hashes of another length than HashSize, declared lengths the remaining bytes
// cannot hold, unknown elements nested deeper than 32 levels, and payloads that would
// build more than 12 bytes of Go memory per payload byte (real batches build 2 to 6).
type Decoder struct {
	// HashSize is the length of a block hash sent as a byte string: the servers' hasher's
	// Size() (32 for vLLM's sha256 schemes, 8 for prefix.Fast64). 0 means DefaultHashSize.
	// Integer hashes (vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) are accepted in any width.
	HashSize int
	// MaxPayload is the longest payload accepted; 0 means DefaultMaxPayload.
	MaxPayload int

	payload []byte
	budget  int
	r       bytes.Reader
	d       *msgpack.Decoder
	strs    map[string]string // interned medium and LoRA names: a handful of values
}

// maxInterned and maxInternedBytes bound the interned strings, so a stream of distinct
// names cannot grow them: at most 1 MiB is kept.
const (
	maxInterned      = 1024
	maxInternedBytes = MaxLoRANameBytes
)

// Decode decodes payload into b, reusing b's memory: the slices of a Batch that Decode
// filled stay valid until the Batch is passed to Decode again. Nothing in b refers to
// payload, and the Decoder keeps no reference to it once Decode returns: the caller may
// reuse or drop payload at once. On error b holds a partial batch, and the error wraps
// ErrMalformed.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	b.Events = b.Events[:0]
	b.hashes, b.bytes, b.tokens = b.hashes[:0], b.bytes[:0], b.tokens[:0]
	b.Timestamp, b.DataParallelRank, b.HasDataParallelRank = 0, 0, false
	if len(payload) > d.maxPayload() {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(payload), d.maxPayload())
	}
	if hs := d.hashSize(); hs < 1 || hs > MaxHashSize {
		return fmt.Errorf("%w: decoder hash size %d", ErrMalformed, hs)
	}
	d.payload = payload
	d.budget = allocFactor*len(payload) + allocSlack
	d.r.Reset(payload)
	if d.d == nil {
		d.d = msgpack.NewDecoder(&d.r)
	} else {
		d.d.Reset(&d.r)
	}
	err := d.batch(b)
	left := d.r.Len()
	// Nothing decoded aliases the payload (hashes are copied into the Batch, names
	// interned, extra keys built by msgpack), so the Decoder lets go of it: a caller's
	// receive buffer is not kept alive by an idle Decoder.
	d.payload = nil
	d.r.Reset(nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if left != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, left)
	}
	return nil
}

func (d *Decoder) batch(b *Batch) error {
	c, err := d.d.PeekCode()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if isMap(c) {
		return d.mapBatch(b)
	}
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
	if err := d.events(b); err != nil {
		return err
	}
	if n >= 3 {
		if err := d.rank(b); err != nil {
			return err
		}
	}
	return d.skip(n - 3)
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

// mapBatch reads the map form of a batch, which vLLM writes since its EventBatch lost
// array_like (mid 2026): {"ts": ..., "events": [...], "data_parallel_rank": ...}, the
// rank left out when None, keys in any order, unknown keys skipped.
func (d *Decoder) mapBatch(b *Batch) error {
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if n < 0 || 2*n > d.r.Len() {
		return fmt.Errorf("batch map of %d entries in %d bytes", n, d.r.Len())
	}
	var hasTS, hasEvents bool
	for range n {
		key, err := d.rawString()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch string(key) {
		case "ts":
			if hasTS {
				return errors.New("ts twice")
			}
			hasTS = true
			if b.Timestamp, err = d.d.DecodeFloat64(); err != nil {
				return fmt.Errorf("timestamp: %w", err)
			}
		case "events":
			if hasEvents {
				return errors.New("events twice") // the arenas would hold both lists
			}
			hasEvents = true
			err = d.events(b)
		case "data_parallel_rank":
			err = d.rank(b)
		default:
			err = d.skipOne()
		}
		if err != nil {
			return err
		}
	}
	if !hasTS || !hasEvents {
		return errors.New("batch map without ts or events")
	}
	return nil
}

func (d *Decoder) events(b *Batch) error {
	nev, err := d.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range nev {
		// Appending before decoding, never during, keeps the pointer valid. Slices taken
		// from the arenas stay valid when an arena grows: the old array keeps its bytes.
		if err := d.charge(eventCost); err != nil {
			return err
		}
		b.Events = append(reserve(b.Events, 1), Event{})
		if err := d.event(b, &b.Events[len(b.Events)-1]); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// rank reads data_parallel_rank: an integer, or nil for None.
func (d *Decoder) rank(b *Batch) error {
	isNil, err := d.nilNext()
	if err != nil {
		return err
	}
	if isNil {
		b.DataParallelRank, b.HasDataParallelRank = 0, false
		return nil
	}
	if b.DataParallelRank, err = d.int(); err != nil {
		return fmt.Errorf("data_parallel_rank: %w", err)
	}
	b.HasDataParallelRank = true
	return nil
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
	fieldGroupIdx    = "group_idx"
)

var (
	storedFields  = []string{fieldBlockHashes, fieldParent, fieldTokenIDs, fieldBlockSize, fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys, fieldGroupIdx}
	removedFields = []string{fieldBlockHashes, fieldMedium, fieldGroupIdx}
)

// eventKey returns the map form's key raw as the package's constant for it, or "" for a
// key it does not know (without converting raw, so a peer's long unknown keys cost no
// allocation).
func eventKey(raw []byte) string {
	switch string(raw) {
	case "type":
		return "type"
	case fieldBlockHashes:
		return fieldBlockHashes
	case fieldParent:
		return fieldParent
	case fieldTokenIDs:
		return fieldTokenIDs
	case fieldBlockSize:
		return fieldBlockSize
	case fieldLoRAID:
		return fieldLoRAID
	case fieldMedium:
		return fieldMedium
	case fieldLoRAName:
		return fieldLoRAName
	case fieldExtraKeys:
		return fieldExtraKeys
	case fieldGroupIdx:
		return fieldGroupIdx
	}
	return ""
}

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
	if isMap(c) {
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
		} else if err := d.skipOne(); err != nil {
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
		key := eventKey(raw)
		switch key {
		case "":
			if err := d.skipOne(); err != nil { // an unknown field, never copied
				return err
			}
			continue
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
