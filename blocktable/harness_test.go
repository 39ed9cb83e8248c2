package blocktable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// harness drives a Manager with operations decoded from a few integers (by rapid or by
// the fuzzer) and checks it against a reference model after every one:
//
//   - the model holds each sequence's tokens and multimodal inputs (images whose
//     placeholder tokens some share with different content hashes, cut by Truncate as
//     the Manager documents); the Manager must agree on the tokens;
//   - a fake device memory holds, per flat slot, the KV written there (kv: the token, and
//     which image and which of its patches when an input covers the position), and a fake
//     host memory per slot of the index's host tier. Every write the Manager allows goes
//     through its slots, copy-on-writes and the tiers' plans (swaps, demotions, loads) are
//     executed as a server would, and after each operation every position of every
//     running sequence (but those whose load is in flight) must read back its own KV:
//     no table ever points at another sequence's KV or at a block that was freed and
//     reused, and every prefix hit and every load really holds the prompt, images
//     included;
//   - every admission's hit is one the model expects: each block of it was, with the same
//     KV (so the same image where one overlaps it), a full block of some sequence of the
//     namespace before, and it is at least the leading blocks with the same KV a running
//     sequence holds cached (which nothing can evict);
//   - a failed operation leaves a deep snapshot of the state unchanged;
//   - CheckInvariants holds (every refcount equals its holders) and, at the end, every
//     block is back in the pool or the index.
type harness struct {
	t      require.TestingT
	m      *Manager
	pool   *blocks.Pool
	index  *prefix.Index
	bs     int
	window int

	dev, hostMem []int32
	seqs         map[SeqID][]int32 // the model: running and swapped sequences' tokens
	mm           map[SeqID][]prefix.MMInput
	// rest is a chunked prefill's prompt tokens not yet appended (Request.Prefill): the
	// next appends feed them, as a scheduler feeds its prompt's chunks, and mm covers them.
	rest      map[SeqID][]int32
	swapped   map[SeqID]bool
	ns        map[SeqID]int
	waiting   [][]int32          // tokens of sequences preempted in recompute mode
	waitingMM [][]prefix.MMInput // their inputs in the model (cut by Truncate as kv reads them)
	waitingIn [][]prefix.MMInput // their inputs as the Manager had them (Inputs), which a readmission passes
	waitingNS []int
	inputs    map[SeqID][]prefix.MMInput // Inputs of every sequence before the current op
	// seen holds, per namespace, the KV of every prefix of full blocks some sequence
	// had (kvKey): a hit can only be made of those.
	seen       map[int]map[string]bool
	next       SeqID
	lastAppend map[SeqID]int // Len before the last append, for window checks
	ops        int
	// plans are the transfers handed out and not completed; loading the positions
	// [from, to) of each sequence whose load is in flight.
	plans   map[prefix.TransferID][]prefix.Plan
	loading map[SeqID][2]int
}

type harnessConfig struct {
	blocks, hostBlocks, bs, window int
	index                          bool
	preemption                     evict.Preemption
	// stream builds the host tier StreamOrdered, demoting ahead of need below 2 free blocks.
	stream bool
}

func newHarness(t require.TestingT, c harnessConfig) *harness {
	pool, err := blocks.New(c.blocks, blocks.WithNullBlock())
	require.NoError(t, err)
	clock := &evict.Counter{}
	cfg := Config{Pool: pool, BlockSize: c.bs, SlidingWindow: c.window, Clock: clock, Preemption: c.preemption}
	var idx *prefix.Index
	if c.index {
		// Swap keeps its victims in the host tier (write-back, so that evicted prefixes go
		// there too).
		idx, err = prefix.New(pool, c.bs, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
			Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: c.hostBlocks}}, BlockBytes: 1,
			StreamOrdered: c.stream, FreeTarget: map[bool]int{true: 2}[c.stream],
		}))
		require.NoError(t, err)
		cfg.Index = idx
	}
	m, err := New(cfg)
	require.NoError(t, err)
	h := &harness{
		t: t, m: m, pool: pool, index: idx, bs: c.bs, window: c.window,
		dev: make([]int32, c.blocks*c.bs), hostMem: make([]int32, c.hostBlocks*c.bs),
		seqs: map[SeqID][]int32{}, mm: map[SeqID][]prefix.MMInput{}, rest: map[SeqID][]int32{}, swapped: map[SeqID]bool{}, ns: map[SeqID]int{},
		seen:       map[int]map[string]bool{},
		lastAppend: map[SeqID]int{}, plans: map[prefix.TransferID][]prefix.Plan{}, loading: map[SeqID][2]int{},
	}
	for i := range h.dev {
		h.dev[i] = -1
	}
	return h
}

// op is one decoded operation: kind selects it, a, b and c parametrise it.
type op struct{ kind, a, b, c int }

const numOps = 12

func (o op) String() string { return fmt.Sprintf("op{%d %d %d %d}", o.kind, o.a, o.b, o.c) }

// ids lists running (or, with swapped, swapped) sequences in ID order.
func (h *harness) ids(swapped bool) []SeqID {
	var out []SeqID
	for id := range h.seqs {
		if h.swapped[id] == swapped {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (h *harness) pick(swapped bool, k int) (SeqID, bool) {
	ids := h.ids(swapped)
	if len(ids) == 0 {
		return 0, false
	}
	return ids[k%len(ids)], true
}

// tokensFor makes n tokens from a tiny alphabet, so that prompts share prefixes often
// and whole blocks repeat (duplicates in the index).
func tokensFor(seed, n int) []int32 {
	out := make([]int32, n)
	x := uint32(seed)*2654435761 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		if seed%3 == 0 {
			out[i] = int32(i % 5) // highly repetitive prompts
		} else {
			out[i] = int32(x % 3)
		}
	}
	return out
}

// mmImages are the images prompts draw: img-a and img-b share a placeholder token (and a
// length), so that prompts identical in tokens differ only in the image; text tokens
// (tokensFor) never equal a placeholder.
var mmImages = []struct {
	hash string
	tok  int32
	n    int
}{{"img-a", 100, 3}, {"img-b", 100, 3}, {"img-c", 101, 5}}

// promptFor is tokensFor's prompt of n tokens with images placed in it (sorted, within
// the prompt, some adjacent), or none for one seed in four. The placement and the
// images are drawn apart from the text, so that prompts of the same text (every seed
// divisible by 3 has the same) carry different images at the same places.
func promptFor(seed, n int) ([]int32, []prefix.MMInput) {
	toks := tokensFor(seed, n)
	if seed%4 == 0 {
		return toks, nil
	}
	var mm []prefix.MMInput
	layout := uint32(seed/4%5)*2654435761 + 7
	pick := uint32(seed)*2246822519 + 3
	for pos := 0; ; {
		layout ^= layout << 13
		layout ^= layout >> 17
		layout ^= layout << 5
		pick = pick*1103515245 + 12345
		pos += int(layout % 4) // text before the image
		im := mmImages[(pick>>16)%uint32(len(mmImages))]
		if pos+im.n > n {
			break
		}
		for i := range im.n {
			toks[pos+i] = im.tok
		}
		mm = append(mm, prefix.MMInput{Hash: im.hash, Offset: pos, Length: im.n})
		pos += im.n
	}
	return toks, mm
}

// cutMM is the model's Truncate of a sequence's inputs to n tokens, as the Manager
// documents it: an input that starts at or past n is dropped, one across n ends at n.
func cutMM(mm []prefix.MMInput, n int) []prefix.MMInput {
	var out []prefix.MMInput
	for _, in := range mm {
		if in.Offset < n {
			in.Length = min(in.Length, n-in.Offset)
			out = append(out, in)
		}
	}
	return out
}

// kv is the KV a server computes at position pos of a sequence with tokens toks and
// inputs mm: the token, and the image and its patch where an input covers pos.
func kv(toks []int32, mm []prefix.MMInput, pos int) int32 {
	v := toks[pos]
	for _, in := range mm {
		if pos >= in.Offset && pos < in.Offset+in.Length {
			img := slices.IndexFunc(mmImages, func(m struct {
				hash string
				tok  int32
				n    int
			}) bool {
				return m.hash == in.Hash
			})
			v |= int32(img+1)<<12 | int32(pos-in.Offset+1)<<20
		}
	}
	return v
}

// kvKey is the KV of positions [0, n) of tokens toks with inputs mm, as a map key.
func kvKey(toks []int32, mm []prefix.MMInput, n int) string {
	b := make([]byte, 0, 4*n)
	for pos := range n {
		b = binary.LittleEndian.AppendUint32(b, uint32(kv(toks, mm, pos)))
	}
	return string(b)
}

// learn adds the full blocks of every sequence to seen.
func (h *harness) learn() {
	for id, toks := range h.seqs {
		seen := h.seen[h.ns[id]]
		if seen == nil {
			seen = map[string]bool{}
			h.seen[h.ns[id]] = seen
		}
		for n := h.bs; n <= len(toks); n += h.bs {
			seen[kvKey(toks, h.mm[id], n)] = true
		}
	}
}

// checkHit checks an admission's hit (hit tokens, the device's and the loaded) of
// prompt with inputs mm in namespace ns against the model: every block of it was a full
// block with the same KV of a sequence before (a block overlapping another image, or an
// image where the prompt has text, never matches), and it covers at least the leading
// blocks with the same KV that a running sequence holds cached itself (not a duplicate
// of a copy it does not hold, which an eviction may drop), up to the last token, which
// is always computed. Only an index hits.
func (h *harness) checkHit(prompt []int32, mm []prefix.MMInput, ns, hit int) {
	if h.index == nil {
		require.Zero(h.t, hit)
		return
	}
	for n := h.bs; n <= hit; n += h.bs {
		require.True(h.t, h.seen[ns][kvKey(prompt, mm, n)], "a hit of %d tokens: its %d-token prefix %v %v was never a sequence's",
			hit, n, prompt[:n], mm)
	}
	limit := (len(prompt) - 1) / h.bs * h.bs
	for id, toks := range h.seqs {
		if h.swapped[id] || h.ns[id] != ns {
			continue
		}
		if _, loading := h.loading[id]; loading {
			continue
		}
		ids, err := h.m.Blocks(id)
		require.NoError(h.t, err)
		n := 0
		for n+h.bs <= min(limit, len(toks)) && h.index.IsCached(ids[n/h.bs]) && kvKey(prompt, mm, n+h.bs) == kvKey(toks, h.mm[id], n+h.bs) {
			n += h.bs
		}
		require.GreaterOrEqual(h.t, hit, n, "seq %d holds %d tokens of the prompt cached, the hit is %d", id, n, hit)
	}
}

type snapshotState struct {
	Stats Stats
	Refs  []int
	Host  prefix.TierStats
	Seqs  map[SeqID]SeqInfo
	Toks  map[SeqID][]int32
	MM    map[SeqID][]prefix.MMInput
	Evict int
}

func (h *harness) snapshot() snapshotState {
	s := snapshotState{Stats: h.m.Stats(), Seqs: map[SeqID]SeqInfo{}, Toks: map[SeqID][]int32{}, MM: map[SeqID][]prefix.MMInput{}}
	for i := range h.pool.NumBlocks() {
		s.Refs = append(s.Refs, h.pool.RefCount(blocks.ID(i)))
	}
	if h.index != nil {
		s.Host = h.index.TierStatsOf(1)
	}
	for id := range h.seqs {
		info, err := h.m.Seq(id)
		require.NoError(h.t, err)
		s.Seqs[id] = info
		toks, err := h.m.Tokens(id)
		require.NoError(h.t, err)
		s.Toks[id] = slices.Clone(toks)
		in, err := h.m.AppendInputs(nil, id)
		require.NoError(h.t, err)
		s.MM[id] = in
	}
	if h.index != nil {
		s.Evict = h.index.Reclaimable()
	}
	return s
}

// write stores the KV of seq's positions [from, to) through its slots.
func (h *harness) write(id SeqID, from, to int) {
	for pos := from; pos < to; pos++ {
		slot, err := h.m.Slot(id, pos)
		require.NoError(h.t, err)
		h.dev[slot] = kv(h.seqs[id], h.mm[id], pos)
	}
}

func (h *harness) copyBlock(mem []int32, src, dst blocks.ID, from []int32) {
	copy(mem[int(dst)*h.bs:int(dst+1)*h.bs], from[int(src)*h.bs:int(src+1)*h.bs])
}

// verify reads back every live position of every running sequence.
func (h *harness) verify() {
	require.NoError(h.t, h.m.CheckInvariants())
	for id, toks := range h.seqs {
		got, err := h.m.Tokens(id)
		require.NoError(h.t, err)
		require.True(h.t, slices.Equal(toks, got), "seq %d tokens: model %v, manager %v", id, toks, got)
		if h.swapped[id] {
			continue
		}
		info, err := h.m.Seq(id)
		require.NoError(h.t, err)
		require.Equal(h.t, len(toks), info.Tokens)
		first := 0
		if h.window > 0 {
			// Positions the next token attends to are kept; older ones may be gone.
			first = max(0, h.lastAppend[id]-h.window+1)
		}
		ld := h.loading[id]
		for pos := first; pos < len(toks); pos++ {
			if pos >= ld[0] && pos < ld[1] {
				continue // its load is in flight
			}
			slot, err := h.m.Slot(id, pos)
			require.NoError(h.t, err, "seq %d pos %d", id, pos)
			require.Equal(h.t, kv(toks, h.mm[id], pos), h.dev[slot], "seq %d pos %d reads another KV (slot %d)", id, pos, slot)
		}
	}
	h.learn()
	st := h.m.Stats()
	require.Equal(h.t, len(h.ids(false)), st.Running)
	require.Equal(h.t, len(h.ids(true)), st.Swapped)
}

// failed asserts that a rejected operation changed nothing.
func (h *harness) failed(before snapshotState, err error, sentinels ...error) {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			after := h.snapshot()
			// A rejected admission is counted; nothing else may move.
			after.Stats.RejectedAdmissions = before.Stats.RejectedAdmissions
			require.Equal(h.t, before, after, "a failed call changed the state: %v", err)
			return
		}
	}
	require.Fail(h.t, "unexpected error", "%v", err)
}

func (h *harness) apply(o op) {
	h.ops++
	before := h.snapshot()
	h.inputs = before.MM
	switch o.kind % numOps {
	case 0, 1: // admit a new sequence, or readmit a preempted one
		var prompt []int32
		var mm, in []prefix.MMInput // the model's inputs, and those the request passes
		ns := o.b % 2
		if o.kind%numOps == 1 && len(h.waiting) > 0 {
			k := o.a % len(h.waiting)
			prompt, mm, in, ns = h.waiting[k], h.waitingMM[k], h.waitingIn[k], h.waitingNS[k]
			h.waiting = slices.Delete(h.waiting, k, k+1)
			h.waitingMM = slices.Delete(h.waitingMM, k, k+1)
			h.waitingIn = slices.Delete(h.waitingIn, k, k+1)
			h.waitingNS = slices.Delete(h.waitingNS, k, k+1)
		} else {
			prompt, mm = promptFor(o.a, 1+o.c%(5*h.bs))
			in = mm
		}
		id := h.next
		if o.c%17 == 16 && len(h.seqs) > 0 {
			id, _ = h.pick(false, o.a) // a duplicate ID: must be refused
			if len(h.ids(false)) == 0 {
				id, _ = h.pick(true, o.a)
			}
		}
		req := &Request{Namespace: prefix.Namespace{Salt: fmt.Sprint(ns)}, Prompt: prompt, MM: in, Lookahead: o.b % 3}
		if o.kind%numOps == 0 && o.c%5 == 3 && len(prompt) > 1 {
			req.Prefill = 1 + o.b%(len(prompt)-1) // a chunked prefill: its rest comes by Append
		}
		dry, dryErr := h.m.CanAdmit(id, req)
		res, err := h.m.Admit(id, req)
		require.Equal(h.t, dryErr == nil, err == nil, "CanAdmit and Admit disagree: %v / %v", dryErr, err)
		if err != nil {
			if errors.Is(err, blocks.ErrOutOfBlocks) {
				var oob *blocks.OutOfBlocksError
				require.ErrorAs(h.t, err, &oob)
				require.Positive(h.t, oob.Missing())
				h.waiting = append(h.waiting, prompt)
				h.waitingMM = append(h.waitingMM, mm)
				h.waitingIn = append(h.waitingIn, in)
				h.waitingNS = append(h.waitingNS, ns)
			}
			h.failed(before, err, blocks.ErrOutOfBlocks, ErrDuplicateSeq, ErrTooLarge)
			return
		}
		dry.Load = res.Load // a dry run prepares no transfer
		require.Equal(h.t, dry, res)
		require.Equal(h.t, 0, res.HitTokens%h.bs)
		require.Less(h.t, res.HitTokens+res.LoadTokens, len(prompt), "a hit leaves one token to compute")
		h.checkHit(prompt, mm, ns, res.HitTokens+res.LoadTokens)
		h.next++
		h.seqs[id] = slices.Clone(prompt[:res.Tokens])
		if res.Tokens < len(prompt) {
			h.rest[id] = slices.Clone(prompt[res.Tokens:])
		}
		h.mm[id] = mm
		h.ns[id] = ns
		h.lastAppend[id] = 0
		h.admitted(id, res)
	case 2, 3: // append a decode step or a chunk, maybe with lookahead
		id, ok := h.pick(false, o.a)
		if _, loading := h.loading[id]; !ok || loading {
			return // a server runs no step of a sequence whose KV is still loading
		}
		toks := tokensFor(o.b, 1+o.c%(h.bs+2))
		rest := h.rest[id]
		if len(rest) > 0 {
			toks = rest[:min(len(rest), len(toks))] // the prefill's next chunk
		} else if o.b%5 == 4 {
			// Placeholder tokens appended as text (a scheduler feeding a cut prefill's
			// rest again): the KV of text, which no block of an image may match.
			for i := range toks {
				toks[i] = mmImages[o.a%len(mmImages)].tok
			}
		}
		if o.kind%numOps == 2 {
			toks = toks[:1]
		}
		res, err := h.m.Append(id, toks, o.b%4)
		if err != nil {
			h.failed(before, err, blocks.ErrOutOfBlocks, ErrTooLarge)
			return
		}
		if res.Copied {
			h.copyBlock(h.dev, res.Copy.Src, res.Copy.Dst, h.dev)
		}
		old := len(h.seqs[id])
		h.lastAppend[id] = old
		h.seqs[id] = append(h.seqs[id], toks...)
		h.popRest(id, len(toks))
		h.write(id, old, len(h.seqs[id]))
	case 4: // fork
		id, ok := h.pick(false, o.a)
		if !ok {
			return
		}
		child := h.next
		if o.b%7 == 6 {
			child = id // duplicate: refused
		}
		if err := h.m.Fork(id, child); err != nil {
			h.failed(before, err, ErrDuplicateSeq, ErrNotRunning) // a parent still loading
			return
		}
		h.next++
		h.seqs[child] = slices.Clone(h.seqs[id])
		if r := h.rest[id]; len(r) > 0 {
			h.rest[child] = slices.Clone(r)
		}
		h.mm[child] = h.mm[id]
		h.ns[child] = h.ns[id]
		h.lastAppend[child] = h.lastAppend[id]
	case 5: // truncate (rejected draft tokens)
		id, ok := h.pick(false, o.a)
		if _, loading := h.loading[id]; !ok || loading {
			return
		}
		n := len(h.seqs[id]) - o.b%(h.bs+1)
		if err := h.m.Truncate(id, n); err != nil {
			h.failed(before, err, ErrInvalidArgument)
			return
		}
		if n < len(h.seqs[id]) { // a cut: a chunked prefill's rest goes with its inputs
			h.mm[id] = cutMM(h.mm[id], n)
			delete(h.rest, id)
		}
		h.seqs[id] = h.seqs[id][:n]
		h.lastAppend[id] = min(h.lastAppend[id], n)
	case 6: // finish
		id, ok := h.pick(false, o.a)
		if !ok {
			id, ok = h.pick(true, o.a)
		}
		if !ok || o.b%11 == 10 {
			err := h.m.Finish(h.next + 1000)
			require.ErrorIs(h.t, err, ErrUnknownSeq)
			h.failed(before, err, ErrUnknownSeq)
			return
		}
		require.NoError(h.t, h.m.Finish(id))
		h.forget(id)
		// Appending to a finished sequence is refused.
		_, err := h.m.Append(id, []int32{1}, 0)
		require.ErrorIs(h.t, err, ErrUnknownSeq)
	case 7: // abort a running or swapped sequence
		id, ok := h.pick(o.b%2 == 1, o.a)
		if !ok {
			return
		}
		require.NoError(h.t, h.m.Abort(id))
		h.forget(id)
	case 8: // preempt for a number of blocks, recompute or swap
		mode := PreemptMode(o.b % 2)
		var protect []SeqID
		if id, ok := h.pick(false, o.a); ok {
			protect = append(protect, id)
		}
		out, err := h.m.Preempt(PreemptRequest{Need: 1 + o.c%8, Mode: mode, Protect: protect}, nil)
		if err != nil {
			h.failed(before, err, blocks.ErrOutOfBlocks, ErrTooLarge, ErrSwapNeedsTiers, prefix.ErrTierFull)
			return
		}
		for _, p := range out {
			require.NotContains(h.t, protect, p.Seq)
			h.preempted(p)
		}
	case 9: // resume a swapped sequence, or execute the transfers in flight
		if o.b%2 == 0 {
			if o.c%3 == 0 {
				// The harness writes each token's KV when it gives the slot, so any moment
				// is a step's end: swaps then copy only the blocks filled before it.
				h.m.NewStep()
			}
			if o.c%7 == 6 { // hand the plans out only: their copies in flight meanwhile
				h.takePlans()
				return
			}
			h.transfers(o.c%5 != 4)
			return
		}
		id, ok := h.pick(true, o.a)
		if !ok {
			return
		}
		res, err := h.m.Resume(id)
		if errors.Is(err, ErrSwapInFlight) {
			h.failed(before, err, ErrSwapInFlight)
			// Liveness: once every transfer outstanding completes (ok or not), no held
			// block is in flight and Resume fails only for want of blocks.
			h.transfers(o.c%5 != 4)
			s, lerr := h.m.lookup("resume", id)
			require.NoError(h.t, lerr)
			require.Zero(h.t, h.index.HoldInFlight(s.hold), "held blocks in flight with no transfer outstanding")
			before = h.snapshot()
			res, err = h.m.Resume(id)
		}
		if err != nil {
			h.failed(before, err, blocks.ErrOutOfBlocks)
			return
		}
		delete(h.swapped, id)
		h.admitted(id, res)
	case 11: // decode steps through AppendToken, the decode loop's call
		h.appendTokens(before, o)
	case 10: // evict cached blocks, or preempt one chosen sequence
		if o.b%2 == 0 && h.index != nil {
			h.index.Evict(1 + o.c%4)
			return
		}
		id, ok := h.pick(false, o.a)
		if !ok {
			return
		}
		p, err := h.m.PreemptSeq(id, PreemptMode(o.c%2))
		if err != nil {
			h.failed(before, err, blocks.ErrOutOfBlocks, ErrTooLarge, ErrSwapNeedsTiers, prefix.ErrTierFull)
			return
		}
		h.preempted(p)
	}
}

// appendTokens runs a decode loop of AppendToken calls on one running sequence (into its
// last block, through a new one, a copy-on-write of a forked block), each checked against
// the model as Append's are; or, one time in thirteen, one call on a swapped-out or an
// unknown sequence, which must be refused changing nothing.
func (h *harness) appendTokens(before snapshotState, o op) {
	if o.c%13 == 12 {
		id, swapped := h.pick(true, o.a)
		want := ErrNotRunning
		if !swapped {
			id, want = h.next+1000, ErrUnknownSeq
		}
		_, err := h.m.AppendToken(id, 1)
		require.ErrorIs(h.t, err, want)
		var se *SeqError
		require.ErrorAs(h.t, err, &se)
		require.Equal(h.t, id, se.Seq)
		h.failed(before, err, want)
		return
	}
	id, ok := h.pick(false, o.a)
	if _, loading := h.loading[id]; !ok || loading {
		return // a server runs no step of a sequence whose KV is still loading
	}
	toks := tokensFor(o.b, 1+o.c%(2*h.bs+1))
	if rest := h.rest[id]; len(rest) > 0 {
		toks = slices.Clone(rest[:min(len(rest), len(toks))]) // the prefill's next chunk
	}
	for i, tok := range toks {
		if i > 0 {
			before = h.snapshot()
		}
		res, err := h.m.AppendToken(id, tok)
		if err != nil {
			h.failed(before, err, blocks.ErrOutOfBlocks, ErrTooLarge)
			return
		}
		if res.Copied {
			h.copyBlock(h.dev, res.Copy.Src, res.Copy.Dst, h.dev)
		}
		old := len(h.seqs[id])
		h.lastAppend[id] = old
		h.seqs[id] = append(h.seqs[id], tok)
		h.popRest(id, 1)
		h.write(id, old, old+1)
	}
}

func (h *harness) preempted(p Preempted) {
	require.Equal(h.t, len(h.seqs[p.Seq]), p.Tokens)
	delete(h.loading, p.Seq)
	if p.Mode == Swap {
		h.swapped[p.Seq] = true
		return
	}
	if len(h.seqs[p.Seq]) > 0 {
		// A chunked prefill is readmitted with its whole prompt, which its inputs cover.
		h.waiting = append(h.waiting, append(slices.Clone(h.seqs[p.Seq]), h.rest[p.Seq]...))
		h.waitingMM = append(h.waitingMM, h.mm[p.Seq])
		h.waitingIn = append(h.waitingIn, h.inputs[p.Seq])
		h.waitingNS = append(h.waitingNS, h.ns[p.Seq])
	}
	h.forget(p.Seq)
}

// admitted writes what an admission (or a Resume) left id to compute: past its device
// hit and its load, which lands when its transfer completes.
func (h *harness) admitted(id SeqID, res AdmitResult) {
	from := res.HitTokens + res.LoadTokens
	if res.LoadTokens > 0 {
		h.loading[id] = [2]int{res.HitTokens, from}
	}
	h.write(id, from, res.Tokens)
}

// transfers takes the plans and completes every transfer in flight with ok, executing
// the copies of those that succeed between the fake memories as a server would; a failed
// load is computed by its sequence.
// takePlans hands the plans out, copying each store's blocks at once, as the server's
// stream issues them before anything writes their device blocks again (under
// StreamOrdered those are reusable from now on); a load's copy is made when it completes.
func (h *harness) takePlans() {
	for _, p := range h.m.TakePlans(nil) {
		h.plans[p.ID] = append(h.plans[p.ID], p)
		if p.Kind != prefix.Store {
			continue
		}
		for _, r := range p.Runs {
			for k := range r.Blocks {
				h.copyBlock(h.hostMem, blocks.ID(r.Src+k), blocks.ID(r.Dst+k), h.dev)
			}
		}
	}
}

func (h *harness) transfers(ok bool) {
	h.takePlans()
	ids := make([]prefix.TransferID, 0, len(h.plans))
	for id := range h.plans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if ok {
			for _, p := range h.plans[id] {
				if p.Kind == prefix.Store {
					continue // copied when handed out
				}
				for _, r := range p.Runs {
					for k := range r.Blocks {
						h.copyBlock(h.dev, blocks.ID(r.Src+k), blocks.ID(r.Dst+k), h.hostMem)
					}
				}
			}
		}
		delete(h.plans, id)
		d, err := h.m.CompleteTransfer(id, ok)
		require.NoError(h.t, err)
		if !d.Loaded {
			continue
		}
		ld := h.loading[d.Seq]
		delete(h.loading, d.Seq)
		if d.ComputeTokens > 0 && !h.swapped[d.Seq] {
			require.Equal(h.t, ld[1]-ld[0], d.ComputeTokens)
			h.write(d.Seq, ld[0], min(ld[1], len(h.seqs[d.Seq])))
		}
	}
}

// popRest drops the first n tokens of id's chunked prefill rest, appended now.
func (h *harness) popRest(id SeqID, n int) {
	if r := h.rest[id]; len(r) > 0 {
		if h.rest[id] = r[min(n, len(r)):]; len(h.rest[id]) == 0 {
			delete(h.rest, id)
		}
	}
}

func (h *harness) forget(id SeqID) {
	delete(h.rest, id)
	delete(h.loading, id)
	delete(h.seqs, id)
	delete(h.mm, id)
	delete(h.swapped, id)
	delete(h.ns, id)
	delete(h.lastAppend, id)
}

// finishAll ends every sequence and checks that nothing leaked: every block is free or
// cached in the index, and the cache can be emptied.
func (h *harness) finishAll() {
	for id := range h.seqs {
		require.NoError(h.t, h.m.Finish(id))
		h.forget(id)
	}
	require.NoError(h.t, h.m.CheckInvariants())
	if h.index != nil {
		h.transfers(true)
		h.transfers(true) // stores started by the completions
		require.Zero(h.t, h.index.PendingTransfers())
		require.Zero(h.t, h.m.Stats().HostInUse, "lower-tier blocks still held")
		require.NoError(h.t, h.index.Reset())
		require.Zero(h.t, h.index.TierStatsOf(1).Resident, "host blocks leaked")
	}
	require.Equal(h.t, h.pool.Capacity(), h.pool.NumFree(), "device blocks leaked")
	require.NoError(h.t, h.pool.CheckInvariants())
}
