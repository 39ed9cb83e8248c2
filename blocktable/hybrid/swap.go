package hybrid

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// Swap preemption through the lower tiers, as blocktable.Manager's swapToTiers and
// Resume: the victim's cached blocks are held in the lower tiers (prefix.GroupTree.Hold,
// per (node, group)): those a lower tier holds already are kept there, the others are
// copied into tier 1 (TakePlans hands the copies out), and a held slot is evicted from no
// tier until Resume or Finish releases the hold; only a failed copy or ResetPrefixCache
// drops it. A copied block only the victim held leaves the device once its copy is
// confirmed. Its blocks are released as Finish releases them, and the Manager keeps its
// tokens until Resume admits it again, as a resumed admission that finds its prefix on
// the device, then in the tiers, and loads it. The rest (at least a partial last block,
// which no tier holds) is computed again. A swap tier 1 cannot take now is refused
// (prefix.GroupTree.HoldNeed), changing nothing.

// swapRec is what the Manager keeps of a sequence swapped into the tiers.
type swapRec struct {
	tokens    []int32
	maxTokens int
	promptLen int
	priority  int
	hit       int    // its hit at admission (SeqInfo.HitTokens)
	arrival   uint64 // its arrival, which Seq and Seqs report until Resume
	ns        prefix.Namespace
	hold      prefix.HoldID
}

// swapScratch is Swap's scratch: the blocks to hold, the copies a hold prepared, and per
// block how many of the sequences being swapped out hold it.
type swapScratch struct {
	ids, stored []blocks.ID
	cnt         []int32
	extra       int // holds not in m.swapped: Preempt's pre-hold, Resume's while it admits
	// free keeps the records of sequences resumed or finished since, each with the token
	// buffer it last held, for the next swap-out: a swap in steady state allocates
	// nothing. A swap-out moves the sequence's own buffer into its record and leaves the
	// record's old buffer to the sequence's spare record (the tokens are not copied);
	// Resume copies them into the new running record, as any admission copies its
	// prompt, and the swap record goes back here with its buffer. Each buffer has one
	// owner at a time, so a resumed sequence's appends write to no buffer a swap record
	// (or another sequence) reads.
	//
	// It keeps at most as many records as the Manager has sequences, running and swapped
	// (trimFree): a swap cycle of those sequences then finds a record for each swap-out,
	// and the buffers kept are never more than the live sequences' own, where it used to
	// keep one for the most sequences ever swapped out at once, forever.
	free []*swapRec
}

// newRec is a swap record from the free list, or a new one.
func (sw *swapScratch) newRec() *swapRec {
	if n := len(sw.free); n > 0 {
		r := sw.free[n-1]
		sw.free[n-1] = nil
		sw.free = sw.free[:n-1]
		return r
	}
	return &swapRec{}
}

// freeRec returns a record that no longer files a sequence, keeping its token buffer
// while the free list holds fewer records than live sequences (running and swapped);
// otherwise the record goes to the collector, and the list is trimmed to live (a
// swapped sequence finished leaves one sequence fewer).
func (sw *swapScratch) freeRec(r *swapRec, live int) {
	if len(sw.free) >= live {
		sw.trimFree(live)
		return
	}
	*r = swapRec{tokens: r.tokens[:0]}
	sw.free = append(sw.free, r)
}

// trimFree drops free records beyond live, the Manager's sequences (running and
// swapped), when a sequence leaves: one at a time, so that the free list, never longer
// than live before, is not after.
func (sw *swapScratch) trimFree(live int) {
	if n := len(sw.free); n > live {
		sw.free[n-1] = nil
		sw.free = sw.free[:n-1]
	}
}

// live is how many sequences the Manager files, running and swapped out: the swap free
// list's bound.
func (m *Manager) live() int { return len(m.seqs) + len(m.swapped) }

// appendSwapIDs appends s's cached blocks, every group's, to dst.
func (m *Manager) appendSwapIDs(dst []blocks.ID, s *seq) []blocks.ID {
	for g := range m.specs {
		for _, b := range s.tables[g] {
			if b != blocks.NullID && m.st.t.IsCached(b) {
				dst = append(dst, b)
			}
		}
	}
	return dst
}

// swapHold holds ids (the cached blocks of the sequences being swapped out, each listed
// once per sequence holding it) in the lower tiers, or fails with a *prefix.TierFullError
// changing nothing. The owner's side of each copy the hold prepared: a reference on the
// block, and the demotion mark when those sequences alone hold it.
func (m *Manager) swapHold(ids []blocks.ID) (prefix.HoldID, error) {
	sw := &m.swap
	if sw.cnt == nil {
		sw.cnt = make([]int32, m.st.q.NumBlocks())
	}
	h, stored, err := m.st.t.Hold(ids, sw.stored[:0])
	sw.stored = stored[:0]
	if err != nil {
		return 0, err
	}
	for _, b := range ids {
		sw.cnt[b]++
	}
	ts := m.st.tiers
	for _, b := range stored {
		if m.st.ref(b) == int(sw.cnt[b]) && !ts.demote[b] {
			ts.demote[b] = true
			ts.demoting++
		}
		must(m.st.q.Retain(b))
	}
	for _, b := range ids {
		sw.cnt[b] = 0
	}
	return h, nil
}

// swapOut holds s's cached blocks in the lower tiers (PreemptSeq's Swap mode), before its
// release, and files s as swapped out; it returns the record and how many of s's blocks
// its release leaves to copies in flight alone (Preempted.Awaiting). The caller moves s's
// tokens into the record (swapTokens) once s is dropped. It fails with a
// *blocktable.SeqError (Op "swap out") naming s, wrapping a *prefix.TierFullError,
// changing nothing, when tier 1 cannot take the copies.
func (m *Manager) swapOut(s *seq) (*swapRec, int, error) {
	sw := &m.swap
	sw.ids = m.appendSwapIDs(sw.ids[:0], s)
	h, err := m.swapHold(sw.ids)
	if err != nil {
		return nil, 0, m.swapRefused(func(yield func(*seq) bool) { yield(s) }, err)
	}
	awaiting := 0
	for _, b := range sw.ids {
		if r := m.st.t.TransferRefs(b); r > 0 && m.st.ref(b) == 1+r {
			awaiting++
		}
	}
	if m.swapped == nil {
		m.swapped = make(map[blocktable.SeqID]*swapRec)
	}
	rec := sw.newRec()
	*rec = swapRec{tokens: rec.tokens, maxTokens: s.maxTokens, promptLen: s.promptLen,
		priority: s.priority, hit: s.hit, arrival: s.arrival, ns: s.ns, hold: h}
	m.swapped[s.id] = rec
	m.tierCounts.SwapOuts++
	return rec, awaiting, nil
}

// swapTokens moves the tokens of s, swapped out and dropped (its record spare), into its
// swap record, and gives s the record's old buffer: no copy, and each buffer keeps one
// owner. After drop, so that nothing that reads s's length (the preemption order's key)
// sees it change while s is still filed.
func swapTokens(rec *swapRec, s *seq) {
	rec.tokens, s.tokens = s.tokens, rec.tokens[:0]
}

// preHold holds, for Preempt in Swap mode, every victim's blocks at once before any is
// preempted, so that one victim's copies cannot take the tier-1 room another's need (each
// victim's own hold then finds its blocks held already); the caller releases it once the
// victims hold their own. A refusal names the victim it is about (swapRefused).
func (m *Manager) preHold(victims func(yield func(*seq) bool)) (prefix.HoldID, error) {
	sw := &m.swap
	sw.ids = sw.ids[:0]
	for s := range victims {
		sw.ids = m.appendSwapIDs(sw.ids, s)
	}
	h, err := m.swapHold(sw.ids)
	if err != nil {
		return 0, m.swapRefused(victims, err)
	}
	if h != 0 {
		sw.extra++
	}
	return h, nil
}

// swapRefused is a Swap of victims (in the order they would be swapped out) refused
// with err, tier 1 full, as blocktable.Manager's checkHoldRoom reports it: a
// *blocktable.SeqError (Op "swap out") naming the first victim at which their blocks
// pass tier 1's room, wrapping err, whose *prefix.TierFullError (found with errors.As, so
// that a wrapped one counts too) has every victim's need and the room. Finding it is a
// second pass, on the refusal only. Any other error (ErrNoTiers, which the callers rule
// out first) is returned as it is.
func (m *Manager) swapRefused(victims func(yield func(*seq) bool), err error) error {
	var full *prefix.TierFullError
	if !errors.As(err, &full) {
		return err
	}
	sw := &m.swap
	sw.ids = sw.ids[:0]
	var at blocktable.SeqID
	for s := range victims {
		at = s.id
		sw.ids = m.appendSwapIDs(sw.ids, s)
		if n, _ := m.st.t.HoldNeed(sw.ids); n > full.Available {
			break
		}
	}
	return &blocktable.SeqError{Op: "swap out", Seq: at, Err: err}
}

// releasePreHold ends preHold's hold h.
func (m *Manager) releasePreHold(h prefix.HoldID) {
	if h != 0 {
		m.releaseHold(0, h)
		m.swap.extra--
	}
}

// releaseHold ends sequence id's hold on the lower tiers.
func (m *Manager) releaseHold(id blocktable.SeqID, h prefix.HoldID) {
	if err := m.st.t.ReleaseHold(h); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: releasing seq %d's hold: %v", id, err))
	}
}

// Swapped reports whether sequence id is swapped out into the lower tiers (Resume brings
// it back).
func (m *Manager) Swapped(id blocktable.SeqID) bool {
	_, ok := m.swapped[id]
	return ok
}

// Resume brings back a sequence Swap preemption put into the lower tiers: it is admitted
// again (as Request.Resumed, with its namespace, priority, maximum and every token it
// had), sharing what of its prefix the device still caches and loading what the tiers
// hold (AdmitResult.Load); the caller computes the rest. Its hold on the tiers is then
// released (the load pins what it reads). It keeps its ID and prompt length. All or
// nothing: on failure (blocks.ErrOutOfBlocks) it stays swapped out, its hold kept. It
// fails with blocktable.ErrNotRunning for a running sequence and with
// blocktable.ErrUnknownSeq for an ID the Manager does not know (never admitted, or
// finished: Finish of a swapped-out sequence forgets it), as blocktable.Manager's Resume
// does. Under
// prefix.TierConfig.StreamOrdered, once an allocation has taken the device blocks of
// copies TakePlans handed out and before their CompleteTransfer, it fails with
// blocktable.ErrSwapInFlight (in a *blocktable.SeqError), changing nothing, as
// blocktable.Manager's Resume does: those blocks are on no device and in no tier until
// confirmed, and the server resumes the sequence once they are rather than compute them
// again. Until an allocation takes them they are still cached, a device hit.
func (m *Manager) Resume(id blocktable.SeqID) (AdmitResult, error) {
	rec, ok := m.swapped[id]
	if !ok {
		if _, running := m.seqs[id]; running {
			return AdmitResult{}, seqErr("resume", id, blocktable.ErrNotRunning)
		}
		return AdmitResult{}, seqErr("resume", id, errUnknown) // never admitted, or finished
	}
	// A stream-ordered copy handed out has released its device block, and its tier slot
	// is found only once confirmed: wait for it rather than compute the block again.
	// Without StreamOrdered a copy in flight keeps its device block (a device hit), and a
	// held slot left pending with no copy anywhere is no copy to wait for: Resume computes
	// it, as blocktable.Manager.Resume does.
	if rec.hold != 0 && m.st.tiers.streamed && m.st.t.HoldInFlight(rec.hold) > 0 {
		return AdmitResult{}, &blocktable.SeqError{Op: "resume", Seq: id, Err: blocktable.ErrSwapInFlight}
	}
	delete(m.swapped, id)
	held := 0 // rec's hold, counted outside m.swapped meanwhile
	if rec.hold != 0 {
		held = 1
	}
	m.swap.extra += held
	r, err := m.AdmitTiered(id, &Request{Prompt: rec.tokens, MaxTokens: rec.maxTokens, Namespace: rec.ns,
		Priority: rec.priority, Resumed: true})
	m.swap.extra -= held
	if err != nil {
		m.swapped[id] = rec
		return AdmitResult{}, err
	}
	m.releaseHold(id, rec.hold)
	m.swap.freeRec(rec, m.live()) // its tokens were copied into the running record
	s := m.seqs[id]
	s.promptLen = rec.promptLen
	m.orderFix(s)
	m.tierCounts.SwapIns++
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return r, nil
}

// checkSwapped verifies that the tree's holds are the swapped sequences' (one each, for
// those that hold a block).
func (m *Manager) checkSwapped() error {
	n := m.swap.extra
	for _, rec := range m.swapped {
		if rec.hold != 0 {
			n++
		}
	}
	if h := m.st.t.Holds(); h != n {
		return fmt.Errorf("the tiers keep %d holds for %d swapped sequences holding blocks", h, n)
	}
	if f, l := len(m.swap.free), m.live(); f > l {
		return fmt.Errorf("the swap free list keeps %d records for %d sequences", f, l)
	}
	return nil
}
