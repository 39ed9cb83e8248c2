package prefix

import (
	"fmt"
	"strconv"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// RetentionRange gives the blocks of a token range of a prompt their own retention, as
// TensorRT-LLM's TokenRangeRetentionConfig does: a priority and a duration, here on the
// index's logical clock. A block takes the retention of the range of
// Prompt.RetentionRanges that contains its first token; blocks in no range take
// Prompt.Retention. The ranges of a prompt may come in any order but must not overlap
// (ranges that touch, [a, b) and [b, c), do not), and at most one, the last in token
// order, may run to the end (End 0): Commit refuses ranges that overlap with
// ErrRangesOverlap, changing nothing, as TensorRT-LLM's KvCacheRetentionConfig refuses
// them ("Token ranges must be non-overlapping"), rather than let one win.
type RetentionRange struct {
	// Start and End delimit the range in tokens, [Start, End); End 0 means to the end of
	// the sequence, generated tokens included.
	Start, End int
	// Priority is 1 (evicted first) to 100 (kept longest); 0 means evict.DefaultPriority.
	// Commit refuses 101-255, a negative bound and an empty range with ErrInvalidArgument
	// (Validate).
	Priority uint8
	// Duration is how many ticks of the index's clock after the commit the priority lasts;
	// 0 means for as long as the block is cached.
	Duration uint64
}

// Validate is the one rule for a retention priority, which Index.Commit, SetRetention
// and HoldSession, and blocktable's Admit, CanAdmit and FinishTurn apply before they change
// anything: Priority is at most evict.MaxPriority (0, the default, included). A policy would
// silently take 101-255 as MaxPriority, so a caller asking for one asks for something no
// policy gives (TensorRT-LLM's scale, which evict's follows, ends at 100). Until may be any
// logical time (0 is never). The error wraps ErrInvalidArgument and names the value.
func (r Retention) Validate() error {
	if r.Priority > evict.MaxPriority {
		return priorityError(r.Priority)
	}
	return nil
}

// Validate is Retention.Validate's rule for a range, with its bounds: Start and End are
// not negative, and End (unless 0, to the end of the sequence) is after Start, as
// TensorRT-LLM's TokenRangeRetentionConfig requires. Any Duration is taken: one that would
// run past the end of the clock lasts as long as the block is cached.
func (r RetentionRange) Validate() error {
	if r.Priority > evict.MaxPriority {
		return priorityError(r.Priority)
	}
	if r.Start < 0 || r.End < 0 || (r.End != 0 && r.End <= r.Start) {
		return fmt.Errorf("%w: retention range [%d, %d): a negative bound or an empty range", ErrInvalidArgument, r.Start, r.End)
	}
	return nil
}

func priorityError(p uint8) error {
	return fmt.Errorf("%w: retention priority %d above evict.MaxPriority (%d)", ErrInvalidArgument, p, evict.MaxPriority)
}

// ErrRangesOverlap: two of a prompt's RetentionRanges share a token (an open range, End 0,
// overlaps every range that starts at or after its Start). It wraps ErrInvalidArgument.
var ErrRangesOverlap = fmt.Errorf("%w: retention ranges overlap", ErrInvalidArgument)

// MaxRetentionRanges is the most RetentionRanges a Prompt may give. A commit reads every
// range for each block it stores (retentionAt) and the overlap check compares unsorted
// ranges pair by pair, so a prompt's ranges are bounded like any other size a caller
// gives: TensorRT-LLM's retention configs hold a handful (a system prompt, a few turns).
const MaxRetentionRanges = 1024

// validateRetention applies Validate to p's retention and each of its ranges, refuses more
// than MaxRetentionRanges ranges (a *SizeError) and ranges that overlap
// (ErrRangesOverlap).
func (p *Prompt) validateRetention() error {
	if err := p.Retention.Validate(); err != nil {
		return err
	}
	if n := len(p.RetentionRanges); n > MaxRetentionRanges {
		return &SizeError{What: "retention ranges", N: int64(n), Max: MaxRetentionRanges}
	}
	for i := range p.RetentionRanges {
		if err := p.RetentionRanges[i].Validate(); err != nil {
			return err
		}
	}
	return rangesDisjoint(p.RetentionRanges)
}

// rangesDisjoint reports the first pair of rs that overlap, as an error wrapping
// ErrRangesOverlap; rs are valid ranges (Validate). Ranges in Start order, the usual
// case, take one pass; others are compared pair by pair, without sorting the caller's
// slice or a copy of it, at a cost of the same order as committing a block per range
// (retentionAt reads every range for each block).
func rangesDisjoint(rs []RetentionRange) error {
	sorted := true
	for i := 1; i < len(rs); i++ {
		if rs[i].Start < rs[i-1].Start {
			sorted = false
			break
		}
	}
	if sorted {
		for i := 1; i < len(rs); i++ {
			if overlap(&rs[i-1], &rs[i]) {
				return overlapError(&rs[i-1], &rs[i])
			}
		}
		return nil
	}
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if overlap(&rs[i], &rs[j]) {
				return overlapError(&rs[i], &rs[j])
			}
		}
	}
	return nil
}

// overlap reports whether a and b (valid ranges) share a token; End 0 runs to the end.
func overlap(a, b *RetentionRange) bool {
	return (b.End == 0 || a.Start < b.End) && (a.End == 0 || b.Start < a.End)
}

func overlapError(a, b *RetentionRange) error {
	return fmt.Errorf("%w: [%d, %s) and [%d, %s)", ErrRangesOverlap, a.Start, rangeEnd(a.End), b.Start, rangeEnd(b.End))
}

func rangeEnd(e int) string {
	if e == 0 {
		return "end"
	}
	return strconv.Itoa(e)
}

// retentionAt is the retention of block b of p committed at time t.
func (p *Prompt) retentionAt(b, bs int, t uint64) Retention {
	if len(p.RetentionRanges) == 0 {
		return p.Retention
	}
	first := b * bs
	for i := len(p.RetentionRanges) - 1; i >= 0; i-- {
		r := &p.RetentionRanges[i]
		if first >= r.Start && (r.End == 0 || first < r.End) {
			ret := Retention{Priority: r.Priority}
			if r.Duration != 0 {
				ret.Until = t + r.Duration
				if ret.Until < t { // past the clock's end: for as long as it is cached
					ret.Until = 0
				}
			}
			return ret
		}
	}
	return p.Retention
}

// needsUntil reports whether committing p can give a block a time limit.
func (p *Prompt) needsUntil() bool {
	if p.Retention.Until != 0 {
		return true
	}
	for i := range p.RetentionRanges {
		if p.RetentionRanges[i].Duration != 0 {
			return true
		}
	}
	return false
}

// SetRetention gives the cached blocks of ids retention r now (re-ranking those that are
// eviction candidates), as if they had been committed with it; blocks that are not cached
// are skipped. It returns how many blocks it changed. A retention that Validate refuses is
// refused with its error (ErrInvalidArgument), changing nothing.
func (x *Index) SetRetention(ids []blocks.ID, r Retention) (int, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	return x.setRetention(ids, r), nil
}

func (x *Index) setRetention(ids []blocks.ID, r Retention) int {
	if r.Until != 0 && x.until == nil {
		x.until = make([]uint64, x.nb+1)
	}
	n := 0
	for _, id := range ids {
		if !x.IsCached(id) {
			continue
		}
		nd := nodeOf(id)
		x.retain(nd, r)
		if evictable(&x.nodes[nd]) {
			x.evAdd(nd)
		}
		n++
	}
	x.mutated()
	return n
}

// PinResult says how much of a Pin was granted.
type PinResult struct {
	// Granted is how many of the blocks asked for are pinned now: always a prefix of them,
	// since a block is only worth keeping with the blocks before it.
	Granted int
	// Refused is how many were not, for lack of pin budget (WithPinBudget).
	Refused int
}

// WithPinBudget caps how many distinct blocks Pin may hold at once (0, the default,
// refuses every pin). Pinned blocks cannot be evicted, so the budget is memory taken
// from the cache for good; a pin beyond it is granted in part or refused (PinResult).
func WithPinBudget(n int) Option { return func(c *config) { c.pinBudget = n } }

// Pin keeps the cached blocks ids (a path from a namespace root, as Peek returns it, for
// a system prompt say) from eviction until Unpin: the index holds a reference on each, so
// they are neither evictable nor reclaimable. Blocks already pinned cost no budget (the
// pins count per block); the rest are pinned in order while the budget lasts, and the
// result says how many were granted. A block that is not cached fails the call with
// ErrNotCached and pins nothing.
func (x *Index) Pin(ids []blocks.ID) (PinResult, error) {
	for _, id := range ids {
		if !x.IsCached(id) {
			return PinResult{}, &BlockError{Op: "pin", ID: id, Err: ErrNotCached}
		}
	}
	c := &x.ctl
	if c.pins == nil && len(ids) > 0 {
		c.pins = make([]uint32, x.nb)
	}
	granted, spent := 0, 0
	for _, id := range ids {
		if c.pins[id] == 0 {
			if c.pinned+spent >= x.cfg.pinBudget {
				break
			}
			spent++
		}
		c.pins[id]++ // counted before Acquire so that a repeated id in ids costs once
		granted++
	}
	for _, id := range ids[:granted] {
		c.pins[id]-- // restored: Acquire may not fail, but the count must match it
	}
	if granted > 0 {
		if err := x.Acquire(ids[:granted]); err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: pinning cached blocks failed: %v", err))
		}
		for _, id := range ids[:granted] {
			if c.pins[id] == 0 {
				c.pinned++
			}
			c.pins[id]++
		}
	}
	return PinResult{Granted: granted, Refused: len(ids) - granted}, nil
}

// Unpin drops one pin from each of ids (the blocks a Pin granted). All or nothing: a
// block without a pin fails the call with ErrNotPinned and unpins nothing. A pinned block
// that EvictBlocks dropped stays pinned, out of the cache, until its last Unpin hands it
// back to the pool.
func (x *Index) Unpin(ids []blocks.ID) error {
	c := &x.ctl
	for i, id := range ids {
		if id < 0 || int(id) >= x.nb || c.pins == nil || int(c.pins[id]) <= countOf(ids[:i], id) {
			return &BlockError{Op: "unpin", ID: id, Err: ErrNotPinned}
		}
	}
	for _, id := range ids {
		c.pins[id]--
		if c.pins[id] == 0 {
			c.pinned--
		}
	}
	if err := x.Release(ids); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: unpinning pinned blocks failed: %v", err))
	}
	return nil
}

func countOf(ids []blocks.ID, id blocks.ID) int {
	n := 0
	for _, b := range ids {
		if b == id {
			n++
		}
	}
	return n
}

// Pins is the number of pins on block id (each holds one reference on it).
func (x *Index) Pins(id blocks.ID) int {
	if x.ctl.pins == nil || id < 0 || int(id) >= x.nb {
		return 0
	}
	return int(x.ctl.pins[id])
}

// Pinned is the number of distinct blocks pinned now; PinBudget caps it.
func (x *Index) Pinned() int { return x.ctl.pinned }

// PinBudget is the most blocks Pin may hold at once (WithPinBudget).
func (x *Index) PinBudget() int { return x.cfg.pinBudget }

// SessionID names a session: the turns of one conversation or agent run.
type SessionID uint64

// SessionPriority is the retention priority HoldSession gives a paused session's blocks:
// above the default and below a pinned prompt's usual 100, so that a pause protects a
// session's context against ordinary traffic but not against what an operator pinned.
const SessionPriority = 80

// session is what HoldSession protects: a path of blocks, each with the generation it
// had, so that a block evicted and reused since is left alone.
type session struct {
	ids  []blocks.ID
	gens []uint64
	prio uint8
}

// HoldSession protects the cached blocks of ids (a session's context when a turn ends)
// with retention r, typically {Priority: SessionPriority, Until: now + pause}: through the
// policy seam, so that a policy reading priorities ("priority") keeps them over default
// blocks until the pause ends (then they lapse to the default on their own) or
// ReleaseSession. A new hold of the same session replaces the last one (its blocks lapse
// to the default first). Uncached blocks are skipped. It returns how many blocks it holds.
// A retention that Validate refuses is refused with its error (ErrInvalidArgument),
// changing nothing: the session's last hold, if any, stays.
func (x *Index) HoldSession(id SessionID, ids []blocks.ID, r Retention) (int, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	c := &x.ctl
	if c.sessions == nil {
		c.sessions = make(map[SessionID]*session)
	}
	s := c.sessions[id]
	if s != nil {
		x.lapse(s)
	} else {
		s = &session{}
		c.sessions[id] = s
	}
	s.ids, s.gens, s.prio = s.ids[:0], s.gens[:0], r.Priority
	for _, b := range ids {
		if x.IsCached(b) {
			s.ids = append(s.ids, b)
			s.gens = append(s.gens, x.nodes[nodeOf(b)].gen)
		}
	}
	x.setRetention(s.ids, r)
	return len(s.ids), nil
}

// ReleaseSession ends a session's hold at once (the conversation is over): its blocks
// that still have the session's retention go back to the default priority. It returns
// how many blocks it released, and false for a session that holds nothing.
func (x *Index) ReleaseSession(id SessionID) (int, bool) {
	s, ok := x.ctl.sessions[id]
	if !ok {
		return 0, false
	}
	n := x.lapse(s)
	delete(x.ctl.sessions, id)
	x.mutated()
	return n, true
}

// Sessions is the number of sessions holding blocks (expired holds included until
// released or replaced: their blocks are back at the default priority already).
func (x *Index) Sessions() int { return len(x.ctl.sessions) }

// lapse puts the blocks of s that are still the same blocks with the session's priority
// back to the default retention.
func (x *Index) lapse(s *session) int {
	n := 0
	for i, b := range s.ids {
		nd := nodeOf(b)
		if x.nodes[nd].gen != s.gens[i] || x.nodes[nd].flags&flagCached == 0 || x.nodes[nd].prio != s.prio {
			continue
		}
		x.retain(nd, Retention{})
		if evictable(&x.nodes[nd]) {
			x.evAdd(nd)
		}
		n++
	}
	return n
}
