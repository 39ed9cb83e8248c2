package blocktable

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// WriteState writes the Manager's own state to w as deterministic, line-oriented text:
// its configuration, every sequence in ID order (state, tokens with consecutive runs
// written a..b, table, null entries, reserved slots, committed blocks, prefix hit,
// priority, arrival, host blocks) and the counters. The pool and the index write their
// own (blocks.Pool.WriteState, prefix.Index.WriteState); package blocktable/kvtest puts
// the three together. Two managers that will behave identically write identical text, so
// tests use it for golden files and as a deep snapshot. It allocates: it is for tests and
// debugging, never for a hot path.
//
//	manager blocksize=4 window=0 watermark=0 fullhit=false preemption=fcfs clock=3
//	  seq 1 running tokens=0..9 reserved=2 table=1,2,3 nulls=0 committed=2 hit=0 priority=0 arrival=1 cows=0
//	  counters admitted=1 finished=0 aborted=0 forks=0 preemptions=0 swapins=0 cows=0 prompttokens=10 hittokens=0 rejected=0
func (m *Manager) WriteState(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "manager blocksize=%d window=%d watermark=%v fullhit=%v preemption=%s clock=%d\n",
		m.bs, m.cfg.SlidingWindow, m.cfg.Watermark, m.cfg.FullPromptHit, m.preempt.Name(), m.clock.Now())
	ids := make([]SeqID, 0, len(m.seqs))
	for id := range m.seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := m.seqs[id]
		state := "running"
		if s.state == Swapped {
			state = "swapped"
		}
		fmt.Fprintf(&b, "  seq %d %s", id, state)
		if ns := s.prompt.Namespace; ns.LoRA != "" || ns.Salt != "" {
			fmt.Fprintf(&b, " ns=%q/%q", ns.LoRA, ns.Salt)
		}
		b.WriteString(" tokens=")
		writeRuns(&b, s.tokens)
		b.WriteString(" table=")
		for i, blk := range s.t.ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(blk), 10))
		}
		fmt.Fprintf(&b, " nulls=%d reserved=%d committed=%d hit=%d priority=%d arrival=%d cows=%d",
			s.t.nulls, s.t.Reserved(), s.committed(), s.hit, s.priority, s.arrival, s.t.cows)
		if s.state == Swapped && m.index != nil {
			fmt.Fprintf(&b, " held=%d", m.index.HeldBlocks(s.hold))
		}
		b.WriteByte('\n')
	}
	st := m.st
	fmt.Fprintf(&b, "  counters admitted=%d finished=%d aborted=%d forks=%d preemptions=%d swapins=%d cows=%d prompttokens=%d hittokens=%d rejected=%d\n",
		st.Admitted, st.Finished, st.Aborted, st.Forks, st.Preemptions, st.SwapIns, st.CopyOnWrites, st.PromptTokens, st.HitTokens, st.RejectedAdmissions)
	_, err := w.Write(b.Bytes())
	return err
}

// writeRuns writes toks with every run of consecutive ascending values as a..b.
func writeRuns(b *bytes.Buffer, toks []int32) {
	for i := 0; i < len(toks); {
		j := i
		for j+1 < len(toks) && toks[j+1] == toks[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(toks[i]), 10))
		if j > i {
			b.WriteString("..")
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(toks[j]), 10))
		}
		i = j + 1
	}
}
