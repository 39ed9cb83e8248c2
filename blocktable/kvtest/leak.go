package kvtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// Leak is one block still held when it should not be.
type Leak struct {
	Block blocks.ID
	// Refs is the block's refcount in the pool.
	Refs int
	// Holders names the sequences whose tables hold it (a name once per table entry);
	// Cached says the index holds one reference too.
	Holders []string
	Cached  bool
}

// Leaks lists every block held by something other than the prefix index: by a sequence
// still running or swapped, or by no one the Manager knows. At the end of a test, when
// every sequence has finished or been aborted, it must be empty.
func (e *Env) Leaks() []Leak {
	holders := map[blocks.ID][]string{}
	for _, id := range e.Manager.Seqs(nil) {
		tbl, err := e.Manager.Blocks(id)
		if err != nil {
			continue // swapped: its device blocks are released; reported by CheckLeaks
		}
		for _, b := range tbl {
			if b == blocks.NullID && e.Pool.HasNullBlock() {
				continue
			}
			holders[b] = append(holders[b], e.Name(id))
		}
	}
	var leaks []Leak
	for i := range e.Pool.NumBlocks() {
		b := blocks.ID(i)
		refs := e.Pool.RefCount(b)
		cached := e.Index != nil && e.Index.IsCached(b)
		index := 0
		if cached {
			index = 1
		}
		if refs > index {
			h := holders[b]
			if e.Index != nil {
				for range e.Index.TransferRefs(b) {
					h = append(h, "a transfer in flight")
				}
			}
			leaks = append(leaks, Leak{Block: b, Refs: refs, Holders: h, Cached: cached})
		}
	}
	return leaks
}

// ErrLeak is wrapped by the error CheckLeaks returns.
var ErrLeak = errors.New("kvtest: blocks leaked")

// CheckLeaks returns an error wrapping ErrLeak when any sequence is still known to the
// Manager or any block is held by something other than the prefix index, naming for each
// leaked block the sequences that held it.
func (e *Env) CheckLeaks() error {
	var b strings.Builder
	seqs := e.Manager.Seqs(nil)
	if len(seqs) > 0 {
		names := make([]string, 0, len(seqs))
		for _, id := range seqs {
			n := e.Name(id)
			if info, err := e.Manager.Seq(id); err == nil && info.State == blocktable.Swapped {
				n += " (swapped)"
			}
			names = append(names, n)
		}
		fmt.Fprintf(&b, "\n  sequences never finished or aborted: %s", strings.Join(names, ", "))
	}
	leaks := e.Leaks()
	writeLeaks(&b, leaks)
	if held := e.Manager.Stats().HostInUse; held > 0 {
		fmt.Fprintf(&b, "\n  %d host-tier blocks still held for swapped sequences", held)
	}
	if b.Len() == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d blocks still held at the end of the test:%s", ErrLeak, len(leaks), b.String())
}

// AbortAll aborts every sequence still known to the Manager, in ID order, then completes
// every transfer to or from the lower tiers still in flight (CompleteTransfers): a test
// that stops midway on purpose calls it so that the leak check passes.
func (e *Env) AbortAll() {
	ids := e.Manager.Seqs(nil)
	slices.Sort(ids)
	for _, id := range ids {
		if err := e.Manager.Abort(id); err != nil {
			e.tb.Errorf("kvtest: abort %s: %v", e.Name(id), err)
		}
	}
	e.CompleteTransfers(true)
}

// CompleteTransfers takes the Manager's plans and completes each transfer with ok, as a
// server that executed them would, until none is in flight (a completed copy can start
// the next tier's); it returns how many it completed.
func (e *Env) CompleteTransfers(ok bool) int {
	n := 0
	for round := 0; e.Index != nil && e.Index.PendingTransfers() > 0 && round <= 2*prefix.MaxTiers; round++ {
		seen := map[prefix.TransferID]bool{}
		for _, p := range e.Manager.TakePlans(nil) {
			if seen[p.ID] {
				continue
			}
			seen[p.ID] = true
			if _, err := e.Manager.CompleteTransfer(p.ID, ok); err != nil {
				e.tb.Errorf("kvtest: complete transfer %d: %v", p.ID, err)
			}
			n++
		}
	}
	return n
}
