package blocktable

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// Lower tiers through the Manager. With an index built prefix.WithTiers, admission looks
// past the device hit into the lower tiers (PeekLower), allocates device blocks for the
// span they hold with the rest of the prompt, and prepares their load (AdmitResult.Load):
// those blocks commit to the index only once the load completes, so no other request can
// hit KV that is not there yet. A failed load evicts the keys from their tiers, and the
// sequence computes the span instead: its blocks are already its own, so nothing leaks
// and nothing is allocated again. TakePlans and CompleteTransfer pass the index's plans
// through, and complete the sequence's side of loads.

// LoadDone says what completing a transfer meant for the Manager's sequences.
type LoadDone struct {
	// Result is the index's account of the transfer.
	Result prefix.TransferResult
	// Seq is the sequence whose load it was, when Loaded.
	Seq    SeqID
	Loaded bool
	// ComputeTokens is how many tokens Seq must now compute because its load failed (the
	// load's span, after its device hit); 0 when the load succeeded.
	ComputeTokens int
}

// planLoad adds to an admission plan the lower-tier span after the device hit, capped to
// the blocks that get slots now.
func (m *Manager) planLoad(p *admitPlan) {
	most := p.tokens/m.bs - len(p.hits)
	if most <= 0 {
		return
	}
	h := m.index.PeekLower(&p.prompt, p.cur, prefix.HitLimit(!m.cfg.FullPromptHit), most)
	p.res.Tiers = h
	p.load = h.Lower
	p.res.LoadTokens = h.Lower * m.bs
}

// prepareLoad prepares the load of the plan's lower-tier span into s's blocks after its
// device hit.
func (m *Manager) prepareLoad(s *sequence, p *admitPlan, resumed bool) {
	k := len(p.hits)
	id, err := m.index.PrepareLoad(&p.prompt, p.cur, prefix.HitLimit(!m.cfg.FullPromptHit), s.t.ids[k:k+p.load])
	if err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: preparing the load PeekLower found for seq %d: %v", s.id, err))
	}
	s.loading, s.loadBlocks, s.resumed = id, p.load, resumed
	p.res.Load = id
	if m.loads == nil {
		m.loads = make(map[prefix.TransferID]SeqID)
	}
	m.loads[id] = s.id
}

// TakePlans appends the index's transfer plans to dst (prefix.Index.TakePlans): the
// demotions its free-block watermark starts, write-through copies, and the loads of
// admitted sequences. Without lower tiers it returns dst.
func (m *Manager) TakePlans(dst []prefix.Plan) []prefix.Plan {
	if !m.tiered {
		return dst
	}
	return m.index.TakePlans(dst)
}

// CompleteTransfer confirms transfer id with the server's outcome
// (prefix.Index.CompleteTransfer). For a sequence's load: ok commits its loaded blocks to
// the index; failed leaves them its own, uncached, for it to compute (LoadDone says how
// many tokens), and commits them as admission would have. A sequence finished, aborted or
// preempted (in either mode) while its load was in flight is no longer the load's: its
// blocks returned to the pool when the load released them, and LoadDone is not Loaded.
func (m *Manager) CompleteTransfer(id prefix.TransferID, ok bool) (LoadDone, error) {
	if !m.tiered {
		return LoadDone{}, prefix.ErrNoTiers
	}
	r, err := m.index.CompleteTransfer(id, ok)
	if err != nil {
		return LoadDone{}, err
	}
	done := LoadDone{Result: r}
	seq, found := m.loads[id]
	if !found {
		m.check()
		return done, nil
	}
	delete(m.loads, id)
	s, live := m.seqs[seq]
	if !live || s.loading != id {
		m.check()
		return done, nil
	}
	done.Seq, done.Loaded = seq, true
	s.loading = 0
	tokens := uint64(s.loadBlocks * m.bs)
	// The sequence runs from the next step on: what it computes then is past its hit and,
	// if the load landed, past the load.
	s.fresh, s.freshStep = s.hit, m.steps+1
	switch {
	case !ok:
		done.ComputeTokens = s.loadBlocks * m.bs
		m.st.LoadFailedTokens += tokens
	case !s.resumed:
		m.st.LoadedTokens += tokens
	}
	if ok {
		s.fresh += s.loadBlocks * m.bs
	}
	if s.state == Running {
		m.commitFull(s)
	}
	m.check()
	return done, nil
}

// Swap mode over the tiers: Swap preemption is the tiers' own mechanism, not a second
// one. The victim's full blocks whose KV is computed (computed.go; while its own load is
// in flight, only its device hit) are committed and held in the lower tiers
// (prefix.Index.Hold): the blocks a lower tier has already are held where they are, the
// others are copied into tier 1 (TakePlans hands the copies out) and held there, and
// those only the victim held leave the device once their copy is confirmed (under
// prefix.TierConfig.StreamOrdered they are reusable once TakePlans hands it out, and
// leave when an allocation takes them or the copy is confirmed). Its device blocks are
// released, and a load in flight into them is no longer its own; the sequence keeps its
// tokens, swapped out. A held block is evicted from no tier until the sequence resumes,
// finishes or is aborted: only a failed copy (the server's CompleteTransfer with ok
// false) or a Reset of the index drops it. Before any of this, Preempt and PreemptSeq
// check that tier 1 can take the blocks to copy (prefix.Index.HoldNeed) and refuse the
// swap otherwise, naming the sequence. Resume brings the sequence back as a resumed
// admission: its prefix is found on the device, then in the tiers, loaded, and the rest
// (at least the partial last block, which no tier holds, and any block not computed when
// it was swapped out) is computed again; under StreamOrdered it waits
// (ErrSwapInFlight) while a copy it would load from is in flight. Preempted.Freed counts
// what is available at once, Preempted.Awaiting what becomes available as the copies
// are handed out (StreamOrdered) or confirmed.

// appendSwapIDs appends to dst the blocks swapping s out will hold: its full blocks
// whose KV the server has computed (computed.go), those on its committed path as the
// index has it, and those past it that swapToTiers commits first (after a Truncate whose
// path was partly evicted). A block given slots in the current step holds no KV until
// the step runs, and is computed again at Resume instead. A stale sequence holds
// nothing: its KV is of an earlier epoch (or follows a dropped block), and it is
// computed again.
func (m *Manager) appendSwapIDs(dst []blocks.ID, s *sequence) []blocks.ID {
	if s.stale {
		return dst
	}
	c, k := m.computed(s)/m.bs, s.committed()
	if n := min(k, c); n > 0 {
		p := prefix.Prompt{Namespace: s.prompt.Namespace, Tokens: s.tokens[:n*m.bs], MM: s.prompt.MM}
		dst, _ = m.index.Peek(dst, &p, prefix.WholePrompt)
	}
	if s.loading == 0 && c > k {
		dst = append(dst, s.t.ids[k:c]...)
	}
	return dst
}

// checkHoldRoom refuses a swap of victims, in the order they would be swapped out, whose
// blocks tier 1 cannot take together. The error names the first victim at which the
// need exceeds the room (with every victim's need, the room and tier 1's slots in flight
// in its TierFullError, as the index's Hold fills them): the sequence the refusal is
// about when there is one, and where a caller that preempts fewer would stop. Finding it
// is a second pass, on the refusal only.
func (m *Manager) checkHoldRoom(victims []*sequence) error {
	m.swapIDs = m.swapIDs[:0]
	for _, s := range victims {
		m.swapIDs = m.appendSwapIDs(m.swapIDs, s)
	}
	need, room := m.index.HoldNeed(m.swapIDs)
	if need <= room {
		return nil
	}
	at := victims[len(victims)-1].id
	if len(victims) > 1 {
		m.swapIDs = m.swapIDs[:0]
		for _, s := range victims {
			m.swapIDs = m.appendSwapIDs(m.swapIDs, s)
			if n, _ := m.index.HoldNeed(m.swapIDs); n > room {
				at = s.id
				break
			}
		}
	}
	full := &prefix.TierFullError{Requested: need, Available: room, InFlight: m.index.InFlightSlots(1)}
	return &SeqError{Op: "swap out", Seq: at, Err: full}
}

// swapToTiers is Swap preemption of s, once checkHoldRoom has passed.
func (m *Manager) swapToTiers(s *sequence) {
	m.commitFull(s)
	m.swapIDs = m.appendSwapIDs(m.swapIDs[:0], s)
	h, err := m.index.Hold(m.swapIDs)
	if err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: holding seq %d's blocks that HoldNeed counted: %v", s.id, err))
	}
	if err := s.t.Release(); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: releasing seq %d for swap: %v", s.id, err))
	}
	s.cur = prefix.Cursor{}
	s.state, s.hold = Swapped, h
	// A load in flight into its blocks is no longer its own: they went back to the pool
	// when the load released them, and Resume loads or computes the span again.
	s.loading, s.loadBlocks = 0, 0
	m.orderRemove(s)
	m.leaveUnit(s) // it holds no device block any more (freeable.go)
}

// releaseHold ends a swapped sequence's hold on the lower tiers.
func (m *Manager) releaseHold(s *sequence) {
	if err := m.index.ReleaseHold(s.hold); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: releasing seq %d's hold: %v", s.id, err))
	}
	s.hold = 0
}

// Resume brings back a sequence Swap preemption put into the lower tiers: it is admitted
// again (as Request.Resumed, with its namespace, multimodal inputs, priority and every
// token it had), matching its prefix on the device and loading what the tiers hold
// (AdmitResult.Load); the caller computes the rest. A chunked prefill keeps the inputs
// of its prompt's rest, whose tokens the caller appends next. Its hold on the tiers is then
// released (the load pins what it reads). It keeps its ID and prompt length; its arrival
// is the resumption's. All or nothing: on failure (blocks.ErrOutOfBlocks, in a *SeqError
// with Op "resume") it stays swapped out, its KV still held, and nothing else changed,
// Stats included: a refused Resume is no refused admission. Under
// prefix.TierConfig.StreamOrdered, once an allocation has taken the device blocks of
// copies TakePlans handed out and before their CompleteTransfer, it fails with
// ErrSwapInFlight, changing nothing: those blocks are on no device and in no tier until
// confirmed, and the server resumes the sequence once they are rather than compute them
// again. A block whose copy is in flight and which the device still caches (always
// without StreamOrdered) is taken as a device hit.
func (m *Manager) Resume(seq SeqID) (AdmitResult, error) {
	s, err := m.lookup("resume", seq)
	if err != nil {
		return AdmitResult{}, err
	}
	if s.state != Swapped {
		return AdmitResult{}, &SeqError{Op: "resume", Seq: seq, Err: ErrNotRunning}
	}
	// A stream-ordered copy handed out has released its device block, and its tier slot
	// is found only once confirmed: wait for it rather than compute the block again, as
	// vLLM's offloading connector serves only blocks whose store is done and delays a
	// request whose hit is still moving.
	if s.hold != 0 && m.index.HoldInFlight(s.hold) > 0 {
		return AdmitResult{}, &SeqError{Op: "resume", Seq: seq, Err: ErrSwapInFlight}
	}
	if len(s.tokens) == 0 { // truncated to nothing before its swap: no admission to make
		m.releaseHold(s)
		s.state, s.arrival = Running, m.clock.Tick()
		m.orderPush(s)
		m.st.SwapIns++
		m.check()
		return AdmitResult{}, nil
	}
	// MaxTokens is a capacity hint: the tokens' slice may have grown past the pool's
	// slots, which Admit would refuse as a size.
	req := Request{Namespace: s.prompt.Namespace, Prompt: s.tokens, MM: mmUpTo(s.prompt.MM, len(s.tokens), m.bs), Priority: s.priority,
		Retention: s.prompt.Retention, MaxTokens: min(cap(s.tokens), m.maxSlots), Resumed: true}
	delete(m.seqs, seq) // Admit files the sequence again under its ID
	if m.last == s {
		m.last = nil
	}
	if slot := uint64(seq) & uint64(len(m.near)-1); m.near[slot] == s {
		m.near[slot] = nil
	}
	st := m.st // Admit counts a refused admission; a refused Resume counts nothing
	res, err := m.Admit(seq, &req)
	if err != nil {
		m.st = st
		m.file(s)
		return AdmitResult{}, resumeError(err)
	}
	back := m.seqs[seq]
	back.promptLen = s.promptLen
	// Admit was given the inputs cut to the tokens (it refuses inputs past the prompt),
	// but a chunked prefill's rest is still its prompt's: the caller appends the image's
	// tokens next and the server computes image KV for them. So the resumed sequence keys
	// its blocks by all of its inputs, as before the swap and as vLLM keys a request's
	// blocks whatever part of it is computed. Admit committed no block the cut reaches:
	// the block the cut falls in is partial, and the blocks before it key alike.
	back.prompt.MM = ownMM(back.prompt.MM, s.prompt.MM) // s's record is reused once recycled
	back.setPlain()
	m.orderFix(back)
	m.releaseHold(s)
	m.recycle(s)
	m.st.SwapIns++
	m.check()
	return res, nil
}

// resumeError names Resume, not the admission it made, in Admit's error.
func resumeError(err error) error {
	switch e := err.(type) {
	case *SeqError:
		e.Op = "resume"
	case *SizeError:
		e.Op = "resume"
	}
	return err
}
