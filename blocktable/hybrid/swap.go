package hybrid

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// Swap preemption through the lower tiers, as blocktable.Manager's swapToTiers and
// Resume: the victim's cached blocks that only it holds are demoted into tier 1
// (whatever the write policy: copies TakePlans hands out, each block leaving the device
// once its copy is confirmed), its blocks are released as Finish releases them, and the
// Manager keeps its tokens until Resume admits it again, as a resumed admission that
// finds its prefix on the device, then in the tiers, and loads it. The rest (at least a
// partial last block, which no tier holds) is computed again.

// swapRec is what the Manager keeps of a sequence swapped into the tiers.
type swapRec struct {
	tokens    []int32
	maxTokens int
	promptLen int
	priority  int
	ns        prefix.Namespace
}

// swapOut demotes the cached blocks of s only s holds (PreemptSeq's Swap mode), before
// its release.
func (m *Manager) swapOut(s *seq) {
	m.st.t.BatchTierEvents() // the slots its copies drop to make room: one event per tier
	for g := range m.specs {
		for _, b := range s.tables[g] {
			if b != blocks.NullID && m.st.ref(b) == 1 && m.st.t.IsCached(b) {
				m.st.prepareStore(b, true)
			}
		}
	}
	m.st.t.FlushTierEvents()
	if m.swapped == nil {
		m.swapped = make(map[blocktable.SeqID]*swapRec)
	}
	m.swapped[s.id] = &swapRec{tokens: append([]int32(nil), s.tokens...), maxTokens: s.maxTokens,
		promptLen: s.promptLen, priority: s.priority, ns: s.ns}
	m.tierCounts.SwapOuts++
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
// hold (AdmitResult.Load); the caller computes the rest. It keeps its ID and prompt
// length. All or nothing: on failure (blocks.ErrOutOfBlocks) it stays swapped out. It
// fails with blocktable.ErrNotRunning for a sequence that is not swapped out.
func (m *Manager) Resume(id blocktable.SeqID) (AdmitResult, error) {
	rec, ok := m.swapped[id]
	if !ok {
		return AdmitResult{}, seqErr("resume", id, blocktable.ErrNotRunning)
	}
	delete(m.swapped, id)
	r, err := m.AdmitTiered(id, &Request{Prompt: rec.tokens, MaxTokens: rec.maxTokens, Namespace: rec.ns,
		Priority: rec.priority, Resumed: true})
	if err != nil {
		m.swapped[id] = rec
		return AdmitResult{}, err
	}
	s := m.seqs[id]
	s.promptLen = rec.promptLen
	m.orderFix(s)
	m.tierCounts.SwapIns++
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return r, nil
}
