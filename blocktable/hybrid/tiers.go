package hybrid

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// Lower tiers (Config.Tiers), for maintainers. The tree keeps the lower tiers' books
// (prefix.GroupTree.SetTiers: slots, policies, plans, copies between lower tiers); the
// store keeps the device's side, since it owns the free queue and sees the hits: it holds
// one reference on a device block for each copy that reads or fills it, starts the
// device's copies into tier 1 by tier 1's write policy (write-through when a block is
// cached, after N hits, write-back ahead of need: the first FreeTarget blocks of the free
// queue, its next victims, are demoted before an allocation reaches them), and evicts a
// demoted block once its copy is confirmed, to the queue's front (under StreamOrdered it
// goes there cached when TakePlans hands its copy out: releaseHandedOut).
//
// A lookup finds the device hit first (the fixed point over the device's lists), then the
// longest hit every group can serve with the blocks past the device hit read from the
// lower tiers (cachedView.devUnits): full attention needs every block, a sliding window
// only those inside its window, Mamba only the state at the hit. Those blocks are loaded
// into blocks the sequence owns, which are cached only once the load completes: until
// then no other sequence can hit KV that is not there yet. A continuation that needs no
// block loaded is a pure hit (hitTiers). A Mamba group in align mode takes its state at
// the hit from a lower tier as vLLM's offloading connector does (the hit rounded to the
// align boundary, which every hit here is): the state is loaded into a block of its own
// (loadStates), the entry before the running block, where a device hit puts its state.

// tierState is the device's side of the lower tiers.
type tierState struct {
	write      prefix.WritePolicy // tier 1's
	hitsN      uint32
	freeTarget int
	streamed   bool   // TierConfig.StreamOrdered: a store's device source is released when handed out
	demote     []bool // per block: a write-back demotion in flight
	demoting   int
	hitQueue   []blocks.ID
	ahead      []blocks.ID
	done       []blocks.ID
	handed     []blocks.ID // releaseHandedOut's scratch: one plan's device sources, leaf first
	lfIDs      []blocks.ID // leafFirst's scratch: the sources sorted, their depths, a chain
	lfDepth    []int32
	lfChain    []int32
	loads      []prefix.GroupLoad
	loadHits   []uint32 // CompleteTransfer's scratch: a load's blocks' device uses (keptLoadHits)
	before     []int    // commitTiered's scratch: blocks cached per group before
	// chain is, per group, the match units per block when the group's blocks keep their
	// waiting prefix behind them in the free queue (full attention: requeuePrefix), 0
	// for a group whose blocks keep the order they were freed in. Filled from the specs
	// by the first TakePlans or CompleteTransfer (chains), the only ways to requeuePrefix.
	chain      []int
	committing bool // commitTiered is running commit's device pass
	// kept are the demoted blocks a StreamOrdered store released as TakePlans handed it
	// out and left cached at the free queue's front (releaseHandedOut), until the store
	// completes. They are in order of store: TakePlans numbers the stores it hands out in
	// increasing order, so settleKept finds a store's run by binary search. A settled
	// entry is dead (b the null block) until keptHead passes it or keptDead grows to half
	// the list, when the list is compacted.
	kept               []keptSource
	keptHead, keptDead int
}

// keptSource is a demoted block kept cached after its stream-ordered store was handed out:
// the store, the block, and the entry it was cached for then (an allocation since may have
// evicted it and cached another).
type keptSource struct {
	id prefix.TransferID
	b  blocks.ID
	e  prefix.GroupEntry
}

func newTierState(c *prefix.TierConfig, numBlocks int) *tierState {
	return &tierState{write: c.Tiers[0].Write, hitsN: c.Tiers[0].Hits, freeTarget: c.FreeTarget, streamed: c.StreamOrdered,
		demote: make([]bool, numBlocks)}
}

// prepareStore prepares the copy of cached block b into tier 1 and holds b for it (a
// queued block leaves the queue); demote marks it to leave the device once copied.
func (s *store) prepareStore(b blocks.ID, demote bool) bool {
	if !s.t.PrepareStore(b) {
		return false
	}
	must(s.q.Retain(b))
	if ts := s.tiers; demote && !ts.demote[b] {
		ts.demote[b] = true
		ts.demoting++
	}
	return true
}

// commitTiered is commit with lower tiers: nothing past a load in flight is cached (the
// loaded blocks are cached once they hold their KV), and tier 1's write policy runs for
// the blocks just cached.
func (m *Manager) commitTiered(s *seq, tokens int) {
	if s.loading != 0 {
		tokens = min(tokens, s.loadFrom)
	}
	ts := m.st.tiers
	ts.before = append(ts.before[:0], s.numCached...)
	ts.committing = true
	m.commit(s, tokens)
	ts.committing = false
	for g, nc := range ts.before {
		if m.caches[g] && s.numCached[g] > nc {
			m.st.cachedRun(s.tables[g][nc:s.numCached[g]])
		}
	}
}

// countEvictions counts, in the device's TierStats, the cached blocks among ids, just
// allocated and about to be evicted.
func (s *store) countEvictions(ids []blocks.ID) {
	for _, b := range ids {
		if s.t.IsCached(b) {
			s.t.CountDeviceEviction(b)
		}
	}
}

// cachedRun runs tier 1's write policy for blocks just cached, whose device uses start
// at 1, their computation (prefix.GroupTree.SetDeviceHits: a copy's slot starts with them).
func (s *store) cachedRun(ids []blocks.ID) {
	ts := s.tiers
	through := ts.write == prefix.WriteThrough || ts.write == prefix.WriteAfterHits && ts.hitsN <= 1
	if through {
		s.t.BatchTierEvents()
		defer s.t.FlushTierEvents()
	}
	for _, b := range ids {
		if b == blocks.NullID || !s.t.IsCached(b) {
			continue
		}
		s.t.SetDeviceHits(b, 1)
		if through {
			s.prepareStore(b, false)
		}
	}
}

// hitRun counts a use on the device of each of ids, blocks a hit took, in the tree
// (prefix.GroupTree.SetDeviceHits), whatever the write policy: a copy's slot starts with
// them, so that tier 1's policy ranks a block hit often on the device above one hit once,
// as an Index's tiers rank a node's copy by its hits. Under WriteAfterHits a block whose
// uses reach the threshold, its computation counted as the first (as an Index counts a
// node's: Hits 1 stores it as it is cached, Hits 2 at its first hit), is stored by the
// next TakePlans (reserving a slot now could evict a block an admission found in the tier
// and is about to load).
func (s *store) hitRun(ids []blocks.ID) {
	ts := s.tiers
	for _, b := range ids {
		if b == blocks.NullID {
			continue
		}
		h := s.t.DeviceHits(b) + 1
		s.t.SetDeviceHits(b, h)
		if ts.write == prefix.WriteAfterHits && h == ts.hitsN {
			ts.hitQueue = append(ts.hitQueue, b)
		}
	}
}

// startStores starts the copies TakePlans hands out with the tree's: blocks that reached
// the hit threshold, then write-back demotions of the free queue's next victims.
func (s *store) startStores() {
	ts := s.tiers
	s.t.BatchTierEvents() // the slots these copies drop to make room: one event per tier
	defer s.t.FlushTierEvents()
	for _, b := range ts.hitQueue {
		if s.t.IsCached(b) && s.t.DeviceHits(b) >= ts.hitsN {
			s.prepareStore(b, false)
		}
	}
	ts.hitQueue = ts.hitQueue[:0]
	if ts.freeTarget == 0 || ts.write != prefix.WriteBack {
		return
	}
	left := ts.freeTarget - ts.demoting
	buf := ts.ahead[:0]
	for b := range s.q.All() {
		if left <= 0 {
			break
		}
		left--
		if e, ok := s.t.Entry(b); ok && !s.t.HeldBelow(e.Node, e.Group) {
			buf = append(buf, b)
		}
	}
	for _, b := range buf {
		s.prepareStore(b, true)
	}
	ts.ahead = buf[:0]
}

// transferDone drops the reference a completed copy held on device block b (a store's
// source, a load's destination). A demoted block only the copy held leaves the device
// once copied, to the queue's front, uncached. If the copy failed, the block keeps its KV
// and stays cached, released as any block freed now is: to the queue's tail, evicted
// last. vLLM's offloading connector does the same: the blocks a store reads are freed
// when the store's job finishes, whatever its outcome, and a freed block goes to the
// tail of the free queue. At the front it would be the next allocation's victim, lost
// with no copy anywhere, and the next TakePlans would retry its failing copy at once. A
// full-attention store's source that goes to the tail (a failed demotion's, a
// write-through or hit-threshold copy's, whatever its outcome) takes its prefix waiting in
// the queue behind it (requeuePrefix), so that the queue stays leaf first: under
// StreamOrdered it goes back as TakePlans hands the store out, before its outcome is
// known, and with a copy below it the lower tier may still drop that copy later.
func (s *store) transferDone(b blocks.ID, store, ok bool) {
	ts := s.tiers
	if store && ts.demote[b] {
		ts.demote[b] = false
		ts.demoting--
		if s.ref(b) == 1 && (ok || !s.t.IsCached(b)) {
			if s.t.IsCached(b) {
				s.evict(b)
			}
			must(s.q.ReleaseToFront(b))
			return
		}
	}
	s.release(b)
	if store && s.ref(b) == 0 {
		s.requeuePrefix(b) // cached, now at the back: its waiting prefix goes behind it
	}
}

// requeuePrefix moves the cached blocks of b's prefix that wait in the free queue, for
// b's group, to its back behind b, nearest first: b, a store's source, went to the back,
// and its prefix goes with it, so that the queue stays leaf first. This is the order
// vLLM's free queue has: a request with a store in flight keeps all its blocks until the
// store ends (the offloading connector's request_finished delays their free), then frees
// them last block first to the queue's tail, its prefix ranked as freed now behind its
// leaf. Before, b went behind its parent, and the next allocation evicted the parent
// first and left b cached below it.
//
// The walk steps from block to block of the group (ts.chain units: a block of 8 tokens
// over units of 4 has its parent two nodes up; before, the walk looked one node up, found
// no block of the group and stopped). It goes past an ancestor that only copies hold
// (another store's source, back later with its own prefix behind it; before, it stopped
// there and left the ancestors above ahead of b). It stops at the first ancestor with no
// block cached, or with one held otherwise: a sequence holds its prefix too, and a source
// of the same completion, released after b (leaf first), takes the rest behind it, so a
// store costs O(its blocks + the depth of its first waiting or copied ancestors).
//
// Only full attention keeps its prefix behind its blocks: a hit reads every block before
// its end, and CheckInvariants keeps its closure. A sliding window's, a chunk's or a Mamba
// state's block goes back alone, as vLLM frees one: its earlier blocks were released as
// the window moved, oldest first, and keep those places. Before, the walk moved them too,
// ranked as used now, up to the root, after every such store.
func (s *store) requeuePrefix(b blocks.ID) {
	e, ok := s.t.Entry(b)
	if !ok {
		return
	}
	k := s.tiers.chain[e.Group]
	if k == 0 {
		return
	}
	for n := s.up(e.Node, k); n != prefix.NoNode && !s.t.IsRoot(n); n = s.up(n, k) {
		cached, held := false, false
		for x := s.t.First(n, e.Group); x != blocks.NullID; x = s.t.NextCached(x) {
			cached = true
			switch r := s.ref(x); {
			case r == 0:
				must(s.q.Retain(x))
				s.release(x)
			case r > s.t.TransferRefs(x):
				held = true
			}
		}
		if !cached || held {
			return
		}
	}
}

// up returns the node k levels above n, or the root (or prefix.NoNode) it reaches first.
func (s *store) up(n prefix.Node, k int) prefix.Node {
	for ; k > 0 && n != prefix.NoNode && !s.t.IsRoot(n); k-- {
		n = s.t.Parent(n)
	}
	return n
}

// chains fills ts.chain from the groups' specs once (tierState.chain).
func (m *Manager) chains() {
	ts := m.st.tiers
	if ts.chain != nil {
		return
	}
	ts.chain = make([]int, len(m.specs))
	for g, sp := range m.specs {
		if sp.Downward() {
			ts.chain[g] = m.k[g]
		}
	}
}

// leafFirst orders the device sources of a store as they go back to the free queue (at
// its completion, or for a StreamOrdered store as TakePlans hands it out) so that every
// block comes before the blocks of its node's ancestors (deeper nodes first; ties keep
// their order), as releaseAll releases a table last first: released in this order, they
// go to the free queue leaf first, and eviction in queue order keeps full attention's
// closure. A plan's order is its sources' IDs, which may put a parent first: a swap-out
// whose store failed then had its parent evicted before its child, the child left cached
// below an uncached parent that no tier holds. A store completed ok is ordered too: its
// copies hold the closure at first, but the lower tier may drop them later (its policy's
// eviction, a move down), and a parent evicted from the device before its child then
// leaves the child cached below a parent no tier holds.
//
// Only a block's order against its ancestors among bs matters, so depth is counted within
// bs (a block whose parent's block is in bs is one deeper than it): O(n log n) with the
// scratch slices kept, never a walk to the root, and nothing allocated in steady state.
func (s *store) leafFirst(bs []blocks.ID) {
	if len(bs) < 2 {
		return
	}
	ts := s.tiers
	ids := append(ts.lfIDs[:0], bs...)
	slices.Sort(ids)
	d := ts.lfDepth[:0]
	for range ids {
		d = append(d, -1)
	}
	chain := ts.lfChain[:0]
	deepest := int32(0)
	for i := range ids {
		if d[i] >= 0 {
			continue
		}
		chain = append(chain[:0], int32(i))
		top := int32(-1) // the depth of the nearest ancestor in bs already counted
		for {
			p := s.parentIn(ids, ids[chain[len(chain)-1]])
			if p < 0 {
				break
			}
			if d[p] >= 0 {
				top = d[p]
				break
			}
			chain = append(chain, int32(p))
		}
		for k := len(chain) - 1; k >= 0; k-- {
			top++
			d[chain[k]] = top
		}
		deepest = max(deepest, top)
	}
	ts.lfIDs, ts.lfDepth, ts.lfChain = ids, d, chain
	if deepest == 0 {
		return // no block's parent is among them (a step's write-through stores): in order
	}
	depth := func(b blocks.ID) int32 {
		i, _ := slices.BinarySearch(ids, b)
		return d[i]
	}
	slices.SortStableFunc(bs, func(a, b blocks.ID) int { return cmp.Compare(depth(b), depth(a)) })
}

// parentIn returns the index in ids (sorted) of a block cached for b's group at the node
// of b's parent block (its group's units per block up: tierState.chain, one node for a
// group that keeps no prefix), or -1 when there is none (or b is not cached).
func (s *store) parentIn(ids []blocks.ID, b blocks.ID) int {
	e, ok := s.t.Entry(b)
	if !ok {
		return -1
	}
	p := s.up(e.Node, max(s.tiers.chain[e.Group], 1))
	if p == prefix.NoNode || s.t.IsRoot(p) {
		return -1
	}
	for x := s.t.First(p, e.Group); x != blocks.NullID; x = s.t.NextCached(x) {
		if j, found := slices.BinarySearch(ids, x); found {
			return j
		}
	}
	return -1
}

// AdmitResult says what AdmitTiered did.
type AdmitResult struct {
	// Hit is the device hit in tokens: KV the sequence shares and must not compute. A
	// lower-tier hit that needs no block loaded (its blocks all before the groups'
	// windows or chunks) is part of it, with no load.
	Hit int
	// LoadTokens are the tokens after Hit that lower tiers hold: the sequence's own blocks
	// for them are being loaded (transfer Load, which TakePlans hands out). The caller
	// computes neither Hit nor these tokens, and runs the sequence once CompleteTransfer
	// confirms the load; if it fails, it computes them after all (CompleteTransfer says).
	LoadTokens int
	// Load names the load transfer, 0 when LoadTokens is 0.
	Load prefix.TransferID
	// Tiers counts the blocks, over all groups, the sequence takes from each tier:
	// Blocks[Device] shared from the device, the others loaded (their sum is Lower).
	Tiers prefix.TierHit
}

// LoadDone says what completing a transfer meant for the Manager's sequences (as
// blocktable.LoadDone).
type LoadDone = blocktable.LoadDone

// hitLower is the longest hit every group can serve with the blocks past the device hit
// read from the lower tiers.
func (m *Manager) hitLower(s *seq, limit, hit int) int {
	m.view.devUnits = hit / m.unit
	return m.hitIn(s, limit, (*lowerView)(&m.view))
}

// hitTiers is the device hit and, past it, the hit with the lower tiers' continuation
// (full), for a lookup of at most limit tokens whose device hit is hit. A continuation
// that needs no block loaded in any group (every block it adds lies before its groups'
// windows or chunks: a sliding window of one token, a hit ending on a chunk boundary) is
// a pure hit, as vLLM's device hit whose blocks remove_skipped_blocks turns to null
// blocks at once: the tiers show the prefix was computed, nothing of it is needed again,
// so it is no load but part of the hit (hit == full), with no transfer.
func (m *Manager) hitTiers(s *seq, limit, hit int) (int, int) {
	full := max(hit, m.hitLower(s, limit, hit))
	if full == hit {
		return hit, full
	}
	for g := range m.specs {
		if m.participates(g) && m.deviceEnd(g, hit, full) < full/m.bs[g] {
			return hit, full
		}
	}
	return full, full
}

// lowerView is a cachedView that reads the device's lists before devUnits and the lower
// tiers' from there: a type of its own, so that a lookup of the device alone pays nothing
// for the tiers.
type lowerView cachedView

// Cached implements Cached: block i is cached in every group of the kind, on the device
// before devUnits and in some lower tier from there.
func (v *lowerView) Cached(i int) bool {
	u := (i+1)*v.k - 1
	if u < v.devUnits || u >= len(v.path) {
		return (*cachedView)(v).Cached(i)
	}
	n := v.path[u]
	for _, g := range v.kind {
		if !(*cachedView)(v).lower(n, g) {
			return false
		}
	}
	return true
}

// lower reports whether a lower tier holds group g's block at node n for a lookup.
func (v *cachedView) lower(n prefix.Node, g int) bool {
	return v.st.t.LowerTier(n, g) != prefix.Device
}

// loadStates gives each Mamba align group of s whose state at the hit a load brings (the
// hit's last block, from hit to full tokens) the block it loads into: appended after the
// group's null entries, it becomes the sequence's last state once the running block is
// allocated after it, as a device hit's state block does. Admit calls it once every
// group has taken its device hit, so that these allocations evict none of it.
func (m *Manager) loadStates(s *seq, hit, full int) {
	for g := range m.specs {
		if m.align[g] && m.deviceEnd(g, hit, full) < full/m.bs[g] {
			b := m.st.alloc()
			m.hold(s, g, b)
			s.tables[g] = append(s.tables[g], b)
		}
	}
}

// deviceEnd is where group g's device blocks end in a hit of full tokens whose first hit
// tokens are on the device: past it, up to full/bs, the blocks are loaded.
func (m *Manager) deviceEnd(g, hit, full int) int {
	hb := full / m.bs[g]
	skip := min(m.specs[g].Skipped(full)/m.bs[g], hb)
	if full == hit {
		return hb
	}
	return max(skip, hit/m.bs[g])
}

// prepareLoad prepares the load of s's blocks from the device hit to full tokens.
func (m *Manager) prepareLoad(s *seq, hit, full int, r *AdmitResult) {
	ts := m.st.tiers
	lds := ts.loads[:0]
	for g := range m.specs {
		if !m.participates(g) {
			continue
		}
		for i := m.deviceEnd(g, hit, full); i < full/m.bs[g]; i++ {
			n := s.path[(i+1)*m.k[g]-1]
			lds = append(lds, prefix.GroupLoad{Node: n, Group: g, Dst: s.tables[g][i]})
			r.Tiers.Blocks[m.st.t.LowerTier(n, g)]++
			r.Tiers.Lower++
		}
	}
	ts.loads = lds
	id, err := m.st.t.PrepareLoad(lds)
	if err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: hybrid: preparing the load the lookup found: %v", err))
	}
	for _, ld := range lds {
		must(m.st.q.Retain(ld.Dst))
	}
	s.loading, s.loadFrom, s.loadTo = id, hit, full
	if m.loads == nil {
		m.loads = make(map[prefix.TransferID]blocktable.SeqID)
	}
	m.loads[id] = s.id
	r.Load, r.LoadTokens = id, full-hit
}

// TakePlans appends the transfer plans to dst (the tree's, after the device's stores: the
// demotions below Config.Tiers.FreeTarget, write-through and hit-threshold copies, and the
// loads of admitted sequences), and returns dst. The server executes them and confirms
// each with CompleteTransfer, as blocktable.Manager's. Under TierConfig.StreamOrdered a
// store's device blocks are released as its plan is handed out, not when it completes: a
// demoted block goes to the free queue's front still cached, so that the next allocation
// takes it (its copy counted in flight, not lost), and until then a lookup still hits it.
// Without tiers it returns dst.
func (m *Manager) TakePlans(dst []prefix.Plan) []prefix.Plan {
	if m.st.tiers == nil {
		return dst
	}
	m.chains()
	m.st.startStores()
	from := len(dst)
	dst = m.st.t.TakePlans(dst)
	if m.st.tiers.streamed {
		m.st.releaseHandedOut(dst[from:])
	}
	return dst
}

// releaseHandedOut releases the device sources of the stores plans hand out under
// TierConfig.StreamOrdered, as blocktable.Manager's do: the server issues the copies
// before anything writes those blocks again, so they are reusable now (the tree dropped
// their transfer references as it handed the plans out). A demoted one only the copy held
// goes to the free queue's front but stays cached until an allocation takes it: if its
// copy then fails while the device still has it, it keeps its KV, as a failed demotion
// without StreamOrdered does (settleKept). Before, it was evicted here, and a failed copy
// lost it with no copy anywhere.
//
// A plan's sources are released leaf first (leafFirst), so that eviction in queue order
// keeps full attention's closure if the copy fails: those going to the front root first
// (each goes before the one released last), the others, to the back, leaf first. Before,
// they went in the plan's order, by block ID: a write-through store's parent went to the
// back before its child, and if the copy failed, the next allocation evicted the parent
// and left the child cached below it.
func (s *store) releaseHandedOut(plans []prefix.Plan) {
	ts := s.tiers
	for _, p := range plans {
		if p.Kind != prefix.Store || p.From != prefix.Device {
			continue
		}
		bs := ts.handed[:0]
		for _, r := range p.Runs {
			for b := blocks.ID(r.Src); b < blocks.ID(r.Src+r.Blocks); b++ {
				bs = append(bs, b)
			}
		}
		s.leafFirst(bs)
		for i := len(bs) - 1; i >= 0; i-- {
			b := bs[i]
			if e, cached := s.t.Entry(b); ts.demote[b] && s.ref(b) == 1 && cached {
				ts.demote[b] = false
				ts.demoting--
				ts.kept = append(ts.kept, keptSource{id: p.ID, b: b, e: e})
				must(s.q.ReleaseToFront(b))
				bs[i] = blocks.NullID
			}
		}
		for _, b := range bs {
			if b != blocks.NullID {
				s.transferDone(b, true, true)
			}
		}
		ts.handed = bs
	}
}

// settleKept ends the kept sources of stream-ordered store id (releaseHandedOut) that the
// device still caches for the same entry and no sequence took since: confirmed (ok), the
// block is evicted, as a confirmed demotion's is, keeping its place at the queue's front;
// failed, it keeps its KV and goes to the queue's tail, released now, its waiting prefix
// behind it (requeuePrefix), as transferDone does with a failed demotion's block.
//
// It costs O(log n + the store's own blocks) in the n kept blocks of every store in
// flight, amortized (before, it scanned all n: a server with 1,000 swaps' stores in
// flight paid 4,000 entries a completion).
func (s *store) settleKept(id prefix.TransferID, ok bool) {
	ts := s.tiers
	live := ts.kept[ts.keptHead:]
	i, found := slices.BinarySearchFunc(live, id, func(r keptSource, id prefix.TransferID) int { return cmp.Compare(r.id, id) })
	if !found {
		return
	}
	for ; i < len(live) && live[i].id == id; i++ {
		r := &live[i]
		if r.b == blocks.NullID {
			continue // settled (a store completes once; kept for the order's sake)
		}
		b := r.b
		r.b = blocks.NullID
		ts.keptDead++
		if e, cached := s.t.Entry(b); !cached || e != r.e || s.ref(b) != 0 {
			continue // allocated since, or taken by a sequence's hit
		}
		if ok {
			s.evict(b)
		} else {
			must(s.q.Retain(b))
			s.release(b)
			s.requeuePrefix(b)
		}
	}
	for ts.keptHead < len(ts.kept) && ts.kept[ts.keptHead].b == blocks.NullID {
		ts.keptHead++
		ts.keptDead--
	}
	switch {
	case ts.keptHead == len(ts.kept):
		ts.kept, ts.keptHead = ts.kept[:0], 0
	case 2*ts.keptDead > len(ts.kept)-ts.keptHead || 2*ts.keptHead > len(ts.kept):
		k := 0
		for _, r := range ts.kept[ts.keptHead:] {
			if r.b != blocks.NullID {
				ts.kept[k] = r
				k++
			}
		}
		ts.kept, ts.keptHead, ts.keptDead = ts.kept[:k], 0, 0
	}
}

// CompleteTransfer confirms transfer id with the server's outcome: the copy's device
// blocks are handed back (a demoted block leaves the device once copied). For a
// sequence's load, ok caches its loaded blocks; failed evicts the keys from their tiers
// and leaves the blocks the sequence's own, for it to compute (LoadDone.ComputeTokens),
// and caches them as admission would have. A sequence finished or preempted while its
// load was in flight is simply gone: its blocks return to the free queue here. It fails
// with prefix.ErrNoTiers without tiers and prefix.ErrUnknownTransfer for an unknown id,
// changing nothing.
func (m *Manager) CompleteTransfer(id prefix.TransferID, ok bool) (LoadDone, error) {
	ts := m.st.tiers
	if ts == nil {
		return LoadDone{}, prefix.ErrNoTiers
	}
	r, dev, err := m.st.t.CompleteTransfer(id, ok, ts.done[:0])
	if err != nil {
		return LoadDone{}, err
	}
	m.chains()
	ts.done = dev
	if r.Kind == prefix.Store {
		m.st.leafFirst(dev)
	}
	for _, b := range dev {
		m.st.transferDone(b, r.Kind == prefix.Store, ok)
	}
	if len(ts.kept) > ts.keptHead && r.Kind == prefix.Store {
		m.st.settleKept(id, ok)
	}
	if ok && r.Kind == prefix.Load {
		m.keptLoadHits(dev, false)
	}
	done := LoadDone{Result: r}
	if seqID, found := m.loads[id]; found {
		delete(m.loads, id)
		if s, live := m.seqs[seqID]; live && s.loading == id {
			s.loading = 0
			done.Seq, done.Loaded = seqID, true
			tokens := uint64(s.loadTo - s.loadFrom)
			if ok && !s.loadResumed {
				m.tierCounts.LoadedTokens += tokens
			} else if !ok {
				done.ComputeTokens = int(tokens)
				m.tierCounts.LoadFailedTokens += tokens
			}
			m.commit(s, s.computed)
			if ok {
				m.keptLoadHits(dev, true)
			}
		}
	}
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return done, nil
}

// keptLoadHits keeps the device uses the tree gave a load's blocks, their content's in the
// tier they came from (prefix.GroupTree.CompleteTransfer), across the commit that caches
// them, which starts a block's uses at 1 (cachedRun): saved before it, set again after it
// on the blocks it cached. A copy of such a block made later, once the tier dropped its
// slot, then ranks by every use, as an Index's promoted node keeps its entry's hits.
func (m *Manager) keptLoadHits(dev []blocks.ID, restore bool) {
	ts, t := m.st.tiers, m.st.t
	if !restore {
		ts.loadHits = ts.loadHits[:0]
		for _, b := range dev {
			ts.loadHits = append(ts.loadHits, t.DeviceHits(b))
		}
		return
	}
	for i, b := range dev {
		if t.IsCached(b) && ts.loadHits[i] > t.DeviceHits(b) {
			t.SetDeviceHits(b, ts.loadHits[i])
		}
	}
}

// TierCounts are the Manager's counters of its lower tiers, beside prefix.TierStats.
type TierCounts struct {
	// LoadedTokens and LoadFailedTokens count the tokens of loads from lower tiers that
	// completed ok (for admissions that are not Resumed) and that failed.
	LoadedTokens, LoadFailedTokens uint64
	// SwapOuts and SwapIns count the sequences Swap preemption put into the tiers and
	// Resume brought back.
	SwapOuts, SwapIns uint64
}

// TierCounts returns the lower tiers' counters (Stats has them too).
func (m *Manager) TierCounts() TierCounts { return m.tierCounts }

// tierStats fills st's lower-tier counters.
func (m *Manager) tierStats(st *Stats) {
	c := &m.tierCounts
	st.Swapped = len(m.swapped)
	st.SwapOuts, st.SwapIns, st.LoadedTokens, st.LoadFailedTokens = c.SwapOuts, c.SwapIns, c.LoadedTokens, c.LoadFailedTokens
}

// PendingTransfers is the number of transfers prepared and not yet completed.
func (m *Manager) PendingTransfers() int { return m.st.t.PendingTransfers() }

// TierStats returns tier t's counters (prefix.TierStats; the zero value for a tier the
// Manager lacks). The device's Pending is the blocks being demoted.
func (m *Manager) TierStats(t prefix.Tier) prefix.TierStats {
	st := m.st.t.TierStatsOf(t)
	if t == prefix.Device && m.st.tiers != nil {
		st.Pending = m.st.tiers.demoting
	}
	return st
}

// NumTiers is the number of tiers, the device included (1 without Config.Tiers).
func (m *Manager) NumTiers() int { return m.st.t.NumTiers() }

// Loading returns the load transfer sequence id waits for (0: none).
func (m *Manager) Loading(id blocktable.SeqID) (prefix.TransferID, error) {
	s, ok := m.lookup(id)
	if !ok {
		return 0, m.missing("loading", id)
	}
	return s.loading, nil
}

// checkTiers verifies the device's side of the tiers: demotions counted, each held by a
// copy, and every loading sequence filed under its transfer.
func (m *Manager) checkTiers() error {
	ts := m.st.tiers
	n := 0
	for b, d := range ts.demote {
		if d {
			n++
			if m.st.t.TransferRefs(blocks.ID(b)) == 0 {
				return fmt.Errorf("block %d is being demoted with no copy in flight", b)
			}
		}
	}
	dead := 0
	for i, r := range ts.kept[ts.keptHead:] {
		if i > 0 && r.id < ts.kept[ts.keptHead+i-1].id {
			return fmt.Errorf("kept sources out of store order: %d after %d", r.id, ts.kept[ts.keptHead+i-1].id)
		}
		if r.b == blocks.NullID {
			dead++
		}
	}
	if dead != ts.keptDead || (ts.keptHead < len(ts.kept) && ts.kept[ts.keptHead].b == blocks.NullID) {
		return fmt.Errorf("%d kept sources settled, counted %d (head %d of %d)", dead, ts.keptDead, ts.keptHead, len(ts.kept))
	}
	if n != ts.demoting {
		return fmt.Errorf("%d blocks flagged demoting, counted %d", n, ts.demoting)
	}
	for id, s := range m.seqs {
		if s.loading != 0 && m.loads[s.loading] != id {
			return fmt.Errorf("seq %d waits for load %d, filed under seq %d", id, s.loading, m.loads[s.loading])
		}
	}
	return nil
}

// MatchTiers returns what AdmitTiered would take for req (its namespace, HitLimit and
// SkipCacheRead included), touching nothing: the hit (Admit's, MatchRequest's: the device
// hit and a lower-tier continuation that needs nothing loaded), and the tokens after it
// that the lower tiers hold and an admission would load (0 without tiers). A nil req is
// refused with blocktable.ErrInvalidArgument, as MatchRequest and Explain refuse it.
func (m *Manager) MatchTiers(req *Request) (hit, load int, err error) {
	if req == nil {
		return 0, 0, errNilRequest
	}
	if len(req.Prompt) == 0 {
		return 0, 0, nil
	}
	s := m.newSeq(&Request{Prompt: req.Prompt, MaxTokens: len(req.Prompt), Namespace: req.Namespace})
	_, hit, full, _ := m.find(s, req, -1)
	m.spare = append(m.spare, s)
	return hit, full - hit, nil
}
