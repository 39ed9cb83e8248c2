package blocktable

import (
	"fmt"

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
// preempted while its load was in flight is simply gone: its blocks returned to the pool
// when the load released them.
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
	switch {
	case !ok:
		done.ComputeTokens = s.loadBlocks * m.bs
		m.st.LoadFailedTokens += tokens
	case !s.resumed:
		m.st.LoadedTokens += tokens
	}
	if s.state == Running {
		m.commitFull(s)
	}
	m.check()
	return done, nil
}
