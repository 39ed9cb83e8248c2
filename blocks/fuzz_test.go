package blocks

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// maxFuzzOps bounds a decoded sequence so that every input runs in well under a millisecond.
const maxFuzzOps = 256

// decodeOps turns fuzz bytes into a pool shape and an operation sequence. The first byte
// picks the pool: 1..32 blocks, bit 5 the null block. Then each operation is a kind byte
// and an argument byte; Retain and Release take (argument % 4) + 1 ID bytes after it. An
// ID byte maps onto -1..numBlocks, so bad IDs occur but most land in the pool. Bytes that
// run out end the sequence.
func decodeOps(data []byte) (numBlocks int, hasNull bool, ops []op) {
	if len(data) == 0 {
		return 1, false, nil
	}
	numBlocks = int(data[0]&31) + 1
	hasNull = data[0]&32 != 0 && numBlocks > 1
	id := func(b byte) ID { return ID(int(b)%(numBlocks+2) - 1) }
	data = data[1:]
	for len(data) >= 2 && len(ops) < maxFuzzOps {
		kind, arg := opKind(data[0])%numOpKinds, data[1]
		data = data[2:]
		switch kind {
		case opAllocate:
			// Mostly small counts, sometimes past the capacity or negative.
			ops = append(ops, op{kind: kind, n: int(int8(arg)) % (numBlocks + 3)})
		case opRetain, opRelease:
			k := min(int(arg%4)+1, len(data))
			ids := make([]ID, k)
			for i := range ids {
				ids[i] = id(data[i])
			}
			data = data[k:]
			ops = append(ops, op{kind: kind, ids: ids})
		case opCache:
			ops = append(ops, op{kind: kind, ids: []ID{id(arg)}})
		case opUncache:
			ops = append(ops, op{kind: kind, n: int(arg)})
		}
	}
	return numBlocks, hasNull, ops
}

// FuzzPoolOps runs decoded operation sequences on a pool and the reference model, requiring
// agreement and intact invariants after every step. Seeds live in testdata/fuzz/FuzzPoolOps
// and below.
func FuzzPoolOps(f *testing.F) {
	f.Add([]byte{})
	// 8 blocks with the null block (an ID byte b means block b-1): allocate 3, retain 1 and
	// 2, release 1 2 1, cache 3, release 3, allocate 6 (reclaims 3), release 9 (unknown).
	f.Add([]byte{0x27, 0, 3, 1, 1, 2, 3, 2, 2, 2, 3, 2, 3, 4, 2, 0, 4, 0, 6, 2, 0, 10})
	// 4 plain blocks: allocate 4, release 1 twice (double free), allocate -1, uncache with
	// nothing cached.
	f.Add([]byte{0x03, 0, 4, 2, 1, 2, 2, 0, 0xff, 4, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		numBlocks, hasNull, ops := decodeOps(data)
		h := newHarness(t, numBlocks, hasNull)
		for _, o := range ops {
			h.apply(t, o)
		}
	})
}

// The decoder covers every operation kind and both pool shapes, so the fuzzer is not
// stuck exploring a corner.
func TestDecodeOps(t *testing.T) {
	numBlocks, hasNull, ops := decodeOps([]byte{0x27, 0, 3, 1, 1, 2, 3, 2, 0, 2, 3, 5, 4, 7, 0, 0xff, 1})
	assert.Equal(t, 8, numBlocks)
	assert.True(t, hasNull)
	assert.Equal(t, []op{
		{kind: opAllocate, n: 3},
		{kind: opRetain, ids: []ID{1, 2}},
		{kind: opRelease, ids: []ID{1}},
		{kind: opCache, ids: []ID{4}},
		{kind: opUncache, n: 7},
		{kind: opAllocate, n: -1},
	}, ops, "a trailing odd byte is dropped")

	numBlocks, hasNull, ops = decodeOps([]byte{0x20})
	assert.Equal(t, 1, numBlocks)
	assert.False(t, hasNull, "a one-block pool cannot reserve the null block")
	assert.Empty(t, ops)
}
