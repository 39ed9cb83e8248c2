package kvevents

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// recording is one batch of the index's events as the Publisher keeps them on the
// index's goroutine: copied as they are (hashes and tokens with one memmove each), to be
// encoded to msgpack later by the sender goroutine, so that the allocator pays for a copy
// and not for an encoding. Its arenas are reused from batch to batch.
type recording struct {
	seq    uint64
	ts     float64
	events []recordedEvent
	hashes []byte
	tokens []int32
	mm     []string // every stored block's multimodal keys, in order
	mmLen  []int32  // how many of mm each block of an event with MM has
	mmOff  []int    // the offsets of mm's keys, for events in the (identifier, offset) form
}

// recordedEvent is one event of a recording; its slices are the next ones in the arenas.
type recordedEvent struct {
	kind      EventKind
	blocks    int32
	hashSize  int32
	blockSize int32
	parent    bool // the hashes start with the parent's hash
	mm        bool // the event has multimodal keys (mmLen holds one count per block)
	mmOff     bool // and their offsets (mmOff holds one per key)
	ns        prefix.Namespace
	group     int32 // the event's KV-cache group, when hasGroup
	hasGroup  bool
	medium    string // the event's tier ("" for the publisher's default)
}

func (r *recording) reset() {
	r.events, r.hashes, r.tokens = r.events[:0], r.hashes[:0], r.tokens[:0]
	clear(r.mm) // drop the string references
	r.mm, r.mmLen, r.mmOff = r.mm[:0], r.mmLen[:0], r.mmOff[:0]
}

// highWater is the largest batch the sender has seen, arena by arena.
type highWater struct{ events, hashes, tokens int }

// observe raises the marks to r's sizes; call it before reset.
func (w *highWater) observe(r *recording) {
	w.events = max(w.events, len(r.events))
	w.hashes = max(w.hashes, len(r.hashes))
	w.tokens = max(w.tokens, len(r.tokens))
}

// reserve grows r's arenas, on the sender's goroutine, to the largest batch seen so far
// plus a quarter, so that the index's goroutine, which fills them, does not grow them
// itself: an allocation there makes it pay garbage-collection assists. Without it each of
// the recordings a polling sender keeps in flight grew in turn on the index's goroutine.
func (r *recording) reserve(w highWater) {
	if cap(r.events) < w.events {
		r.events = make([]recordedEvent, 0, w.events+w.events/4)
	}
	if cap(r.hashes) < w.hashes {
		r.hashes = make([]byte, 0, w.hashes+w.hashes/4)
	}
	if cap(r.tokens) < w.tokens {
		r.tokens = make([]int32, 0, w.tokens+w.tokens/4)
	}
}

// Strings are immutable, so keeping the namespace's and the multimodal keys' strings is
// safe; the slices that hold them are the index's and are copied.

func (r *recording) blockStored(e *prefix.BlockStored) {
	ev := recordedEvent{
		kind: KindBlockStored, blocks: int32(len(e.Blocks)), hashSize: int32(e.HashSize),
		blockSize: int32(e.BlockSize), parent: len(e.Parent) > 0, mm: e.MM != nil, mmOff: e.MMOffsets != nil,
		ns: e.Namespace, group: int32(e.Group), hasGroup: e.HasGroup, medium: e.Medium,
	}
	r.events = append(r.events, ev)
	r.hashes = append(r.hashes, e.Parent...)
	r.hashes = append(r.hashes, e.Hashes[:len(e.Blocks)*e.HashSize]...)
	r.tokens = append(r.tokens, e.Tokens...)
	if e.MM != nil {
		for _, keys := range e.MM {
			r.mm = append(r.mm, keys...)
			r.mmLen = append(r.mmLen, int32(len(keys)))
		}
		for _, offs := range e.MMOffsets {
			r.mmOff = append(r.mmOff, offs...)
		}
	}
}

func (r *recording) blockRemoved(e *prefix.BlockRemoved) {
	r.events = append(r.events, recordedEvent{kind: KindBlockRemoved, blocks: int32(len(e.Blocks)), hashSize: int32(e.HashSize),
		group: int32(e.Group), hasGroup: e.HasGroup, medium: e.Medium})
	r.hashes = append(r.hashes, e.Hashes[:len(e.Blocks)*e.HashSize]...)
}

func (r *recording) allBlocksCleared() {
	r.events = append(r.events, recordedEvent{kind: KindAllBlocksCleared})
}

// replayer turns recordings back into the index's events, for a Batcher to encode. It
// belongs to the sender goroutine and reuses its scratch.
type replayer struct {
	ids []blocks.ID // zeros: the encoder needs only the count
	mm  [][]string
	off [][]int
	// The events handed to the observer. An event built in replay itself would escape
	// through the interface call and be allocated for every event: 40 MB a W3 trace.
	stored  prefix.BlockStored
	removed prefix.BlockRemoved
}

func (p *replayer) replay(r *recording, o prefix.Observer) {
	h, t, m, ml, mo := 0, 0, 0, 0, 0 // mo: into mmOff, which only pair-form events fill
	for i := range r.events {
		ev := &r.events[i]
		n, hs := int(ev.blocks), int(ev.hashSize)
		if len(p.ids) < n {
			p.ids = make([]blocks.ID, n)
		}
		switch ev.kind {
		case KindBlockStored:
			e := &p.stored
			*e = prefix.BlockStored{HashSize: hs, Blocks: p.ids[:n], BlockSize: int(ev.blockSize), Namespace: ev.ns,
				Group: int(ev.group), HasGroup: ev.hasGroup, Medium: ev.medium}
			if ev.parent {
				e.Parent = r.hashes[h : h+hs]
				h += hs
			}
			e.Hashes = r.hashes[h : h+n*hs]
			h += n * hs
			e.Tokens = r.tokens[t : t+n*int(ev.blockSize)]
			t += n * int(ev.blockSize)
			if ev.mm {
				p.mm, p.off = p.mm[:0], p.off[:0]
				for range n {
					k := int(r.mmLen[ml])
					p.mm = append(p.mm, r.mm[m:m+k:m+k])
					if ev.mmOff {
						p.off = append(p.off, r.mmOff[mo:mo+k:mo+k])
						mo += k
					}
					m += k
					ml++
				}
				e.MM = p.mm
				if ev.mmOff {
					e.MMOffsets = p.off
				}
			}
			o.BlockStored(e)
		case KindBlockRemoved:
			p.removed = prefix.BlockRemoved{Hashes: r.hashes[h : h+n*hs], HashSize: hs, Blocks: p.ids[:n],
				Group: int(ev.group), HasGroup: ev.hasGroup, Medium: ev.medium}
			o.BlockRemoved(&p.removed)
			h += n * hs
		case KindAllBlocksCleared:
			o.AllBlocksCleared()
		}
	}
}
