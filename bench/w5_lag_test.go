package bench

import (
	"fmt"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// W5's lagged server (bench/README.md, "W5: W3 with a host tier"): the server confirms each
// transfer a fixed number of scheduler steps after it took the transfer's plan, as one
// whose DMA completes a step or two later. A scheduler step is one decode step of the
// running request, or one idle step while it waits for its load: W3's requests run one
// after another, and a request whose prompt is being loaded from the host cannot start
// until its KV is there.

// W5LagSteps is the lagged server's delay: each transfer is confirmed 2 scheduler steps
// after its plan was taken.
const W5LagSteps = 2

// w5Lagged is the lagged server: the transfers it has taken and not yet confirmed, in the
// order taken, each with the step at which it is confirmed.
type w5Lagged struct {
	lag      uint64
	step     uint64
	inflight []w5Transfer
	plans    []prefix.Plan
	waits    uint64 // idle steps requests spent waiting for their loads
}

type w5Transfer struct {
	id  prefix.TransferID
	due uint64
}

// take takes the Manager's new plans, each transfer due lag steps from now.
func (s *w5Lagged) take(m *blocktable.Manager) {
	s.plans = m.TakePlans(s.plans[:0])
	for j, p := range s.plans {
		if j > 0 && s.plans[j-1].ID == p.ID {
			continue // one transfer's plans from several tiers
		}
		s.inflight = append(s.inflight, w5Transfer{id: p.ID, due: s.step + s.lag})
	}
}

// tick runs one scheduler step's server side: the step starts, the transfers due by now
// are confirmed ok, in the order taken, and the plans prepared since are taken. It
// reports whether load was among those confirmed.
func (s *w5Lagged) tick(m *blocktable.Manager, load prefix.TransferID) (bool, error) {
	s.step++
	done := false
	k := 0
	for k < len(s.inflight) && s.inflight[k].due <= s.step {
		id := s.inflight[k].id
		if _, err := m.CompleteTransfer(id, true); err != nil {
			return false, err
		}
		done = done || id == load
		k++
	}
	s.inflight = s.inflight[:copy(s.inflight, s.inflight[k:])]
	s.take(m)
	return done, nil
}

// runW5Lagged is runW5 with the lagged server: after each admission the server takes
// the plans; a request with a load waits, one idle step at a time, until its load is
// confirmed; each decode step is a scheduler step. The last transfers are confirmed
// after the trace's last request.
func runW5Lagged(m *blocktable.Manager, tr *W3Trace, lag int) (w5Result, uint64, error) {
	s := &w5Lagged{lag: uint64(lag), plans: make([]prefix.Plan, 0, 16), inflight: make([]w5Transfer, 0, 16)}
	req := blocktable.Request{MaxTokens: W3SystemTokens + W3UniqueTokens + W3OutputTokens}
	for i := range tr.Requests {
		rq := &tr.Requests[i]
		seq := blocktable.SeqID(i)
		req.Prompt = rq.Prompt
		res, err := m.Admit(seq, &req)
		if err != nil {
			return w5Result{}, 0, err
		}
		s.take(m)
		for loading := res.Load != 0; loading; s.waits++ {
			done, err := s.tick(m, res.Load)
			if err != nil {
				return w5Result{}, 0, err
			}
			loading = !done
		}
		for j := range rq.Output {
			if _, err := s.tick(m, 0); err != nil {
				return w5Result{}, 0, err
			}
			if _, err := m.Append(seq, rq.Output[j:j+1], 0); err != nil {
				return w5Result{}, 0, err
			}
		}
		if err := m.Finish(seq); err != nil {
			return w5Result{}, 0, err
		}
	}
	for len(s.inflight) > 0 {
		if _, err := s.tick(m, 0); err != nil {
			return w5Result{}, 0, err
		}
	}
	if k := m.Config().Index.PendingTransfers(); k != 0 {
		return w5Result{}, 0, fmt.Errorf("%d transfers pending after the trace", k)
	}
	return w5Read(m), s.waits, nil
}
