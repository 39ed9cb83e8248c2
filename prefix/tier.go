package prefix

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/evict"
)

// This file holds the public types of the lower tiers (host, disk, a user's remote tier):
// what WithTiers configures, the transfer plans the index hands the server, and the hits
// a lookup reports per tier. tierstore.go keeps the books, tierplan.go the transfers,
// tierdevice.go the device's side and tierlookup.go the lookups.

// Tier is a level of the cache hierarchy: Device (the pool the index caches) is 0, and
// the lower tiers of WithTiers follow in their order, 1 (usually host memory) onwards.
type Tier uint8

// Device is the tier of the pool the index caches: GPU memory.
const Device Tier = 0

// MaxTiers is the most tiers an index has, Device included.
const MaxTiers = 4

// Media of vLLM's KV events (BlockStored and BlockRemoved's medium field) for the tiers
// every server has. A user's own tier names its own medium.
const (
	MediumGPU  = "GPU"
	MediumCPU  = "CPU"
	MediumDisk = "DISK"
)

// WritePolicy says when a block is copied down into a tier from the tier above it.
//
// For maintainers, a new policy: add its constant below and accept it in
// TierConfig.validate; the device's copies into tier 1 are decided in tierdevice.go
// (tierCommitted on commit, tierAcquired on a hit, tierEvicted and demoteAhead on
// eviction), and copies from one lower tier into the next in tierroom.go (makeRoom when
// a slot is evicted, slotResidentNow when a copy lands). A new tier (remote memory, a
// second disk) needs no code: it is one more TierSpec with its own Medium, up to MaxTiers.
type WritePolicy uint8

const (
	// WriteBack copies a block down when the tier above evicts it. On the device the index
	// starts these copies ahead of need, below TierConfig.FreeTarget free blocks (see
	// TakePlans), so that no allocation waits on one.
	WriteBack WritePolicy = iota
	// WriteThrough copies a block down as soon as the tier above holds it (on the device:
	// when it is committed).
	WriteThrough
	// WriteAfterHits copies a block down once it has been hit TierSpec.Hits times in the
	// tier above (vLLM's offloading store threshold); a block below the threshold is
	// dropped when the tier above evicts it.
	WriteAfterHits
)

// TierSpec is one lower tier.
type TierSpec struct {
	// Medium names the tier in events: MediumCPU, MediumDisk or a user's own.
	Medium string
	// Capacity is the tier's size in blocks (the device's block size and page bytes).
	Capacity int
	// Policy orders the tier's eviction (nil: evict.NewLRU); its keys are the tier's slots.
	Policy evict.Factory
	// Write is how blocks reach this tier from the tier above.
	Write WritePolicy
	// Hits is WriteAfterHits' threshold (at least 1).
	Hits uint32
}

// TierConfig configures the lower tiers (WithTiers).
type TierConfig struct {
	// Tiers are the lower tiers, fastest first: Tiers[0] is Tier 1.
	Tiers []TierSpec
	// BlockBytes is the size of one block's KV in bytes, as blocks/sizing computes it for
	// the model (Model.BlockBytes); plans carry it as byte counts.
	BlockBytes int64
	// FreeTarget is the watermark of free device blocks below which TakePlans starts
	// write-back demotions: it demotes the device's next victims until free blocks plus
	// blocks being demoted reach it. 0 starts none ahead of need. It is at most the pool's
	// capacity (New refuses more with a *SizeError: every cached block would be demoted
	// at every TakePlans, and the watermark still never reached).
	FreeTarget int
	// StreamOrdered says the server issues every plan TakePlans returns on the device's
	// copy stream before any later kernel or copy that writes device blocks, as vLLM's v0
	// swap issued a step's swap-out copies before its forward pass. A store's device
	// source is then reusable as soon as its plan is handed out: TakePlans releases it, not
	// CompleteTransfer, so blocks being demoted are unavailable only between their
	// preparation and the next TakePlans. An Index keeps a demoted block cached from then
	// on, first in its eviction order, so that an allocation evicts it (its copy counted in
	// flight, not lost) and a failed copy still finds it on the device (it stays cached,
	// as without StreamOrdered); CompleteTransfer evicts it once the copy is confirmed. A
	// GroupTree's device side is its owner's (blocktable/hybrid). Loads, and copies between
	// lower tiers, are unchanged: their sources and destinations are released at
	// completion.
	StreamOrdered bool
}

// WithTiers gives the index lower tiers: a device block the index evicts stays
// findable while a lower tier holds its KV, and a lookup continues past the device's
// match into them. kvpage moves no bytes: TakePlans returns the copies the server
// executes, and CompleteTransfer confirms them. Without WithTiers none of this costs
// anything (one nil check on commit, acquire and eviction).
func WithTiers(c TierConfig) Option { return func(cf *config) { cf.tiers = &c } }

// MaxTierCapacity bounds a tier's capacity in blocks.
const MaxTierCapacity = 1 << 30

// validate checks a tier configuration before anything is allocated.
func (c *TierConfig) validate() error {
	if len(c.Tiers) == 0 || len(c.Tiers) >= MaxTiers {
		return &SizeError{What: "lower tiers", N: int64(len(c.Tiers)), Max: MaxTiers - 1}
	}
	if c.BlockBytes < 0 || c.FreeTarget < 0 {
		return fmt.Errorf("%w: negative block bytes or free target", ErrInvalidArgument)
	}
	total := 0
	for i, s := range c.Tiers {
		if s.Capacity <= 0 || s.Capacity > MaxTierCapacity {
			return &SizeError{What: fmt.Sprintf("tier %d capacity", i+1), N: int64(s.Capacity), Max: MaxTierCapacity}
		}
		if s.Write > WriteAfterHits || (s.Write == WriteAfterHits && s.Hits == 0) {
			return fmt.Errorf("%w: tier %d write policy %d with %d hits", ErrInvalidArgument, i+1, s.Write, s.Hits)
		}
		if total += s.Capacity; total > MaxTierCapacity {
			return &SizeError{What: "lower tiers' total capacity", N: int64(total), Max: MaxTierCapacity}
		}
	}
	return nil
}

// TransferKind says which way a transfer copies.
type TransferKind uint8

const (
	// Store copies blocks down a tier (a demotion, or a write-through copy).
	Store TransferKind = iota
	// Load copies blocks from a lower tier into device blocks (a promotion on a hit).
	Load
)

// TransferID names one prepared transfer until CompleteTransfer confirms it.
type TransferID uint64

// Run is Blocks consecutive blocks copied from slots Src.. of the source tier to slots
// Dst.. of the destination tier. A device slot is a pool block ID.
type Run struct {
	Src, Dst, Blocks int32
}

// Plan is one prepared transfer: runs of contiguous blocks from one tier to another, to
// be issued as one DMA each. Runs is valid until the plan is completed.
type Plan struct {
	ID       TransferID
	Kind     TransferKind
	From, To Tier
	Runs     []Run
	Blocks   int
	Bytes    int64
}

// TierHit is a lookup's hit per tier: Blocks[Device] is the device prefix Peek found,
// and Blocks[t] for a lower tier t the blocks of the continuation past it that t will
// load (each block from the fastest tier holding it).
type TierHit struct {
	Blocks [MaxTiers]int
	// Lower is the continuation's length in blocks: the sum of the lower tiers' Blocks.
	Lower int
}

// TransferResult says what a completed transfer was.
type TransferResult struct {
	Kind     TransferKind
	From, To Tier
	Blocks   int
	// OK is the completion's outcome as the server reported it.
	OK bool
	// Sources counts the blocks read from each tier: a load from several lower tiers (a
	// host prefix continued on disk) names every one of them, From only the first.
	Sources [MaxTiers]int
}

// TierStats are one tier's counters (TierStatsOf).
type TierStats struct {
	// Resident is the blocks the tier holds now; Pending the slots reserved for copies
	// in flight into it.
	Resident, Pending int
	// Stored and Loaded count blocks confirmed copied into the tier and out of it to the
	// device; StoreFailed and LoadFailed the blocks of failed transfers.
	Stored, Loaded, StoreFailed, LoadFailed uint64
	// Evicted counts blocks the tier dropped; Lost the blocks it dropped with no copy
	// below it (for the device: evicted with no copy in a lower tier nor on its way
	// there; a StreamOrdered demotion's block evicted while its copy is in flight is
	// counted lost when that copy fails).
	Evicted, Lost uint64
	// HitBlocks counts blocks lookups found in the tier (Blocks of RecordTierLookup).
	HitBlocks uint64
	// BytesIn and BytesOut are the bytes of confirmed copies into and out of the tier.
	BytesIn, BytesOut uint64
	// Plans counts the plans that copied into the tier.
	Plans uint64
}

// ErrTransfersPending: Reset or EvictBlocks while transfers to or from a lower tier are in
// flight (or, for EvictBlocks, a write-back demotion).
var ErrTransfersPending = errors.New("prefix: transfers are in flight")

// ErrUnknownTransfer: CompleteTransfer with an ID that names no prepared transfer.
var ErrUnknownTransfer = errors.New("prefix: unknown transfer")

// ErrNoTiers: a tier call on an index built without WithTiers.
var ErrNoTiers = errors.New("prefix: the index has no lower tiers")
