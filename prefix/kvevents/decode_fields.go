package kvevents

// The decoders of the events' fields and of msgpack items, shared by the array form and
// the map form.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

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
			e.Medium, err = d.boundedString(MaxMediumBytes)
		}
	case fieldLoRAName:
		if e.HasLoRAName, err = d.notNil(); err == nil && e.HasLoRAName {
			e.LoRAName, err = d.boundedString(MaxLoRANameBytes)
		}
	case fieldExtraKeys:
		err = d.extraKeys(e)
	case fieldGroupIdx:
		if e.HasGroup, err = d.notNil(); err == nil && e.HasGroup {
			var v int64
			if v, err = d.int(); err == nil && (v < 0 || v > MaxGroup) {
				err = fmt.Errorf("group %d out of [0, %d]", v, MaxGroup)
			}
			e.Group = int(v)
		}
	default:
		err = d.skipOne()
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
	if err := d.charge(hashCost * n); err != nil {
		return err
	}
	b.hashes = reserve(b.hashes, n)
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
		if n != d.hashSize() {
			return false, fmt.Errorf("hash of %d bytes, want %d", n, d.hashSize())
		}
		if n > d.r.Len() {
			return false, fmt.Errorf("hash of %d bytes in %d", n, d.r.Len())
		}
		if err := d.charge(n); err != nil {
			return false, err
		}
		b.bytes = reserve(b.bytes, n)
		from := len(b.bytes)
		b.bytes = b.bytes[:from+n]
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
	if err := d.charge(tokenCost * n); err != nil {
		return err
	}
	b.tokens = reserve(b.tokens, n)
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
	if err := d.charge(keysCost * n); err != nil {
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
		if err := d.charge(anyCost * k); err != nil {
			return err
		}
		keys := make([]any, k)
		for j := range keys {
			if keys[j], err = d.anyValue(); err != nil {
				return err
			}
		}
		e.ExtraKeys[i] = keys
	}
	return nil
}

// rawString reads a string (or bin) as a view of the payload: nothing is copied.
func (d *Decoder) rawString() ([]byte, error) { return d.boundedRaw(math.MaxInt) }

// boundedRaw reads a string (or bin) of at most limit bytes as a view of the payload. The
// declared length is checked against limit and the bytes left before anything is read
// past the header, so a peer's long string costs neither a copy nor an allocation.
func (d *Decoder) boundedRaw(limit int) ([]byte, error) {
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > d.r.Len() {
		return nil, fmt.Errorf("string of %d bytes in %d", n, d.r.Len())
	}
	if n > limit {
		return nil, fmt.Errorf("%d bytes, at most %d", n, limit)
	}
	pos := len(d.payload) - d.r.Len()
	if _, err := d.r.Seek(int64(pos+n), io.SeekStart); err != nil {
		return nil, err
	}
	return d.payload[pos : pos+n : pos+n], nil
}

// boundedString reads a string of at most limit bytes, interned; a longer one is refused
// from its declared length, before any of its bytes is copied.
func (d *Decoder) boundedString(limit int) (string, error) {
	b, err := d.boundedRaw(limit)
	if err != nil {
		return "", err
	}
	return d.intern(b), nil
}

// intern returns b as a string, shared with earlier equal strings: the same medium and
// LoRA names come in every event, and a decoder that reuses its Batch allocates nothing.
// It keeps at most maxInterned strings of at most maxInternedBytes each: what it keeps
// outlives the payload, so a stream of distinct names must not grow it. (Only bounded
// strings are interned; map keys are matched against the known fields, never copied.)
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.strs == nil {
		d.strs = make(map[string]string)
	}
	if len(d.strs) < maxInterned && len(s) <= maxInternedBytes {
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
