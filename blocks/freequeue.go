package blocks

import (
	"fmt"
	"iter"
)

// FreeQueue is vLLM's free block queue (FreeKVCacheBlockQueue) with the blocks' reference
// counts: every block no one holds, cached or not, waits in one queue in the order it was
// freed. Release appends a block whose last holder leaves (ReleaseToFront puts it at the
// front instead, for a block with nothing cached in it: vLLM's newer order); Retain of a
// queued block (a prefix hit on a cached block no one held) unlinks it from wherever it
// is; Pop hands out the front. Block 0 is the null block: never queued, never held.
//
// It differs from Pool in what a free block is. In a Pool, cached blocks stay held by the
// prefix index and the free list has only empty blocks, so that the index's eviction
// policy decides what goes; in a FreeQueue, a cached block with no holder is free and its
// place in the queue is its eviction order, as in vLLM. The owner of a FreeQueue evicts
// the cached block Pop hands out (prefix.GroupTree's Uncache): the queue knows no tokens
// and no cache.
//
// Every operation is O(1) and allocates nothing; metadata is 12 bytes a block with no
// pointer. Bad input (the null block, an unknown ID, a double free, a retain past
// MaxRefCount, a Pop of an empty queue) returns a typed error and changes nothing. A
// FreeQueue is not safe for concurrent use.
type FreeQueue struct {
	b          []qlink
	head, tail int32 // -1 when empty
	n          int
}

// qlink is a block's refcount and its links in the queue (-1 at the ends). A block is in
// the queue exactly when its refcount is 0 (the null block aside).
type qlink struct {
	ref, prev, next int32
}

const qnone = -1

// NewFreeQueue returns a queue over numBlocks blocks, block 0 the null block and blocks 1
// to numBlocks-1 queued in ascending order, so that a new queue hands out ascending IDs.
// The error wraps ErrInvalidArgument unless 2 <= numBlocks <= 2^31-1.
func NewFreeQueue(numBlocks int) (*FreeQueue, error) {
	if numBlocks < 2 || numBlocks > 1<<31-1 {
		return nil, fmt.Errorf("%w: free queue of %d blocks (block 0 is the null block)", ErrInvalidArgument, numBlocks)
	}
	q := &FreeQueue{b: make([]qlink, numBlocks), head: qnone, tail: qnone}
	q.b[NullID] = qlink{ref: 0, prev: qnone, next: qnone}
	for i := 1; i < numBlocks; i++ {
		q.b[i] = qlink{prev: int32(i - 1), next: int32(i + 1)}
	}
	q.b[1].prev, q.b[numBlocks-1].next = qnone, qnone
	q.head, q.tail, q.n = 1, int32(numBlocks-1), numBlocks-1
	return q, nil
}

// NumBlocks is the number of blocks, the null block included.
func (q *FreeQueue) NumBlocks() int { return len(q.b) }

// Len is the number of blocks in the queue: no holder, cached or not.
func (q *FreeQueue) Len() int { return q.n }

// RefCount returns the holders of id (0 for a queued block, the null block or an unknown
// ID).
func (q *FreeQueue) RefCount(id ID) int {
	if uint(id) >= uint(len(q.b)) {
		return 0 // the null block's count stays 0
	}
	return int(q.b[id].ref)
}

// Front returns the block Pop would hand out, or NullID when the queue is empty.
func (q *FreeQueue) Front() ID {
	if q.head == qnone {
		return NullID
	}
	return ID(q.head)
}

// All yields the queued blocks from the front: the order Pop hands them out.
func (q *FreeQueue) All() iter.Seq[ID] {
	return func(yield func(ID) bool) {
		for b := q.head; b != qnone; b = q.b[b].next {
			if !yield(ID(b)) {
				return
			}
		}
	}
}

// Pop takes the front block out of the queue and gives it one holder. When the queue is
// empty it returns an *OutOfBlocksError.
func (q *FreeQueue) Pop() (ID, error) {
	b := q.head
	if b == qnone {
		return NullID, &OutOfBlocksError{Requested: 1}
	}
	q.unlink(b)
	q.b[b].ref = 1
	return ID(b), nil
}

// Allocate appends the n blocks at the queue's front to dst, each with one holder, and
// returns it: n Pops in one call. It is all or nothing: when fewer than n blocks are
// queued it returns dst unchanged and an *OutOfBlocksError. It allocates no memory when
// dst has room.
func (q *FreeQueue) Allocate(dst []ID, n int) ([]ID, error) {
	if n < 0 {
		return dst, &CountError{Op: "allocate", N: n}
	}
	if n > q.n {
		return dst, &OutOfBlocksError{Requested: n, Available: q.n}
	}
	b := q.b
	for range n {
		h := q.head
		x := &b[h]
		q.head = x.next
		x.ref, x.next = 1, qnone
		dst = append(dst, ID(h))
	}
	if q.head != qnone {
		b[q.head].prev = qnone
	} else {
		q.tail = qnone
	}
	q.n -= n
	return dst, nil
}

// Retain adds a holder to id, taking it out of the queue (from wherever it is) if it had
// none: a prefix hit on a cached block. It fails with a *BlockError for the null block, an
// unknown ID, or a block with MaxRefCount holders.
func (q *FreeQueue) Retain(id ID) error {
	if uint(id)-1 >= uint(len(q.b))-1 {
		return q.blockError("retain", id, nil)
	}
	x := &q.b[id]
	if x.ref == MaxRefCount {
		return q.blockError("retain", id, ErrRefCountOverflow)
	}
	if x.ref == 0 {
		q.unlink(int32(id))
	}
	x.ref++
	return nil
}

// RetainTable adds a holder to every non-null block of ids (a request's hit, taken as
// one), each taken out of the queue if it had none, in order. It is all or nothing: an
// unknown ID, or a block within len(ids) holders of MaxRefCount, fails the call with a
// *BlockError before anything changes.
func (q *FreeQueue) RetainTable(ids []ID) error {
	b := q.b
	limit := int32(MaxRefCount - min(len(ids), MaxRefCount))
	for _, id := range ids {
		if id != NullID && (uint(id) >= uint(len(b)) || b[id].ref > limit) {
			return q.blockError("retain", id, ErrRefCountOverflow)
		}
	}
	for _, id := range ids {
		if id == NullID {
			continue
		}
		x := &b[id]
		if x.ref == 0 {
			q.unlink(int32(id))
		}
		x.ref++
	}
	return nil
}

// Release drops a holder of id; a block whose last holder leaves joins the queue's end.
// It fails with a *BlockError (ErrDoubleFree for a block no one holds).
func (q *FreeQueue) Release(id ID) error {
	if id <= NullID || int(id) >= len(q.b) || q.b[id].ref <= 0 {
		return q.blockError("release", id, ErrDoubleFree)
	}
	x := &q.b[id]
	if x.ref--; x.ref == 0 {
		q.pushBack(int32(id))
	}
	return nil
}

// ReleaseTable drops one holder of every block of a request's table, from the last to
// the first, as vLLM frees a request (so that its later blocks, the least shared, are
// evicted first); each block whose last holder leaves joins the queue's end at that point.
// Null entries (table slots outside a sliding window) are skipped. It is all or nothing: a
// block released more often than it is held fails the call with a *BlockError and changes
// nothing.
func (q *FreeQueue) ReleaseTable(ids []ID) error {
	b := q.b
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		if id == NullID {
			continue
		}
		if uint(id) >= uint(len(b)) || b[id].ref <= 0 {
			q.undoRelease(ids[i+1:])
			return q.blockError("release", id, ErrDoubleFree)
		}
		x := &b[id]
		if x.ref--; x.ref == 0 {
			q.pushBack(int32(id))
		}
	}
	return nil
}

// undoRelease gives back the holders ReleaseTable took from done; the blocks that joined
// the queue are its last ones, so taking them out restores its order.
func (q *FreeQueue) undoRelease(done []ID) {
	for _, id := range done {
		if id == NullID {
			continue
		}
		if q.b[id].ref == 0 {
			q.unlink(int32(id))
		}
		q.b[id].ref++
	}
}

// ReleaseToFront is Release, but a block whose last holder leaves joins the queue's front,
// to be reused before any other: vLLM's order for a block with nothing cached in it
// (vLLM PRs #42656, #43447).
func (q *FreeQueue) ReleaseToFront(id ID) error {
	if id <= NullID || int(id) >= len(q.b) || q.b[id].ref <= 0 {
		return q.blockError("release", id, ErrDoubleFree)
	}
	x := &q.b[id]
	if x.ref--; x.ref == 0 {
		q.pushFront(int32(id))
	}
	return nil
}

// blockError names what is wrong with id: unknown, the null block, or else err.
func (q *FreeQueue) blockError(op string, id ID, err error) error {
	switch {
	case id < 0 || int(id) >= len(q.b):
		err = ErrUnknownBlock
	case id == NullID:
		err = ErrNullBlock
	}
	return &BlockError{Op: op, ID: id, Err: err}
}

func (q *FreeQueue) pushBack(b int32) {
	x := &q.b[b]
	x.prev, x.next = q.tail, qnone
	if q.tail != qnone {
		q.b[q.tail].next = b
	} else {
		q.head = b
	}
	q.tail = b
	q.n++
}

func (q *FreeQueue) pushFront(b int32) {
	x := &q.b[b]
	x.prev, x.next = qnone, q.head
	if q.head != qnone {
		q.b[q.head].prev = b
	} else {
		q.tail = b
	}
	q.head = b
	q.n++
}

func (q *FreeQueue) unlink(b int32) {
	x := &q.b[b]
	if x.prev != qnone {
		q.b[x.prev].next = x.next
	} else {
		q.head = x.next
	}
	if x.next != qnone {
		q.b[x.next].prev = x.prev
	} else {
		q.tail = x.prev
	}
	x.prev, x.next = qnone, qnone
	q.n--
}

// CheckInvariants verifies the queue and returns the first violation: the links agree
// both ways from the front to the back with no cycle, the queued blocks are exactly those
// with no holder (the null block never), no refcount is negative, and the length is
// counted. It is O(blocks) and allocates nothing.
func (q *FreeQueue) CheckInvariants() error {
	if x := q.b[NullID]; x.ref != 0 || x.prev != qnone || x.next != qnone || q.head == 0 || q.tail == 0 {
		return fmt.Errorf("the null block is held or queued")
	}
	count, prev := 0, int32(qnone)
	for b := q.head; b != qnone; b = q.b[b].next {
		if b <= 0 || int(b) >= len(q.b) {
			return fmt.Errorf("free queue links to block %d", b)
		}
		if q.b[b].prev != prev || q.b[b].ref != 0 {
			return fmt.Errorf("free queue broken at block %d", b)
		}
		if count++; count > len(q.b) {
			return fmt.Errorf("free queue has a cycle")
		}
		prev = b
	}
	if prev != q.tail {
		return fmt.Errorf("free queue ends at %d, tail %d", prev, q.tail)
	}
	zero := 0
	for b := 1; b < len(q.b); b++ {
		switch r := q.b[b].ref; {
		case r < 0:
			return fmt.Errorf("block %d has refcount %d", b, r)
		case r == 0:
			zero++
		}
	}
	if count != q.n || zero != q.n {
		return fmt.Errorf("free queue: %d linked, %d counted, %d without a holder", count, q.n, zero)
	}
	return nil
}
