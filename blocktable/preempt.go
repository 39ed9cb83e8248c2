package blocktable

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
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
// cannot, or swap mode lacks host blocks for the victims, it preempts none and returns an
// *blocks.OutOfBlocksError. The count is exact: what releasing the victims makes free (uncached
// blocks left with no holder) or reclaimable (cached blocks left with no holder and nothing
// held below them, and the ancestors they unpin, as prefix.Index.Reclaimable counts), so
// after a successful Preempt at least req.Need more blocks are Available.
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
	if req.Mode == Swap && m.cfg.HostPool == nil && !m.tiered {
		return dst, &SeqError{Op: "preempt", Err: ErrNoHostPool}
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
	for ; k < len(m.victims) && gain < req.Need; k++ {
		gain += m.planRelease(m.seqs[m.infoIDs[m.victims[k]]])
	}
	if gain < req.Need {
		return dst, &SeqError{Op: "preempt", Err: &blocks.OutOfBlocksError{Requested: req.Need, Available: gain}}
	}
	m.victims = m.victims[:k]
	if req.Mode == Swap && m.cfg.HostPool != nil {
		host := 0
		for _, i := range m.victims {
			host += m.infos[i].Held
		}
		if free := m.cfg.HostPool.NumFree(); host > free {
			return dst, &SeqError{Op: "swap out", Err: &blocks.OutOfBlocksError{Requested: host, Available: free}}
		}
	}
	for _, i := range m.victims {
		p, err := m.PreemptSeq(m.infoIDs[i], req.Mode)
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: preempting a running sequence failed: %v", err))
		}
		dst = append(dst, p)
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
	gain, host := 0, 0
	for gain < req.Need {
		s, ok := m.orderNext()
		if !ok {
			return dst, &SeqError{Op: "preempt", Err: &blocks.OutOfBlocksError{Requested: req.Need, Available: gain}}
		}
		if slices.Contains(req.Protect, s.id) {
			continue
		}
		gain += m.planRelease(s)
		host += len(s.t.ids) - s.t.nulls
		m.walked = append(m.walked, s)
	}
	if req.Mode == Swap && m.cfg.HostPool != nil {
		if free := m.cfg.HostPool.NumFree(); host > free {
			return dst, &SeqError{Op: "swap out", Err: &blocks.OutOfBlocksError{Requested: host, Available: free}}
		}
	}
	for i, s := range m.walked {
		p, err := m.PreemptSeq(s.id, req.Mode)
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: preempting a running sequence failed: %v", err))
		}
		dst = append(dst, p)
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
// mode the sequence is forgotten (its committed blocks stay cached); in Swap mode its
// blocks are copied to host blocks (Preempted.SwapOut) and it waits for SwapIn.
func (m *Manager) PreemptSeq(seq SeqID, mode PreemptMode) (Preempted, error) {
	s, err := m.running("preempt", seq)
	if err != nil {
		return Preempted{}, err
	}
	if mode > Swap {
		return Preempted{}, &SeqError{Op: "preempt", Seq: seq, Err: ErrInvalidArgument}
	}
	if mode == Swap && m.cfg.HostPool == nil && !m.tiered {
		return Preempted{}, &SeqError{Op: "preempt", Seq: seq, Err: ErrNoHostPool}
	}
	before := m.pool.Available()
	p := Preempted{Seq: seq, Mode: mode, Tokens: len(s.tokens)}
	switch mode {
	case Recompute:
		m.drop(s)
	case Swap:
		if m.cfg.HostPool == nil {
			m.swapToTiers(s) // tiers.go
			break
		}
		live := s.t.ids[s.t.nulls:]
		host, err := m.cfg.HostPool.Allocate(s.host[:0], len(live))
		if err != nil {
			return Preempted{}, &SeqError{Op: "swap out", Seq: seq, Err: &blocks.OutOfBlocksError{Requested: len(live), Available: m.cfg.HostPool.NumFree()}}
		}
		s.host = host
		p.SwapOut = make([]CopyOp, len(live))
		for i, id := range live {
			p.SwapOut[i] = CopyOp{Src: id, Dst: host[i]}
		}
		if err := s.t.release(live); err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: releasing seq %d for swap: %v", seq, err))
		}
		// Keep the table's shape (its length, its null entries) for SwapIn; the live
		// entries now name host blocks until then.
		copy(live, host)
		s.state = Swapped
		m.orderRemove(s)
	}
	p.Freed = m.pool.Available() - before
	m.st.Preemptions++
	m.check()
	return p, nil
}

// SwapIn brings a swapped sequence back: it takes again the blocks of its committed prefix
// that the index still caches (no copy needed), allocates device blocks for the rest of its
// table and appends the reverse copy plan for those, {Src: host block, Dst: device block}
// in table order, to dst; all the host blocks are released once the plan is returned (the
// server executes it before the host blocks are reused). All or nothing. The restored
// blocks past the cached prefix are the sequence's own, uncached copies; if part of its
// committed path was evicted meanwhile, the next commit caches them again.
func (m *Manager) SwapIn(seq SeqID, dst []CopyOp) ([]CopyOp, error) {
	s, err := m.lookup("swap in", seq)
	if err != nil {
		return dst, err
	}
	if s.state != Swapped || s.inTiers {
		return dst, &SeqError{Op: "swap in", Seq: seq, Err: ErrNotRunning} // in the tiers: Resume
	}
	live := s.t.ids[s.t.nulls:]
	// The committed prefix as the index has it now: a sequence that caches has no null
	// entries, so live is its whole table and the hit is a prefix of it.
	m.hits = m.hits[:0]
	var cur prefix.Cursor
	rematch := m.caching() && s.t.nulls == 0 && s.committed() > 0
	if rematch {
		p := prefix.Prompt{Namespace: s.prompt.Namespace, Tokens: s.tokens[:s.committed()*m.bs], MM: s.prompt.MM}
		m.hits, cur = m.index.Peek(m.hits, &p, prefix.WholePrompt)
	}
	for _, id := range m.hits {
		if m.pool.RefCount(id) == blocks.MaxRefCount {
			return dst, &SeqError{Op: "swap in", Seq: seq, Err: &blocks.BlockError{Op: "retain", ID: id, Err: blocks.ErrRefCountOverflow}}
		}
	}
	k := len(m.hits)
	need, avail := len(live)-k, m.pool.Available()
	if k > 0 && need > avail-k {
		avail -= m.index.ReclaimableOf(m.hits) // hit blocks taken off the evictable set
	}
	if need > avail {
		return dst, &SeqError{Op: "swap in", Seq: seq, Err: &blocks.OutOfBlocksError{Requested: need, Available: avail}}
	}
	if k > 0 {
		if err := m.index.Acquire(m.hits); err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant: acquiring the cached prefix of seq %d: %v", seq, err))
		}
		copy(live, m.hits)
	}
	dev, err := m.pool.Allocate(m.hits[:0], need)
	if err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: %d blocks available but allocation failed: %v", need, err))
	}
	m.hits = dev
	for i, id := range dev {
		dst = append(dst, CopyOp{Src: s.host[k+i], Dst: id})
	}
	copy(live[k:], dev)
	if err := m.cfg.HostPool.Release(s.host...); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: releasing host blocks of seq %d: %v", seq, err))
	}
	s.host = s.host[:0]
	s.state = Running
	// It holds its cached prefix from the root again and its own copies past it: untangled.
	s.dup = false
	m.leaveUnit(s)
	m.orderPush(s)
	if rematch {
		// The cursor moves to the end of the path found now: the same path, or, if part of
		// it was evicted while the sequence was swapped out, the end of what is still
		// cached, so that the next commit caches the restored copies past it.
		s.cur = cur
	}
	m.st.SwapIns++
	m.check()
	return dst, nil
}
