package blocktable

import (
	"fmt"
	"math"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/poolrefs"
	"github.com/kvpage/kvpage/prefix"
)

// Table is one sequence's logical-to-physical block map: token position p lives in entry
// p/B of Blocks() (integer division) at offset p%B, flat slot block x B + offset. It can be used on its own
// over a pool (no prefix caching); the Manager keeps one per sequence. Not safe for
// concurrent use.
//
// The blocks cover the tokens plus any lookahead slots reserved for draft tokens; a block
// is allocated only when the slots so far are all taken. Blocks past the last token's
// block are private to the table (never shared, never cached), so a write can only ever
// meet a shared block at the block holding the next position: at most one copy-on-write
// per Append. Every slot the table hands out for writing, the new tokens' and the reserved
// lookahead slots', lies in a block private to it: reserving copies a shared block just as
// writing does, and a Fork or Truncate that leaves the next position in a shared block
// cancels the reservation.
type Table struct {
	// The fields a decode step and a block's allocation read come first, so that they
	// share a cache line wherever the table is embedded (see blocktable's sequence).
	//
	// room is how many more tokens appendInLast may add without its checks: set when
	// they last passed (or Append's general path found them passing, setRoom), to what
	// is left of the last block, which is then the table's own (one holder), past every
	// reserved slot and outside any window. Every other call
	// that changes the table sets it to 0 (resetRoom), and so does Fork, whose child
	// shares the last block; 0 only means "check again". Only full blocks are cached,
	// so nothing else takes a second holder of a partly filled last block.
	room   int
	tokens int
	ids    []blocks.ID
	// reserved is how many lookahead slots past tokens the last Append reserved: all in
	// blocks the table alone holds, so a caller may write them (see Reserved).
	reserved int
	// nulls is how many leading entries a sliding window has released (all NullID).
	nulls  int
	pool   *blocks.Pool
	bs     int
	window int
	// release drops the table's reference on blocks: pool.Release for a plain table, the
	// prefix index's Release under a Manager (so cached blocks become evictable).
	release func([]blocks.ID) error
	// cows counts copy-on-writes, for Stats.
	cows uint64
}

// resetRoom makes the next appendInLast check the table again.
func (t *Table) resetRoom() { t.room = 0 }

// TableOption configures a Table.
type TableOption func(*Table)

// WithWindow gives the table a sliding attention window of w tokens: blocks wholly
// outside it are released and their entries point at the pool's null block. The table
// never wraps around cyclically: entries only ever turn into the null block, so a block
// shared with another table is never overwritten in place.
func WithWindow(w int) TableOption { return func(t *Table) { t.window = w } }

// NewTable returns an empty table over pool for blocks of blockSize tokens.
func NewTable(pool *blocks.Pool, blockSize int, opts ...TableOption) (*Table, error) {
	t := &Table{}
	if err := t.init(pool, blockSize, opts...); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) init(pool *blocks.Pool, blockSize int, opts ...TableOption) error {
	*t = Table{pool: pool, bs: blockSize, ids: t.ids[:0]}
	for _, o := range opts {
		o(t)
	}
	switch {
	case pool == nil:
		return fmt.Errorf("%w: nil pool", ErrInvalidArgument)
	case blockSize <= 0 || blockSize > prefix.MaxBlockSize:
		return &SizeError{Op: "new table", What: "block size", N: blockSize, Max: prefix.MaxBlockSize}
	case t.window < 0:
		return fmt.Errorf("%w: window %d", ErrInvalidArgument, t.window)
	case t.window > 0 && !pool.HasNullBlock():
		return fmt.Errorf("%w: a sliding window needs a pool with a null block", ErrInvalidArgument)
	}
	t.release = t.poolRelease
	return nil
}

func (t *Table) poolRelease(ids []blocks.ID) error { return t.pool.Release(ids...) }

// Len is the number of tokens in the table.
func (t *Table) Len() int { return t.tokens }

// Reserved is the number of lookahead slots beyond Len that the last Append reserved
// (0 after Truncate, and after a Fork that shares the block holding position Len). They
// lie in blocks the table alone holds, so the caller may write them.
func (t *Table) Reserved() int { return t.reserved }

// NumBlocks is the length of the table, null entries included.
func (t *Table) NumBlocks() int { return len(t.ids) }

// BlockSize is the number of tokens per block.
func (t *Table) BlockSize() int { return t.bs }

// Blocks returns the table's block IDs (null entries outside a sliding window included)
// without a copy: the slice is the table's own, valid until its next Append, Truncate,
// Fork or Release, so read it, do not write to it and do not keep it. It is clipped to
// its length, so that an append to it copies rather than writing into the room the table
// grows into. AppendBlocks gives a copy to change or keep.
func (t *Table) Blocks() []blocks.ID { return t.ids[:len(t.ids):len(t.ids)] }

// AppendBlocks appends the table's block IDs (null entries outside a sliding window
// included) to dst and returns the extended slice: a copy, the caller's to change or
// keep. A dst with room allocates nothing.
func (t *Table) AppendBlocks(dst []blocks.ID) []blocks.ID { return append(dst, t.ids...) }

// CopyOnWrites is the number of blocks this table copied on first write.
func (t *Table) CopyOnWrites() uint64 { return t.cows }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// grow is how many blocks must be added to cover n more tokens and lookahead slots.
func (t *Table) grow(n, lookahead int) int {
	need, have := t.tokens+n+lookahead, len(t.ids)*t.bs
	if need <= have {
		return 0 // the common decode step: no division
	}
	return ceilDiv(need-have, t.bs)
}

// needsCopy reports whether writing or reserving n > 0 slots at the end meets a shared
// block: only the block holding position Len can be shared.
func (t *Table) needsCopy(n int) bool {
	if n == 0 {
		return false
	}
	i := t.tokens / t.bs
	return i < len(t.ids) && t.pool.RefCount(t.ids[i]) > 1
}

// windowDrop is how many more leading blocks the sliding window releases before n tokens
// are appended: every block wholly before the first position that the earliest new token
// attends to, (Len - window + 1), as vLLM's sliding-window manager computes it.
func (t *Table) windowDrop() int {
	if t.window == 0 {
		return 0
	}
	first := t.tokens - t.window + 1
	if first <= 0 {
		return 0
	}
	return max(0, min(first/t.bs, len(t.ids))-t.nulls)
}

// windowFreeable is how many of the blocks windowDrop would release go back to the pool.
func (t *Table) windowFreeable(drop int) int {
	n := 0
	for _, id := range t.ids[t.nulls : t.nulls+drop] {
		if t.pool.RefCount(id) == 1 {
			n++
		}
	}
	return n
}

// appendInLast performs the common decode step, small enough to be inlined into its
// callers (which check that no lookahead is asked for, to keep it so), and reports whether
// it did: n > 0 new tokens fit in the last block, where the
// next position lies (no lookahead blocks beyond it, so no division to find it), and that
// block is the table's own (a block shared by a fork needs Append's copy-on-write).
// Sliding-window tables always take Append's general path. The caller runs the
// invariant check (Table.Append its own, the Manager its sampled check of everything).
func (t *Table) appendInLast(n int) bool {
	if uint(n-1) < uint(t.room) { // 1 <= n <= room: the checks passed for this block
		t.room -= n // reserved is 0 already (CheckInvariants)
		t.tokens += n
		return true
	}
	return t.appendInLastChecked(n)
}

// appendInLastChecked is appendInLast with its checks, and sets room when they pass.
func (t *Table) appendInLastChecked(n int) bool {
	last := len(t.ids) - 1
	if n <= 0 || t.window != 0 || t.tokens+n > len(t.ids)*t.bs ||
		t.tokens < last*t.bs || t.pool.RefCount(t.ids[last]) != 1 {
		return false
	}
	t.tokens += n
	t.reserved = 0
	t.room = len(t.ids)*t.bs - t.tokens
	return true
}

// setRoom sets room after Append's general path, to what is left of the last block when
// appendInLast's checks would pass for it (the table's own block, holding the next
// position, nothing reserved, no window), so that the decode steps after a new block take
// the short path at once. 0 otherwise.
func (t *Table) setRoom() {
	t.room = 0
	last := len(t.ids) - 1
	if last < 0 || t.window != 0 || t.reserved != 0 || t.tokens < last*t.bs ||
		t.pool.RefCount(t.ids[last]) != 1 {
		return
	}
	t.room = len(t.ids)*t.bs - t.tokens
}

// appendInNew is Append(1, 0) when the table's blocks are all full (or it has none): the
// token starts a new block, which only this table holds, so nothing is copied and the
// rest of the block is room. It reports false, having changed nothing, when the table
// has a window, or when the pool has no block for it or no slot past the table's in its
// capacity; Append then gives the answer (its error, or the window's path).
func (t *Table) appendInNew() (AppendResult, bool) {
	if t.window != 0 || t.tokens != len(t.ids)*t.bs || t.tokens >= t.pool.Capacity()*t.bs {
		return AppendResult{}, false
	}
	id, ok := poolrefs.AllocateOne(t.pool)
	if !ok {
		return AppendResult{}, false
	}
	t.ids = append(t.ids, blocks.ID(id))
	t.tokens++
	t.reserved = 0 // it was: no slot was left past the tokens
	t.room = t.bs - 1
	t.check()
	return AppendResult{NewBlocks: 1}, true
}

// Need returns how many blocks Append(n, lookahead) would allocate now, a copy-on-write
// included, without changing anything: math.MaxInt for counts Append refuses (negative,
// or beyond the pool's capacity in slots), which no pool can satisfy.
func (t *Table) Need(n, lookahead int) int {
	if t.checkSizes(n, lookahead) != nil {
		return math.MaxInt // can never be satisfied
	}
	k := t.grow(n, lookahead)
	if t.needsCopy(n + lookahead) {
		k++
	}
	return k
}

// checkSizes refuses counts that could never fit the pool, before any arithmetic on them
// can overflow: the table's live slots after the append (tokens past the released window,
// plus n, plus lookahead) must fit the pool's capacity in slots.
func (t *Table) checkSizes(n, lookahead int) error {
	if n < 0 || lookahead < 0 {
		return fmt.Errorf("%w: append %d tokens, lookahead %d", ErrInvalidArgument, n, lookahead)
	}
	limit := t.pool.Capacity() * t.bs                // < 2^31 x 2^16 (the Manager and prefix bound the block size)
	live := t.tokens - (t.nulls+t.windowDrop())*t.bs // what the window keeps
	if n > limit-live {
		return &SizeError{Op: "append", What: "tokens", N: n, Max: limit - live}
	}
	if lookahead > limit-live-n {
		return &SizeError{Op: "append", What: "lookahead", N: lookahead, Max: limit - live - n}
	}
	return nil
}

// Append adds n tokens and makes sure lookahead more slots exist, allocating a block only
// when the last one is full, copying a shared block on first write (reported in the
// result). Reserving lookahead slots in a shared block copies it too, so that every slot
// handed out for writing is the table's own; Reserved is then lookahead. With a sliding
// window, blocks that fell out of the window are released first. All or nothing: on error
// (blocks.ErrOutOfBlocks, ErrInvalidArgument, ErrTooLarge for counts beyond the pool's capacity)
// nothing changed. It allocates no memory once the table's slice has grown to its working
// size.
func (t *Table) Append(n, lookahead int) (AppendResult, error) {
	if lookahead == 0 && t.appendInLast(n) {
		t.check()
		return AppendResult{}, nil
	}
	var res AppendResult
	if err := t.checkSizes(n, lookahead); err != nil {
		return res, err
	}
	t.resetRoom()
	grow := t.grow(n, lookahead)
	cow := t.needsCopy(n + lookahead)
	need := grow
	if cow {
		need++
	}
	// Blocks that fell out of the sliding window go first, so that the allocation can
	// reuse them rather than evict cached blocks; only if the append can succeed.
	drop := t.windowDrop()
	if need > 0 {
		avail := t.pool.Available()
		if avail < need && drop > 0 {
			avail += t.windowFreeable(drop)
		}
		if avail < need {
			return res, &SeqError{Op: "append", Err: &blocks.OutOfBlocksError{Requested: need, Available: avail}}
		}
	}
	if drop > 0 {
		t.dropWindow(drop)
	}
	if need > 0 {
		before := len(t.ids)
		ids, err := t.pool.Allocate(t.ids, need)
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: pool reported %d blocks available but failed: %v", need, err))
		}
		t.ids = ids
		if cow {
			// The last allocated block becomes the private copy of the shared one.
			i := t.tokens / t.bs
			dst := t.ids[len(t.ids)-1]
			t.ids = t.ids[:len(t.ids)-1]
			src := t.ids[i]
			t.ids[i] = dst
			t.mustRelease(src)
			res.Copied, res.Copy = true, CopyOp{Src: src, Dst: dst}
			t.cows++
		}
		res.NewBlocks = len(t.ids) - before
	}
	t.tokens += n
	t.reserved = lookahead
	t.setRoom()
	t.check()
	return res, nil
}

func (t *Table) dropWindow(drop int) {
	t.resetRoom()
	for i := t.nulls; i < t.nulls+drop; i++ {
		t.mustRelease(t.ids[i])
		t.ids[i] = blocks.NullID
	}
	t.nulls += drop
}

func (t *Table) mustRelease(id blocks.ID) {
	one := [1]blocks.ID{id}
	if err := t.release(one[:]); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: table failed to release its block %d: %v", id, err))
	}
}

// Truncate cuts the table to n tokens (rejected speculative tokens) and releases the
// blocks no longer needed, lookahead reservations included: Reserved is 0 after it, and
// the next Append copies the block holding position n if it is shared (cached, or forked).
// With a sliding window, n must keep every position the next token attends to
// (ErrInvalidArgument otherwise).
func (t *Table) Truncate(n int) error {
	if n < 0 || n > t.tokens {
		return fmt.Errorf("%w: truncate to %d tokens, table has %d", ErrInvalidArgument, n, t.tokens)
	}
	if t.window > 0 && t.nulls > 0 && n-t.window+1 < t.nulls*t.bs {
		return fmt.Errorf("%w: truncate to %d tokens needs positions the sliding window released", ErrInvalidArgument, n)
	}
	t.resetRoom()
	keep := ceilDiv(n, t.bs)
	if keep < len(t.ids) {
		if err := t.release(t.ids[keep:]); err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: table failed to release its blocks: %v", err))
		}
		poisonIDs(t.ids[keep:])
		t.ids = t.ids[:keep]
	}
	t.tokens = n
	t.reserved = 0
	t.check()
	return nil
}

// Fork returns a new table sharing all of t's token blocks (one more reference each).
// Lookahead blocks past the last token are not shared: they hold nothing yet. The fork
// reserves nothing; if t's last token block is partly filled, it is now shared, so t's own
// reservation is cancelled too (Reserved 0) and its next Append copies that block first.
func (t *Table) Fork() (*Table, error) {
	c := &Table{}
	if err := t.forkInto(c); err != nil {
		return nil, err
	}
	return c, nil
}

// forkInto makes c a fork of t, reusing c's slice.
func (t *Table) forkInto(c *Table) error {
	share := ceilDiv(t.tokens, t.bs)
	live := t.ids[t.nulls:share]
	if len(live) > 0 {
		if err := t.pool.Retain(live...); err != nil {
			return fmt.Errorf("fork: %w", err)
		}
	}
	t.resetRoom() // c shares the last block now
	ids := append(c.ids[:0], t.ids[:share]...)
	*c = Table{pool: t.pool, bs: t.bs, window: t.window, ids: ids, tokens: t.tokens, nulls: t.nulls, release: c.release}
	if c.release == nil {
		c.release = c.poolRelease
	}
	if len(live) > 0 && t.tokens%t.bs != 0 {
		t.reserved = 0 // its reserved slots began in the block now shared
	}
	c.check()
	t.check()
	return nil
}

// Release releases every block of the table, in table order, and empties it.
func (t *Table) Release() error {
	live := t.ids[t.nulls:]
	if len(live) > 0 {
		if err := t.release(live); err != nil {
			return err
		}
	}
	poisonIDs(t.ids)
	t.ids = t.ids[:0]
	t.tokens = 0
	t.reserved = 0
	t.nulls = 0
	t.resetRoom()
	return nil
}

// Slot returns the flat slot of position pos: a token's, or a reserved lookahead slot's
// (pos < Len + Reserved).
func (t *Table) Slot(pos int) (int64, error) {
	if pos < 0 || pos >= t.tokens+t.reserved {
		return -1, fmt.Errorf("%w: position %d outside the table's %d tokens and %d reserved slots", ErrInvalidArgument, pos, t.tokens, t.reserved)
	}
	if pos < t.nulls*t.bs {
		return -1, fmt.Errorf("%w: position %d is outside the sliding window", ErrInvalidArgument, pos)
	}
	return int64(t.ids[pos/t.bs])*int64(t.bs) + int64(pos%t.bs), nil
}

// FillSlots writes into dst the slots of positions [from, Len+lookahead): the tokens from
// position from on, then the first lookahead reserved slots (0 <= lookahead <= Reserved),
// pads the rest of dst with -1, and returns how many it wrote. The empty tail of the last
// block is never included: only positions that hold tokens, and reserved slots the caller
// names. ErrShortBuffer when dst cannot hold them all, ErrInvalidArgument for a position
// outside [window start, Len] or a lookahead outside [0, Reserved], writing nothing
// either way. It allocates nothing.
func (t *Table) FillSlots(from, lookahead int, dst []int64) (int, error) {
	if from < t.nulls*t.bs || from > t.tokens {
		return 0, fmt.Errorf("%w: slots from position %d, table holds tokens [%d, %d)", ErrInvalidArgument, from, t.nulls*t.bs, t.tokens)
	}
	if lookahead < 0 || lookahead > t.reserved {
		return 0, fmt.Errorf("%w: %d lookahead slots, %d reserved", ErrInvalidArgument, lookahead, t.reserved)
	}
	real := t.tokens + lookahead - from
	if len(dst) < real {
		return 0, fmt.Errorf("%w: %d slots for %d positions", ErrShortBuffer, len(dst), real)
	}
	bs := int64(t.bs)
	for i := range real {
		p := from + i
		dst[i] = int64(t.ids[p/t.bs])*bs + int64(p%t.bs)
	}
	for i := real; i < len(dst); i++ {
		dst[i] = -1
	}
	return real, nil
}

// FillRow writes the block IDs into dst, pads the rest with the null block (0) and returns
// the number of blocks; ErrShortBuffer when dst is too short, having written nothing.
func (t *Table) FillRow(dst []int32) (int, error) {
	if len(dst) < len(t.ids) {
		return 0, fmt.Errorf("%w: row of %d entries for %d blocks", ErrShortBuffer, len(dst), len(t.ids))
	}
	for i, id := range t.ids {
		dst[i] = int32(id)
	}
	clear(dst[len(t.ids):])
	return len(t.ids), nil
}

// CheckInvariants verifies the table against its pool: the blocks cover the tokens;
// leading null entries are exactly the released window; every other entry is a held
// block; blocks past the last token's block are private (one holder).
func (t *Table) CheckInvariants() error {
	if t.tokens < 0 || t.tokens > len(t.ids)*t.bs {
		return fmt.Errorf("table: %d tokens in %d blocks of %d", t.tokens, len(t.ids), t.bs)
	}
	if t.nulls < 0 || t.nulls > len(t.ids) || (t.window == 0 && t.nulls != 0) {
		return fmt.Errorf("table: %d null entries in %d blocks (window %d)", t.nulls, len(t.ids), t.window)
	}
	for i, id := range t.ids {
		if i < t.nulls {
			if id != blocks.NullID {
				return fmt.Errorf("table: entry %d is %d inside the released window", i, id)
			}
			continue
		}
		if t.pool.HasNullBlock() && id == blocks.NullID {
			return fmt.Errorf("table: entry %d is the null block outside the released window", i)
		}
		rc := t.pool.RefCount(id)
		if rc < 1 {
			return fmt.Errorf("table: entry %d is block %d, which is free", i, id)
		}
		if i >= ceilDiv(t.tokens, t.bs) && rc != 1 {
			return fmt.Errorf("table: lookahead entry %d (block %d) has %d holders, want 1", i, id, rc)
		}
	}
	if t.room != 0 {
		last := len(t.ids) - 1
		if t.room < 0 || t.window != 0 || t.reserved != 0 || last < 0 || t.tokens < last*t.bs ||
			t.tokens+t.room != len(t.ids)*t.bs || t.pool.RefCount(t.ids[last]) != 1 {
			return fmt.Errorf("table: room for %d tokens past %d in %d blocks of %d (reserved %d, window %d) is not the last block's own", t.room, t.tokens, len(t.ids), t.bs, t.reserved, t.window)
		}
	}
	if t.reserved < 0 || t.reserved > len(t.ids)*t.bs-t.tokens {
		return fmt.Errorf("table: %d reserved slots past %d tokens in %d blocks of %d", t.reserved, t.tokens, len(t.ids), t.bs)
	}
	if t.reserved > 0 && t.tokens%t.bs != 0 {
		if i := t.tokens / t.bs; t.pool.RefCount(t.ids[i]) != 1 {
			return fmt.Errorf("table: reserved slots start in block %d, which has %d holders, want 1", t.ids[i], t.pool.RefCount(t.ids[i]))
		}
	}
	return nil
}

func (t *Table) check() {
	if invariant.Enabled {
		invariant.Check(t.CheckInvariants)
	}
}
