package kvevents

import (
	"fmt"

	"github.com/kvpage/kvpage/prefix/vllmhash"
)

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
	return vllmhash.Uint64(h.Bytes)
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
	// Group is the KV-cache group the event is about (vLLM's group_idx, llm-d's GroupIdx:
	// a hybrid model's full-attention, sliding-window or Mamba layers each have one); a
	// BlockStored and a BlockRemoved carry it. HasGroup is false when the sender left it
	// out or sent None (vLLM before the hybrid allocator's events).
	Group    int
	HasGroup bool
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

// Applier consumes decoded batches, one server's in that server's order: what a
// subscriber feeds. package cluster's Index (the router's cluster index, in memory or in
// Redis) implements it. Apply must not keep b or its slices after it returns: the caller
// reuses them for the next batch.
type Applier interface {
	Apply(server string, b *Batch) error
}
