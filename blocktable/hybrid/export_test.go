package hybrid

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// HoldInFlight is, for the tests, how many of swapped sequence id's held blocks have
// their only copy in flight (prefix.GroupTree.HoldInFlight; 0 for a sequence not swapped
// out or holding nothing): what makes Resume refuse with blocktable.ErrSwapInFlight.
func (m *Manager) HoldInFlight(id blocktable.SeqID) int {
	rec, ok := m.swapped[id]
	if !ok || rec.hold == 0 {
		return 0
	}
	return m.st.t.HoldInFlight(rec.hold)
}

// Holds is, for the tests, how many holds the lower tiers keep (prefix.GroupTree.Holds).
func (m *Manager) Holds() int { return m.st.t.Holds() }

// SwapRefused is, for the tests, swapOut's refusal of running sequence id with err
// (swapRefused over that one victim).
func (m *Manager) SwapRefused(id blocktable.SeqID, err error) error {
	return m.swapRefused(func(yield func(*seq) bool) { yield(m.seqs[id]) }, err)
}

// Kept is, for the tests, how many demoted blocks of stream-ordered stores handed out
// are kept cached until their store completes (settleKept's list).
func (m *Manager) Kept() int {
	if m.st.tiers == nil {
		return 0
	}
	ts := m.st.tiers
	return len(ts.kept) - ts.keptHead - ts.keptDead
}

// ClosureBreaks is, for the tests, the first device block of every (node, group) whose
// full-attention closure is broken in the form CheckInvariants checks with tiers
// (closureBroken), whether or not CheckInvariants still checks it: after a lower tier's
// first drop it does not.
func (m *Manager) ClosureBreaks() []blocks.ID {
	t := m.st.t
	var out []blocks.ID
	for n := range t.Nodes() {
		if t.IsRoot(n) {
			continue
		}
		for g := range m.specs {
			if m.closureBroken(n, g) {
				out = append(out, t.First(n, g))
			}
		}
	}
	return out
}

// SwapFree is, for the tests, how many swap records (with their token buffers) the swap
// free list keeps for later swap-outs.
func (m *Manager) SwapFree() int { return len(m.swap.free) }

// ClosureBreakKeys is ClosureBreaks' breaks named as events name them: each broken
// (node, group)'s group and its node's event hash (prefix.GroupTree.EventHash), "" for a
// node with none.
func (m *Manager) ClosureBreakKeys() []string {
	var out []string
	for _, b := range m.ClosureBreaks() {
		out = append(out, m.BlockKey(b))
	}
	return out
}

// BlockKey is, for the tests, cached device block b's (group, event hash) as "group|hash"
// in hex, "" for a block not cached.
func (m *Manager) BlockKey(b blocks.ID) string {
	e, ok := m.st.t.Entry(b)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d|%x", e.Group, eventHash(m, e.Node))
}

func eventHash(m *Manager, n prefix.Node) []byte {
	h, _ := m.st.t.EventHash(nil, n)
	return h
}

// SpareRecords is, for the tests, how many sequence records (with their buffers) the
// spare list keeps, and Slots how many Freeable slots the Manager has handed out.
func (m *Manager) SpareRecords() int { return len(m.spare) }

// Slots is how many Freeable slots the Manager has made: the accounting's rows.
func (m *Manager) Slots() int { return int(m.fa.slots) }

// KeptOrderBreaks is, for the tests, every demoted block of a full-attention group a
// stream-ordered store keeps cached at the free queue's front (releaseHandedOut) whose
// parent block (its group's units per block up), kept by the same store, waits ahead of
// it with every other copy of the parent: the allocations would evict the parent first
// and leave the block cached below it. leafFirst orders a store's sources child first,
// and nothing since moves a parent ahead of its child (a hit takes a prefix out of the
// queue whole, a release puts it at the back). Blocks an allocation took, or that are
// cached for another entry since, are no longer the store's.
func (m *Manager) KeptOrderBreaks() []blocks.ID {
	ts := m.st.tiers
	if ts == nil {
		return nil
	}
	t := m.st.t
	pos := map[blocks.ID]int{}
	i := 0
	for b := range m.st.q.All() {
		pos[b] = i
		i++
	}
	keptBy := map[blocks.ID]prefix.TransferID{}
	for _, r := range ts.kept[ts.keptHead:] {
		if e, ok := t.Entry(r.b); ok && e == r.e {
			if _, free := pos[r.b]; free {
				keptBy[r.b] = r.id
			}
		}
	}
	var out []blocks.ID
	for b, id := range keptBy {
		e, _ := t.Entry(b)
		p := m.st.up(e.Node, m.k[e.Group])
		if !m.specs[e.Group].Downward() || p == prefix.NoNode || t.IsRoot(p) {
			continue
		}
		same, behind := false, false // a parent block the store keeps; one evicted after b, or held
		for x := t.First(p, e.Group); x != blocks.NullID; x = t.NextCached(x) {
			q, free := pos[x]
			behind = behind || !free || q > pos[b]
			px, kept := keptBy[x]
			same = same || kept && px == id
		}
		if same && !behind {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}
