package hybrid

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// AdmitCost is what Admit would take for a request, found by Manager.AdmitCost without
// changing anything.
type AdmitCost struct {
	// Hit is the device hit in tokens (Admit's result).
	Hit int
	// LoadTokens are the tokens past Hit that lower tiers hold and AdmitTiered would load
	// (0 without tiers).
	LoadTokens int
	// Need is the free-queue blocks the admission takes in all: the hit blocks nobody
	// holds (taken off the queue) and the blocks allocated past the hit. Admit succeeds
	// exactly when Need <= Stats().Free.
	Need int
	// Groups is Need per KV-cache group, in group order.
	Groups []int
}

// AdmitCost is a dry run of Admit: it fills c with the hit Admit would take for req and
// the blocks each group would take off the free queue, touching and counting nothing, by
// the count Admit itself makes (so a scheduler that admits into several Managers, or
// decides before it admits, never copies it). c.Groups' capacity is reused, so that it
// allocates nothing in steady state. A nil req or c, or a request Admit refuses as
// invalid (an empty prompt, MaxTokens short of the prompt or past math.MaxInt32), is
// refused with blocktable.ErrInvalidArgument; the pool being short is not an error here.
func (m *Manager) AdmitCost(req *Request, c *AdmitCost) error {
	if req == nil || c == nil {
		return errNilRequest
	}
	if err := m.checkRequest("admit cost", 0, req); err != nil {
		return err
	}
	s := m.newSeq(req)
	if cap(c.Groups) < m.ng {
		c.Groups = make([]int, m.ng)
	}
	c.Groups = c.Groups[:m.ng]
	clear(c.Groups)
	hit, full, _, need := m.admitCount(s, req, c.Groups)
	c.Hit, c.LoadTokens, c.Need = hit, full-hit, need
	m.spare = append(m.spare, s)
	return nil
}

// checkRequest refuses a request Admit (for sequence id) and AdmitCost cannot take.
func (m *Manager) checkRequest(op string, id blocktable.SeqID, req *Request) error {
	if req == nil || len(req.Prompt) == 0 || req.MaxTokens < len(req.Prompt) {
		return seqErr(op, id, errInvalid)
	}
	if req.MaxTokens > maxSeqTokens { // no sum of positions below it overflows
		return &blocktable.SizeError{Op: op, Seq: id, What: "max tokens", N: req.MaxTokens, Max: maxSeqTokens}
	}
	return nil
}

// admitCount is Admit's lookup (find) and count for req, s its new record: the hit, the
// hit with the lower tiers' continuation (full), the slots the admission gives, and the
// free blocks it takes in all and, if per is not nil, per group (added to per). s.path
// holds the matched nodes.
func (m *Manager) admitCount(s *seq, req *Request, per []int) (hit, full, slots, need int) {
	n := len(req.Prompt)
	_, hit, full, _ = m.find(s, req, -1)
	slots = n
	if req.Prefill > 0 {
		slots = min(n, full+req.Prefill)
	}
	for g, spec := range m.specs {
		bs := m.bs[g]
		required := (slots + bs - 1) / bs
		hb, skip, dev, k := 0, 0, 0, 0
		if full > 0 && m.participates(g) {
			hb = full / bs
			skip = min(spec.Skipped(full)/bs, hb)
			dev = hb
			if full != hit {
				dev = m.deviceEnd(g, hit, full)
			}
			// blockAt and ref, spelled out with the loop's invariants hoisted: the hit's
			// blocks are most of an admission's count.
			q, heads, ng, path, kg := m.st.q, *m.st.heads, m.st.ng, s.path, m.k[g]
			for u := (skip+1)*kg - 1; u < dev*kg; u += kg {
				if q.RefCount(blocks.ID(heads[int(path[u])*ng+g])) == 0 {
					k++
				}
			}
		}
		if m.align[g] {
			if dev < hb {
				k++ // the block the state at the hit is loaded into (loadStates)
			}
			if required > hb {
				k++ // the running state block only
			}
		} else {
			k += max(required-dev, 0)
		}
		need += k
		if per != nil {
			per[g] += k
		}
	}
	return hit, full, slots, need
}
