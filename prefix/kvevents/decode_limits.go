package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// Limits a Decoder applies to what it reads: every payload is hostile until decoded.
const (
	// DefaultMaxPayload is the longest payload a zero Decoder accepts (Decoder.MaxPayload).
	// vLLM's batches are one engine step's events: a 128k-token prefill is about 1 MiB.
	DefaultMaxPayload = 16 << 20
	// DefaultHashSize is the length of a byte-string block hash a zero Decoder accepts
	// (Decoder.HashSize): vLLM's sha256 schemes.
	DefaultHashSize = 32
	// MaxHashSize is the longest byte-string hash any Decoder accepts.
	MaxHashSize = 64
	// MaxGroup is the largest KV-cache group index (group_idx) a Decoder accepts: vLLM
	// numbers a model's groups from 0, and no model has more than a handful. A negative
	// one is refused too, as llm-d refuses it.
	MaxGroup = 1<<15 - 1
	// MaxMediumBytes is the longest medium a Decoder accepts. vLLM's are GPU, CPU and
	// DISK, and a medium it does not know is accepted; but a consumer writes the medium
	// into the entry of every block of the event (llm-d's DeviceTier, a Redis hash field),
	// so a longer one would let one event make it store megabytes per block.
	MaxMediumBytes = 64
	// MaxLoRANameBytes is the longest lora_name a Decoder accepts (and a Batcher writes).
	// vLLM's are adapter names, an identifier such as a Hugging Face repository id (at
	// most 96 characters a part); a consumer keys the blocks' chain by it, and a Decoder
	// keeps the names it has seen, so an unbounded one let each payload park megabytes.
	MaxLoRANameBytes = 1024
	// MaxExtraKeyBytes is the longest string an extra key may be, at any depth of
	// extra_keys (a Decoder refuses a longer one, a Batcher leaves out the event that would
	// write it). vLLM's are the LoRA name (at most MaxLoRANameBytes), multimodal
	// identifiers (a 64-character hash, or a user's uuid, which vLLM may prefix with the
	// LoRA name) and the cache salt (a tenant's secret); a consumer keeps or hashes each
	// of them for every block of the event, so without a bound of their own one event of
	// a megabyte string would make it store or hash megabytes per block.
	MaxExtraKeyBytes = 4096
	// maxSkipDepth bounds how deeply a skipped unknown element may nest.
	maxSkipDepth = 32
	// allocFactor and allocSlack bound what one Decode may build: the Go memory of its
	// events, hashes, tokens and extra keys is at most allocFactor bytes per payload byte
	// plus allocSlack. Real batches take 2 to 6 (tokens of 1 to 5 bytes become 4-byte
	// int32s; a 34-byte hash becomes a 40-byte ExternalHash and 32 arena bytes).
	allocFactor = 12
	allocSlack  = 64 << 10
)

// Sizes charged against the budget for each thing built.
const (
	eventCost = int(unsafe.Sizeof(Event{}))
	hashCost  = int(unsafe.Sizeof(ExternalHash{}))
	tokenCost = int(unsafe.Sizeof(int32(0)))
	keysCost  = int(unsafe.Sizeof([]any(nil)))
	anyCost   = 2 * int(unsafe.Sizeof(any(nil))) // the interface and its boxed value
)

var errBudget = errors.New("payload builds more than its size allows")

// charge takes n bytes from the decode's allocation budget.
func (d *Decoder) charge(n int) error {
	d.budget -= n
	if d.budget < 0 {
		return errBudget
	}
	return nil
}

func (d *Decoder) hashSize() int {
	if d.HashSize > 0 {
		return d.HashSize
	}
	return DefaultHashSize
}

func (d *Decoder) maxPayload() int {
	if d.MaxPayload > 0 {
		return d.MaxPayload
	}
	return DefaultMaxPayload
}

// skip skips n values.
func (d *Decoder) skip(n int) error {
	for range n {
		if err := d.skipOne(); err != nil {
			return err
		}
	}
	return nil
}

// skipOne skips one value of any shape, walking the payload's bytes without recursion:
// a stack of at most maxSkipDepth counts of the items left in each open container. The
// library's Skip recurses once per level, and 10 MB of nested one-element arrays
// overflowed the goroutine's stack, a fatal error recover cannot catch.
func (d *Decoder) skipOne() error {
	p := d.payload
	pos := len(p) - d.r.Len()
	var stack [maxSkipDepth]int
	depth, left := 0, 1
	for {
		for left == 0 {
			if depth == 0 {
				_, err := d.r.Seek(int64(pos), io.SeekStart)
				return err
			}
			depth--
			left = stack[depth]
		}
		left--
		if pos >= len(p) {
			return io.ErrUnexpectedEOF
		}
		c := p[pos]
		pos++
		var size, items int // bytes of payload to skip, items the container holds
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			size = int(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			size = -1
		case c == 0xc5 || c == 0xda:
			size = -2
		case c == 0xc6 || c == 0xdb:
			size = -4
		case c == 0xc7:
			size = -1 // ext8: length, then type and data
			if pos < len(p) {
				size = 1 + int(p[pos])
				pos++
			}
		case c == 0xc8 || c == 0xc9:
			n := 2
			if c == 0xc9 {
				n = 4
			}
			v, ok := readUint(p, pos, n)
			if !ok {
				return io.ErrUnexpectedEOF
			}
			pos += n
			size = 1 + int(v)
		case c == 0xca, c == 0xce, c == 0xd2:
			size = 4
		case c == 0xcb, c == 0xcf, c == 0xd3:
			size = 8
		case c == 0xcc, c == 0xd0:
			size = 1
		case c == 0xcd, c == 0xd1:
			size = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type byte and data
			size = 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xde:
			v, ok := readUint(p, pos, 2)
			if !ok {
				return io.ErrUnexpectedEOF
			}
			pos += 2
			items = int(v)
			if c == 0xde {
				items *= 2
			}
		case c == 0xdd || c == 0xdf:
			v, ok := readUint(p, pos, 4)
			if !ok {
				return io.ErrUnexpectedEOF
			}
			pos += 4
			items = int(v)
			if c == 0xdf {
				items *= 2
			}
		default: // 0xc1: never used
			return fmt.Errorf("invalid msgpack code 0x%02x", c)
		}
		if size < 0 { // a length of -size bytes follows
			v, ok := readUint(p, pos, -size)
			if !ok {
				return io.ErrUnexpectedEOF
			}
			pos += -size
			size = int(v)
		}
		if size > len(p)-pos {
			return fmt.Errorf("item of %d bytes in %d", size, len(p)-pos)
		}
		pos += size
		if items > 0 {
			if items > len(p)-pos { // every item takes at least a byte
				return fmt.Errorf("container of %d items in %d bytes", items, len(p)-pos)
			}
			if depth == maxSkipDepth {
				return errors.New("value nested too deeply")
			}
			stack[depth] = left
			depth++
			left = items
		}
	}
}

// readUint reads an n-byte big-endian unsigned integer at p[pos:].
func readUint(p []byte, pos, n int) (uint64, bool) {
	if pos+n > len(p) {
		return 0, false
	}
	switch n {
	case 1:
		return uint64(p[pos]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p[pos:])), true
	default:
		return uint64(binary.BigEndian.Uint32(p[pos:])), true
	}
}

// reserve makes room for n more elements in an arena, doubling its capacity when it must
// grow: append's growth of a quarter past 256 elements allocates about five times the
// final size over a batch, doubling at most twice, which keeps a Decode's allocation
// within a small multiple of its budget.
func reserve[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	grown := make([]T, len(s), max(2*cap(s), len(s)+n, 16))
	copy(grown, s)
	return grown
}
