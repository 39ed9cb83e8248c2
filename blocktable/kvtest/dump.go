package kvtest

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/kvpage/kvpage/blocktable"
)

// WriteState writes the whole state of the stack to w as deterministic, diffable text:
// the sequence names, the pool (free list in hand-out order, refcounts, counters,
// faults), the host tier, the prefix tree (every cached block, its tokens, refcount,
// last access, and the eviction order) and the Manager (every sequence's tokens, table and
// cursor). Equal text means the stacks will behave identically, so it serves as a golden
// file and as a deep snapshot: a call that failed must leave it unchanged.
func (e *Env) WriteState(w io.Writer) error {
	var b bytes.Buffer
	ids := make([]blocktable.SeqID, 0, len(e.names))
	for id := range e.names {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b.WriteString("names")
	for _, id := range ids {
		fmt.Fprintf(&b, " %s=%d", e.names[id], id)
	}
	b.WriteByte('\n')
	if err := e.Pool.WriteState(&b); err != nil {
		return err
	}
	if e.Index != nil && e.Index.NumTiers() > 1 {
		h := e.Index.TierStatsOf(1)
		fmt.Fprintf(&b, "host resident=%d pending=%d held=%d\n", h.Resident, h.Pending, e.Manager.Stats().HostInUse)
	}
	if e.Index != nil {
		if err := e.Index.WriteState(&b); err != nil {
			return err
		}
	}
	if err := e.Manager.WriteState(&b); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Dump is WriteState as a string.
func (e *Env) Dump() string {
	var b bytes.Buffer
	if err := e.WriteState(&b); err != nil {
		return "kvtest: dump failed: " + err.Error()
	}
	return b.String()
}
