package blocktable

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// freeable is how many blocks preempting s alone would make available, sharing taken into
// account: uncached blocks it alone holds, and cached blocks its release would unpin (that
// only it holds and that lie above no block held by another sequence, and the ancestors
// they leave unpinned). Freeable figures of different sequences never overlap, so victims
// whose Freeable add up to a need free at least that much together.
func (m *Manager) freeable(s *sequence) int {
	m.planBegin()
	return m.planRelease(s)
}

func (m *Manager) info(s *sequence, sole bool) evict.Candidate {
	f := 0
	if sole {
		f = m.soleHeld(s)
	} else {
		f = m.freeable(s)
	}
	return evict.Candidate{
		ID:       uint64(s.id),
		Priority: s.priority,
		Arrival:  s.arrival,
		Computed: len(s.tokens),
		Output:   max(0, len(s.tokens)-s.promptLen),
		Held:     len(s.t.ids) - s.t.nulls,
		Freeable: f,
	}
}

// Preempt asks the preemption policy for victims among the running sequences (minus
// req.Protect), in its order, until req.Need more blocks are available (free or
// reclaimable) than now, preempts them in req.Mode, and appends one Preempted per victim
// to dst. When even all candidates together cannot free enough, or the policy's choice
// cannot, it preempts none and returns an *blocks.OutOfBlocksError; when, in Swap mode,
// tier 1 cannot take the victims' blocks (prefix.Index.HoldNeed), it preempts none and
// returns a *SeqError (Op "swap out") naming the first victim, in the policy's order, at
// which their blocks pass tier 1's room, wrapping a *prefix.TierFullError
// (prefix.ErrTierFull) with what all the victims need and the room. The count is exact: what releasing
// the victims makes free (uncached blocks left with no holder) or reclaimable (cached
// blocks left with no holder and nothing held below them, and the ancestors they unpin, as
// prefix.Index.Reclaimable counts). In Recompute mode, after a successful Preempt at least
// req.Need more blocks are Available. In Swap mode the victims' Freed + Awaiting add up to
// at least req.Need: Freed blocks are available at once, Awaiting ones once their copies
// into tier 1 are done (handed out by TakePlans under prefix.TierConfig.StreamOrdered,
// confirmed by CompleteTransfer otherwise).
//
// Cost: with a policy that implements evict.OrderedPreemption (fcfs, priority, progress)
// the Manager keeps the running sequences in the policy's order and plans the release of
// the victims alone, so a call costs what the victims hold, however many sequences run.
// Any other policy (cost, or a user's) is given every candidate's evict.Candidate; its
// Freeable is found by a binary search over the candidate's table (freeable.go), so a
// call costs O(n log n) in the n running sequences, except after a duplicate commit
// tangled a sequence's path or under a sliding window, when it takes a pass over the
// blocks each candidate holds.
func (m *Manager) Preempt(req PreemptRequest, dst []Preempted) ([]Preempted, error) {
	if req.Need < 0 || req.Mode > Swap {
		return dst, fmt.Errorf("%w: preempt %d blocks in mode %d", ErrInvalidArgument, req.Need, req.Mode)
	}
	if req.Mode == Swap && !m.tiered {
		return dst, &SeqError{Op: "preempt", Err: ErrSwapNeedsTiers}
	}
	if req.Need == 0 {
		return dst, nil
	}
	if m.ordered != nil {
		return m.preemptOrdered(req, dst)
	}
	sole := m.soleFreeable()
	_, cost := m.preempt.(evict.CostPreemption)
	m.infos, m.infoIDs = m.infos[:0], m.infoIDs[:0]
	for _, s := range m.order { // the running sequences
		if slices.Contains(req.Protect, s.id) {
			continue
		}
		m.infos = append(m.infos, m.info(s, sole))
		m.infoIDs = append(m.infoIDs, s.id)
	}
	// What preempting every candidate would free, blocks shared among candidates (forks,
	// common prefix hits) included: if even that is short, preempt nobody. The cost policy
	// returns every candidate when their Freeable falls short of the need, and the plan
	// below then covers them all and fails with the same figure, so with Freeable counted
	// without a walk this pass over every held block is left to that rare case.
	if !sole || !cost {
		m.planBegin()
		all := 0
		for _, id := range m.infoIDs {
			all += m.planRelease(m.seqs[id])
		}
		if all < req.Need {
			return dst, &SeqError{Op: "preempt", Err: &blocks.OutOfBlocksError{Requested: req.Need, Available: all}}
		}
	}
	// The list's order depends on the history: sort candidates by ID so that policies see
	// one order. The cost policy's order is total (ties by ID), so it needs none.
	if !cost {
		sortInfos(m.infos, m.infoIDs)
	}
	m.victims = m.preempt.Victims(m.victims[:0], m.infos, req.Need)
	// Keep the shortest prefix of the policy's order that really frees enough. Freeable
	// counts what a sequence frees alone, so two forks sharing their blocks look worthless
	// one by one; the policy then returns every candidate, in its order, and the prefix
	// stops as soon as the shared blocks come free.
	m.planBegin()
	gain, k := 0, 0
	m.gains = m.gains[:0]
	for ; k < len(m.victims) && gain < req.Need; k++ {
		g := m.planRelease(m.seqs[m.infoIDs[m.victims[k]]])
		gain += g
		m.gains = append(m.gains, g)
	}
	if gain < req.Need {
		return dst, &SeqError{Op: "preempt", Err: &blocks.OutOfBlocksError{Requested: req.Need, Available: gain}}
	}
	m.victims = m.victims[:k]
	if req.Mode == Swap {
		m.walked = m.walked[:0]
		for _, i := range m.victims {
			m.walked = append(m.walked, m.seqs[m.infoIDs[i]])
		}
		err := m.checkHoldRoom(m.walked)
		clear(m.walked)
		if err != nil {
			return dst, err
		}
	}
	for j, i := range m.victims {
		s, _ := m.running("preempt", m.infoIDs[i])
		dst = append(dst, m.preemptSeq(s, req.Mode, m.gains[j]))
	}
	return dst, nil
}

// preemptOrdered is Preempt for an ordered policy: it walks the running sequences in the
// policy's order, adding each one's release to the plan, until the plan frees req.Need.
// This is the shortest prefix of the policy's order that frees enough, as Preempt finds
// for any policy, found without describing every candidate: Freeable sums never exceed
// what the same victims free together, so the policy's own count would stop no earlier.
// When even every candidate together falls short, the walk has planned them all, and the
// error says what all of them would free.
func (m *Manager) preemptOrdered(req PreemptRequest, dst []Preempted) ([]Preempted, error) {
	m.planBegin()
	m.walked = m.walked[:0]
	m.frontier = m.frontier[:0]
	if len(m.order) > 0 {
		m.frontier = append(m.frontier, 0)
	}
	gain := 0
	m.gains = m.gains[:0]
	for gain < req.Need {
		s, ok := m.orderNext()
		if !ok {
			return dst, &SeqError{Op: "preempt", Err: &blocks.OutOfBlocksError{Requested: req.Need, Available: gain}}
		}
		if slices.Contains(req.Protect, s.id) {
			continue
		}
		g := m.planRelease(s)
		gain += g
		m.gains = append(m.gains, g)
		m.walked = append(m.walked, s)
	}
	if req.Mode == Swap {
		if err := m.checkHoldRoom(m.walked); err != nil {
			clear(m.walked)
			return dst, err
		}
	}
	for i, s := range m.walked {
		dst = append(dst, m.preemptSeq(s, req.Mode, m.gains[i]))
		m.walked[i] = nil
	}
	return dst, nil
}

// sortInfos sorts infos (and ids alongside) by ID. It is a heapsort: O(n log n) without
// allocating, since Preempt runs whenever memory runs out with every running sequence as a
// candidate (an insertion sort made a simulator run of 10,000 requests take minutes).
func sortInfos(infos []evict.Candidate, ids []SeqID) {
	swap := func(i, j int) {
		infos[i], infos[j] = infos[j], infos[i]
		ids[i], ids[j] = ids[j], ids[i]
	}
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && infos[c+1].ID > infos[c].ID {
				c++
			}
			if infos[c].ID <= infos[i].ID {
				return
			}
			swap(i, c)
			i = c
		}
	}
	n := len(infos)
	for i := n/2 - 1; i >= 0; i-- {
		down(i, n)
	}
	for end := n - 1; end > 0; end-- {
		swap(0, end)
		down(0, end)
	}
}

// PreemptSeq preempts one running sequence chosen by the caller, in mode. In Recompute
// mode the sequence is forgotten (its committed blocks stay cached); in Swap mode the KV
// of its computed full blocks is held in the lower tiers (tiers.go) and it waits for
// Resume. Swap fails with
// ErrSwapNeedsTiers without lower tiers and with a *SeqError (Op "swap out") wrapping a
// *prefix.TierFullError when tier 1 cannot take its blocks, changing nothing.
func (m *Manager) PreemptSeq(seq SeqID, mode PreemptMode) (Preempted, error) {
	s, err := m.running("preempt", seq)
	if err != nil {
		return Preempted{}, err
	}
	if mode > Swap {
		return Preempted{}, &SeqError{Op: "preempt", Seq: seq, Err: ErrInvalidArgument}
	}
	gain := 0
	if mode == Swap {
		if !m.tiered {
			return Preempted{}, &SeqError{Op: "preempt", Seq: seq, Err: ErrSwapNeedsTiers}
		}
		m.walked = append(m.walked[:0], s)
		err := m.checkHoldRoom(m.walked)
		m.walked[0] = nil
		if err != nil {
			return Preempted{}, err
		}
		gain = m.freeable(s)
	}
	return m.preemptSeq(s, mode, gain), nil
}

// preemptSeq preempts running sequence s, whose release frees gain blocks (counted only
// in Swap mode, where Awaiting is the part not available at once).
func (m *Manager) preemptSeq(s *sequence, mode PreemptMode, gain int) Preempted {
	before := m.pool.Available()
	p := Preempted{Seq: s.id, Mode: mode, Tokens: len(s.tokens)}
	switch mode {
	case Recompute:
		m.drop(s)
	case Swap:
		m.swapToTiers(s) // tiers.go
	}
	p.Freed = m.pool.Available() - before
	if mode == Swap {
		p.Awaiting = max(0, gain-p.Freed)
	}
	m.st.Preemptions++
	m.check()
	return p
}
