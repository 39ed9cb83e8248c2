package hybrid

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// preemptScratch is Preempt's reused memory: candidates, and a release plan that counts,
// per block, how many references the planned victims drop (stamped by generation, so a
// new plan costs nothing to start).
type preemptScratch struct {
	infos   []evict.Candidate
	cands   []*seq // the candidates, as infos describes them
	ids     []blocktable.SeqID
	victims []int
	picked  []bool // candidates the policy named, to refuse one named twice
	stamp   []uint32
	drops   []int32
	gen     uint32
	visited int // table entries planned, for the tests of Preempt's cost
}

// planBegin starts an empty release plan.
func (m *Manager) planBegin() {
	p := &m.pre
	if nb := m.st.q.NumBlocks(); len(p.stamp) != nb {
		p.stamp = make([]uint32, nb)
		p.drops = make([]int32, nb)
		p.gen = 0
	}
	p.gen++
	if p.gen == 0 { // wrapped: old stamps could match again
		clear(p.stamp)
		p.gen = 1
	}
}

// planRelease adds s's release to the plan and returns how many blocks it makes free on
// top of the victims planned before: blocks whose every reference the plan now drops.
// Every unreferenced block joins the free queue, cached or not, so this is exact.
func (m *Manager) planRelease(s *seq) int {
	p := &m.pre
	gain := 0
	for g := range m.specs {
		p.visited += len(s.tables[g])
		for _, b := range s.tables[g] {
			if b == blocks.NullID {
				continue
			}
			if p.stamp[b] != p.gen {
				p.stamp[b], p.drops[b] = p.gen, 0
			}
			p.drops[b]++
			if int(p.drops[b]) == m.st.ref(b) {
				gain++
			}
		}
	}
	return gain
}

// Freeable returns how many blocks preempting (or finishing) sequence id alone would
// return to the free queue: the blocks it holds that no other sequence holds, in every
// group. Blocks shared with forks or with other sequences' prefix hits stay held. With a
// policy that is not an evict.OrderedPreemption it is kept as the sequences run
// (freeable.go) and costs O(groups); otherwise it is planned over the blocks id holds.
func (m *Manager) Freeable(id blocktable.SeqID) (int, error) {
	s, ok := m.lookup(id)
	if !ok {
		return 0, m.missing("freeable", id)
	}
	if m.kept() {
		return m.soleCount(s), nil
	}
	m.planBegin()
	return m.planRelease(s), nil
}

func (m *Manager) candidate(id blocktable.SeqID, s *seq, kept bool) evict.Candidate {
	held, free := 0, 0
	if kept {
		held, free = int(m.fa.held[s.slot]), m.soleCount(s)
	} else {
		for g := range m.specs {
			for _, b := range s.tables[g] {
				if b != blocks.NullID {
					held++
				}
			}
		}
		m.planBegin()
		free = m.planRelease(s)
	}
	return evict.Candidate{
		ID: uint64(id), Priority: s.priority, Arrival: s.arrival, Computed: s.computed,
		Output: max(0, len(s.tokens)-s.promptLen), Held: held, Freeable: free,
	}
}

// Preempt asks the preemption policy (Config.Preemption) for victims among the running
// sequences (minus req.Protect) until req.Need more blocks are in the free queue than now,
// preempts them in recompute mode, and appends one blocktable.Preempted per victim to dst,
// in the policy's order. A victim's blocks are released as Finish releases them (vLLM's
// preemption frees a request exactly as finishing does): its full blocks stay cached, so
// the scheduler admits it again later with its tokens (Tokens, read before preempting;
// Request.Resumed) and it re-hits whatever of its own blocks was not evicted meanwhile.
//
// The count is exact: every unreferenced block joins the free queue, so a victim frees the
// blocks no other sequence holds, and victims sharing blocks (forks, common hits) free
// them together. Preempt keeps the shortest prefix of the policy's order that frees at
// least req.Need, so a successful Preempt frees at least that; each candidate's
// evict.Candidate.Freeable (and Freeable) is what preempting it alone frees. When even all
// candidates together fall short, or the policy's choice does, it preempts nobody and
// returns an *blocks.OutOfBlocksError saying what they would free.
//
// req.Mode Swap needs lower tiers (Config.Tiers; else it fails with
// blocktable.ErrNoHostPool): the victims' cached blocks are held in the lower tiers
// (swap.go), those no tier holds copied into tier 1 and returned to the free queue as
// their copies complete (TakePlans, CompleteTransfer), so Preempted.Freed counts what is
// free at once and Preempted.Awaiting the rest, Freed + Awaiting adding up to at least
// req.Need. When tier 1 cannot take the victims' copies together, it preempts none and
// returns a *blocktable.SeqError (Op "swap out") naming the first victim, in the policy's
// order, at which their blocks pass tier 1's room, wrapping a *prefix.TierFullError
// (prefix.ErrTierFull) with what all the victims need and the room, as
// blocktable.Manager's Preempt does. Resume brings a victim back.
//
// Cost: with a policy that implements evict.OrderedPreemption (fcfs, priority, progress)
// the Manager keeps the running sequences in the policy's order and plans the release of
// the victims alone, so a call costs what the victims hold, however many sequences run.
// Any other policy (cost, or a user's) is given every candidate's evict.Candidate, whose
// Freeable and Held the Manager keeps as the sequences run (freeable.go): O(n log n) in
// the n running sequences (they are sorted by ID) plus what the victims hold. Only when
// the candidates' Freeable add up to less than req.Need (blocks shared among them, forks
// or common hits, may still free enough together) does it plan the release of all of
// them, a pass over the blocks they hold.
func (m *Manager) Preempt(req blocktable.PreemptRequest, dst []blocktable.Preempted) ([]blocktable.Preempted, error) {
	if req.Need < 0 || req.Mode > blocktable.Swap {
		return dst, fmt.Errorf("%w: preempt %d blocks in mode %d", errInvalid, req.Need, req.Mode)
	}
	if req.Mode == blocktable.Swap && m.st.tiers == nil {
		return dst, fmt.Errorf("hybrid: preempt: swap mode needs lower tiers (Config.Tiers): %w", blocktable.ErrNoHostPool)
	}
	if req.Need == 0 {
		return dst, nil
	}
	if m.ordered != nil && !m.fullWalk {
		return m.preemptOrdered(req, dst)
	}
	p := &m.pre
	p.cands = p.cands[:0]
	for _, s := range m.order { // the running sequences, in an order their history fixes
		if !slices.Contains(req.Protect, s.id) {
			p.cands = append(p.cands, s)
		}
	}
	// Policies see one order, ties by ID: the cost policy's own order is total (ties by
	// ID), so it needs none; any other's gets the candidates sorted by ID.
	if _, cost := m.preempt.(evict.CostPreemption); !cost {
		slices.SortFunc(p.cands, func(a, b *seq) int { return cmp.Compare(a.id, b.id) })
	}
	p.infos = p.infos[:0]
	kept, sum := m.kept(), 0
	for _, s := range p.cands {
		c := m.candidate(s.id, s, kept)
		p.infos = append(p.infos, c)
		sum += c.Freeable
	}
	// What preempting every candidate would free, blocks shared among them included: if
	// even that is short, preempt nobody. Freeable figures never overlap, so when they
	// add up to the need, so does this, and the pass is left out.
	if sum < req.Need {
		m.planBegin()
		all := 0
		for _, s := range p.cands {
			all += m.planRelease(s)
		}
		if all < req.Need {
			return dst, outOfBlocks("preempt", 0, req.Need, all)
		}
	}
	p.victims = m.preempt.Victims(p.victims[:0], p.infos, req.Need)
	// The shortest prefix of the policy's order that really frees enough: Freeable counts
	// what a sequence frees alone, so forks sharing their blocks look worthless one by one.
	m.planBegin()
	p.picked = append(p.picked[:0], make([]bool, len(p.cands))...)
	gain, k := 0, 0
	for ; k < len(p.victims) && gain < req.Need; k++ {
		i := p.victims[k]
		if i < 0 || i >= len(p.cands) || p.picked[i] {
			// Out of range, or twice: the second PreemptSeq would find it gone, after
			// the first preempted it. Refused before anything changes.
			return dst, fmt.Errorf("%w: preemption policy %s returned candidate %d of %d (or twice)", errInvalid, m.preempt.Name(), i, len(p.cands))
		}
		p.picked[i] = true
		gain += m.planRelease(p.cands[i])
	}
	if gain < req.Need {
		return dst, outOfBlocks("preempt", 0, req.Need, gain)
	}
	var pre prefix.HoldID
	if req.Mode == blocktable.Swap {
		var err error
		if pre, err = m.preHold(func(yield func(*seq) bool) {
			for _, i := range p.victims[:k] {
				if !yield(p.cands[i]) {
					return
				}
			}
		}); err != nil {
			clear(p.cands)
			return dst, err
		}
	}
	// Victims' IDs first: preempting one moves others in the running list.
	p.ids = p.ids[:0]
	for _, i := range p.victims[:k] {
		p.ids = append(p.ids, p.cands[i].id)
	}
	clear(p.cands) // no stale pointers to sequence records kept
	for _, id := range p.ids {
		v, err := m.PreemptSeq(id, req.Mode)
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: preempting a running sequence failed: %v", err))
		}
		dst = append(dst, v)
	}
	m.releasePreHold(pre)
	return dst, nil
}

// preemptOrdered is Preempt for an ordered policy: it walks the running sequences in the
// policy's order, adding each one's release to the plan, until the plan frees req.Need.
// This is the shortest prefix of the policy's order that frees enough, as the full walk
// finds: the built-in ordered policies take victims in their order until the Freeable
// sum reaches the need, and Freeable sums never exceed what the same victims free
// together, so the plan reaches the need no later. When even every candidate together
// falls short, the walk has planned them all, and the error says what they would free.
func (m *Manager) preemptOrdered(req blocktable.PreemptRequest, dst []blocktable.Preempted) ([]blocktable.Preempted, error) {
	m.planBegin()
	m.walked = m.walked[:0]
	m.frontier = m.frontier[:0]
	if len(m.order) > 0 {
		m.frontier = append(m.frontier, 0)
	}
	gain := 0
	for gain < req.Need {
		s, ok := m.orderNext()
		if !ok {
			return dst, outOfBlocks("preempt", 0, req.Need, gain)
		}
		if slices.Contains(req.Protect, s.id) {
			continue
		}
		gain += m.planRelease(s)
		m.walked = append(m.walked, s)
	}
	var pre prefix.HoldID
	if req.Mode == blocktable.Swap {
		var err error
		if pre, err = m.preHold(slices.Values(m.walked)); err != nil {
			clear(m.walked)
			return dst, err
		}
		defer m.releasePreHold(pre)
	}
	for i, s := range m.walked {
		v, err := m.PreemptSeq(s.id, req.Mode)
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: preempting a running sequence failed: %v", err))
		}
		dst = append(dst, v)
		m.walked[i] = nil
	}
	return dst, nil
}

// PreemptSeq preempts one sequence chosen by the caller: it releases every group's blocks
// (the cached ones stay cached) and forgets the sequence, as Finish. In Swap mode (lower
// tiers only; else blocktable.ErrNoHostPool) its cached blocks are held in the lower
// tiers first (copied into tier 1 where no tier holds them), and the Manager keeps its
// tokens for Resume (see Preempt); when tier 1 cannot take the copies it fails with a
// *blocktable.SeqError (Op "swap out") wrapping a *prefix.TierFullError, changing nothing.
func (m *Manager) PreemptSeq(id blocktable.SeqID, mode blocktable.PreemptMode) (blocktable.Preempted, error) {
	s, ok := m.lookup(id)
	if !ok {
		return blocktable.Preempted{}, m.missing("preempt", id)
	}
	switch mode {
	case blocktable.Recompute:
	case blocktable.Swap:
		if m.st.tiers == nil {
			return blocktable.Preempted{}, seqErr("preempt", id, blocktable.ErrNoHostPool)
		}
	default:
		return blocktable.Preempted{}, seqErr("preempt", id, errInvalid)
	}
	before := m.st.free()
	v := blocktable.Preempted{Seq: id, Mode: mode, Tokens: len(s.tokens)}
	var rec *swapRec
	if mode == blocktable.Swap {
		r, aw, err := m.swapOut(s)
		if err != nil {
			return blocktable.Preempted{}, err
		}
		rec, v.Awaiting = r, aw
	}
	m.releaseAll(s)
	if len(m.copies) > 0 {
		m.dropStaleCopies()
	}
	m.drop(id, s)
	if rec != nil {
		swapTokens(rec, s)
	}
	v.Freed = m.st.free() - before
	m.counters.Preemptions++
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return v, nil
}
