package kvevents

import (
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxExtraKeyDepth bounds how deeply an extra key may nest (vLLM's are strings, integers
// and tuples of them: depth 2 at most).
const maxExtraKeyDepth = 16

// anyValue decodes one value of unknown shape (an extra key) as the library's
// DecodeInterface does, after a walk over its bytes that refuses any container whose
// declared length the remaining bytes cannot hold. The library trusts declared lengths:
// a five-byte map header claiming 170 million entries made it allocate and loop for
// seconds, which would let one corrupt payload stall a router that ingests a fleet's
// events (found by FuzzDecodeBatch).
func (d *Decoder) anyValue() (any, error) {
	start := len(d.payload) - d.r.Len()
	if err := d.checkBounded(0); err != nil {
		return nil, err
	}
	if _, err := d.r.Seek(int64(start), io.SeekStart); err != nil {
		return nil, err
	}
	return d.d.DecodeInterface()
}

// checkBounded walks one value without building it. Every element of an array takes at
// least one byte and every map entry two, so a longer declared length is malformed; a
// string or bin longer than MaxExtraKeyBytes is refused from its declared length.
func (d *Decoder) checkBounded(depth int) error {
	if depth > maxExtraKeyDepth {
		return errors.New("value nested too deeply")
	}
	c, err := d.d.PeekCode()
	if err != nil {
		return err
	}
	var n int
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		if n, err = d.arrayLen(); err != nil {
			return err
		}
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		if n, err = d.d.DecodeMapLen(); err != nil {
			return err
		}
		if n > d.r.Len()/2 {
			return fmt.Errorf("map of %d entries in %d bytes", n, d.r.Len())
		}
		n *= 2
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		if err := d.charge(anyCost); err != nil {
			return err
		}
		if _, err := d.boundedRaw(MaxExtraKeyBytes); err != nil {
			return fmt.Errorf("extra key: %w", err)
		}
		return nil
	default:
		if err := d.charge(anyCost); err != nil {
			return err
		}
		return d.skipOne()
	}
	if err := d.charge(anyCost * n); err != nil {
		return err
	}
	for range n {
		if err := d.checkBounded(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
