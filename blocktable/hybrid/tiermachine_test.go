package hybrid_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"pgregory.net/rapid"
)

// tierModel is the reference model of what every tier holds: the (medium, group, hash)
// keys the Manager's events say are present. An event that stores a key already
// present, or removes one that is not, is a duplicated or lost event.
//
// For full attention's closure past lower-tier drops (closureCheck) it also keeps, from
// the same events, each key's parent (parent) and the keys a drop broke the closure for
// (marked): a removal from a lower tier, or a failed store from the device (the machine
// reports those, dropped), that leaves its key with no copy anywhere, or on the device
// below a parent the device no longer holds with no lower-tier copy of its own. A mark
// lasts until its key is stored again into some tier. Events name (prefix, group)
// presence, not block copies (a duplicate block on the device has no event of its own),
// so the model names a device block by its key (hybrid's BlockKey), never by its ID.
type tierModel struct {
	held   map[string]bool
	bad    error
	lower  []string // the lower tiers' media
	parent map[string]string
	marked map[string]bool
}

func newTierModel(lower []string) *tierModel {
	return &tierModel{held: map[string]bool{}, lower: lower, parent: map[string]string{}, marked: map[string]bool{}}
}

func tierKey(medium string, g int, h []byte) string { return fmt.Sprintf("%s|%d|%x", medium, g, h) }

// groupKey names a block by its group and hash, whatever tier holds it.
func groupKey(g int, h []byte) string { return fmt.Sprintf("%d|%x", g, h) }

func (tm *tierModel) BlockStored(e *prefix.BlockStored) {
	for i := range e.Blocks {
		k := tierKey(e.Medium, e.Group, e.Hash(i))
		if tm.held[k] && tm.bad == nil {
			tm.bad = fmt.Errorf("stored twice: %s", k)
		}
		tm.held[k] = true
		gk, parent := groupKey(e.Group, e.Hash(i)), ""
		if i > 0 {
			parent = groupKey(e.Group, e.Hash(i-1))
		} else if len(e.Parent) > 0 {
			parent = groupKey(e.Group, e.Parent)
		}
		tm.parent[gk] = parent
		delete(tm.marked, gk)
	}
}

func (tm *tierModel) BlockRemoved(e *prefix.BlockRemoved) {
	for i := range e.Blocks {
		k := tierKey(e.Medium, e.Group, e.Hash(i))
		if !tm.held[k] && tm.bad == nil {
			tm.bad = fmt.Errorf("removed but not held: %s", k)
		}
		delete(tm.held, k)
		if e.Medium != "" {
			tm.dropped(groupKey(e.Group, e.Hash(i)))
		}
	}
}

func (tm *tierModel) AllBlocksCleared() {
	clear(tm.held)
	clear(tm.marked)
}

// dropped marks key gk (a group key) if the drop of one of its lower-tier copies, or of
// its store from the device, broke the closure for it: no tier holds it now, or the
// device does, below a parent the device does not, with no lower-tier copy.
func (tm *tierModel) dropped(gk string) {
	for _, m := range tm.lower {
		if tm.held[m+"|"+gk] {
			return
		}
	}
	if !tm.held["|"+gk] || !tm.held["|"+tm.parent[gk]] {
		tm.marked[gk] = true
	}
}

// closureCheck holds full attention's closure in CheckInvariants' tiered form on after
// lower-tier drops, where CheckInvariants stops checking it: every (node, group) that
// breaks it (breaks, named by their group keys) must have a drop to explain it, of its
// own copy or its parent's (marked). Any other break (a parent evicted from the device
// with no copy below while its child stayed) fails.
func (tm *tierModel) closureCheck(breaks []string) error {
	for _, c := range breaks {
		if !tm.held["|"+c] {
			return fmt.Errorf("closure broken at %s, which the events do not hold on the device", c)
		}
		if !tm.marked[c] && !tm.marked[tm.parent[c]] {
			return fmt.Errorf("device block %s below a parent no tier holds, and no drop explains it", c)
		}
	}
	return nil
}

// count is the number of keys held in medium.
func (tm *tierModel) count(medium string) int {
	n := 0
	for k := range tm.held {
		if len(k) > len(medium) && k[:len(medium)+1] == medium+"|" {
			n++
		}
	}
	return n
}

// TestTierMachine runs random admissions (with loads), decode steps, finishes, swap and
// recompute preemptions, resumptions, plans taken and transfers completed ok or failed,
// and prefix-cache resets on a hybrid Manager with a host tier and sometimes a disk
// below it (every write policy, watermarks, small tiers, stream-ordered stores or not;
// blocks of 2, 4 or 8 tokens per group over a match unit that may be smaller, so that a
// block spans several units: tierGeometry), against a reference model of what each tier
// holds, built from the events alone. After every step: the invariants (the tiers' books
// included: slots, pins, transfer references, demotions; full attention's closure, its
// parent block the group's units per block up); the model's keys per tier are exactly
// the tier's residents (no event lost or duplicated by a move); no stream-ordered store
// keeps a parent ahead of its child at the free queue's front (KeptOrderBreaks); and,
// for full-attention models, every admission's device hit and load are exactly the
// longest prefix (a multiple of the groups' LCM) the model says the device holds, then
// the longest continuation it says the lower tiers hold: a block confirmed stored is
// found and loaded until its tier reports it removed. At the end every transfer
// completes and nothing is leaked.
func TestTierMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// The first group: full attention, or (no group of full attention at all) a small
		// sliding window or chunked local attention, whose lower-tier hits may need none of
		// their blocks loaded (a window of one token, a hit ending on a chunk boundary).
		// Each group's block is of 2, 4 or 8 tokens, and the match unit divides them
		// (tierGeometry): a block may span several units, and the groups' sizes differ.
		var specs []hybrid.Spec
		fullOnly := true
		bs := drawTierBlock(rt, "first block")
		switch rapid.IntRange(0, 3).Draw(rt, "first group") {
		case 0, 1:
			specs = append(specs, hybrid.FullAttention{Block: bs})
		case 2:
			specs = append(specs, hybrid.SlidingWindow{Block: bs, Window: rapid.IntRange(1, 2*bs+1).Draw(rt, "first window")})
			fullOnly = false
		case 3:
			specs = append(specs, hybrid.ChunkedLocal{Block: bs, Chunk: bs * rapid.IntRange(1, 3).Draw(rt, "first chunk")})
			fullOnly = false
		}
		switch second := rapid.IntRange(0, 5).Draw(rt, "second group"); second {
		case 1:
			specs = append(specs, hybrid.FullAttention{Block: drawTierBlock(rt, "second block")})
		case 2:
			b := drawTierBlock(rt, "second block")
			specs = append(specs, hybrid.SlidingWindow{Block: b, Window: rapid.IntRange(1, 2*b+1).Draw(rt, "window")})
			fullOnly = false
		case 3, 5:
			mode := hybrid.MambaAll
			if second == 5 {
				mode = hybrid.MambaAlign
			}
			specs = append(specs, hybrid.Mamba{Block: drawTierBlock(rt, "second block"), Mode: mode})
			fullOnly = false
		case 4:
			b := drawTierBlock(rt, "second block")
			specs = append(specs, hybrid.ChunkedLocal{Block: b, Chunk: b * rapid.IntRange(1, 3).Draw(rt, "chunk")})
			fullOnly = false
		}
		geo := newTierGeometry(rt, specs)
		nb := 1 + geo.scaled(rapid.IntRange(5, 19).Draw(rt, "blocks"))
		host := prefix.TierSpec{Medium: prefix.MediumCPU, Capacity: geo.scaled(rapid.IntRange(1, 24).Draw(rt, "host")),
			Write: prefix.WritePolicy(rapid.IntRange(0, 2).Draw(rt, "host write")), Hits: uint32(rapid.IntRange(1, 3).Draw(rt, "hits"))}
		tiers := []prefix.TierSpec{host}
		if rapid.Bool().Draw(rt, "disk") {
			tiers = append(tiers, prefix.TierSpec{Medium: prefix.MediumDisk, Capacity: geo.scaled(rapid.IntRange(1, 24).Draw(rt, "disk size")),
				Write: prefix.WritePolicy(rapid.IntRange(0, 1).Draw(rt, "disk write"))})
		}
		cfg := prefix.TierConfig{Tiers: tiers, BlockBytes: 16, FreeTarget: rapid.IntRange(0, nb/2).Draw(rt, "free target"),
			StreamOrdered: rapid.Bool().Draw(rt, "stream ordered")}
		var media []string
		for _, t := range tiers {
			media = append(media, t.Medium)
		}
		model := newTierModel(media)
		m, err := hybrid.New(hybrid.Config{Groups: specs, NumBlocks: nb, MatchUnit: geo.unit, Observer: model, Tiers: &cfg})
		if err != nil {
			rt.Fatal(err)
		}
		ng := len(specs)
		live := map[blocktable.SeqID]bool{}
		var swapped []blocktable.SeqID
		// toks is the model's tokens of every ID ever admitted; an ID neither live nor
		// swapped (finished, preempted in Recompute mode) is unknown to the Manager.
		toks := map[blocktable.SeqID][]int32{}
		pending := map[prefix.TransferID]bool{}
		// stores are the keys each store from the device copies, as it was handed out: if
		// it fails, they are dropped from the lower tiers they were going to (closureCheck).
		stores := map[prefix.TransferID][]string{}
		takePlans := func() []prefix.Plan {
			plans := m.TakePlans(nil)
			for _, p := range plans {
				if p.Kind != prefix.Store || p.From != prefix.Device {
					continue
				}
				for _, r := range p.Runs {
					for i := range r.Blocks {
						if k := m.BlockKey(blocks.ID(r.Src + i)); k != "" {
							stores[p.ID] = append(stores[p.ID], k)
						}
					}
				}
			}
			return plans
		}
		complete := func(id prefix.TransferID, ok bool) (hybrid.LoadDone, error) {
			d, err := m.CompleteTransfer(id, ok)
			if !ok {
				for _, k := range stores[id] {
					model.dropped(k)
				}
			}
			delete(stores, id)
			return d, err
		}
		var order []prefix.TransferID
		next := blocktable.SeqID(0)
		// Three bases: three blocks of the LCM, one sharing the first's first block, one
		// of its own (with blocks of 4: 1..12, 1..4 9 9 9 9, and eight 5s).
		b := geo.lcm
		var bases [3][]int32
		for i := range 3 * b {
			bases[0] = append(bases[0], int32(i+1))
		}
		bases[1] = append(slices.Clone(bases[0][:b]), slices.Repeat([]int32{9}, b)...)
		bases[2] = slices.Repeat([]int32{5}, 2*b)

		check := func(what string) {
			if err := m.CheckInvariants(); err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			if model.bad != nil {
				rt.Fatalf("%s: events: %v", what, model.bad)
			}
			if err := model.closureCheck(m.ClosureBreakKeys()); err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			if b := m.KeptOrderBreaks(); len(b) > 0 {
				rt.Fatalf("%s: demoted blocks %v wait in the free queue behind their parents, kept by the same store", what, b)
			}
			dev := 0
			for _, c := range m.Stats().CachedPrefixes {
				dev += c
			}
			if got := model.count(""); got != dev {
				rt.Fatalf("%s: the events hold %d device prefixes, the Manager %d", what, got, dev)
			}
			for i, s := range tiers {
				if got, want := model.count(s.Medium), m.TierStats(prefix.Tier(i+1)).Resident; got != want {
					rt.Fatalf("%s: the events hold %d %s blocks, the tier %d", what, got, s.Medium, want)
				}
			}
			// The queries, in every state, as blocktable.Manager answers them.
			for id, want := range toks {
				state := blocktable.SeqState(0)
				if live[id] {
					state = blocktable.Running
				} else if slices.Contains(swapped, id) {
					state = blocktable.Swapped
				}
				info, err := m.Seq(id)
				got, terr := m.Tokens(id)
				if state == 0 {
					if !errors.Is(err, blocktable.ErrUnknownSeq) || !errors.Is(terr, blocktable.ErrUnknownSeq) || m.Contains(id) {
						rt.Fatalf("%s: seq %d, gone: Seq %v, Tokens %v, Contains %v", what, id, err, terr, m.Contains(id))
					}
					continue
				}
				if err != nil || terr != nil || info.State != state || info.Tokens != len(want) || !slices.Equal(got, want) || !m.Contains(id) {
					rt.Fatalf("%s: seq %d, state %d with %d tokens: Seq %+v %v, Tokens %v %v, Contains %v",
						what, id, state, len(want), info, err, got, terr, m.Contains(id))
				}
				if state == blocktable.Swapped && (info.Computed != 0 || info.Held != 0 || info.Reserved != 0) {
					rt.Fatalf("%s: swapped seq %d holds %+v", what, id, info)
				}
			}
			if ids := m.Seqs(nil); len(ids) != len(live)+len(swapped) {
				rt.Fatalf("%s: Seqs %v, %d running and %d swapped", what, ids, len(live), len(swapped))
			}
		}
		// expect is the model's hit for prompt, in tokens: the device prefix every group
		// holds, then the continuation every group holds in some lower tier, each a
		// multiple of the groups' LCM (a span of it held in every group, or none).
		expect := func(prompt []int32) (int, int) {
			limit := len(prompt) - 1
			hs := geo.unitHashes(prompt, limit/geo.unit)
			held := func(from, to int, dev bool) bool { // every group's blocks of tokens [from, to)
				for g := range ng {
					for i := from / geo.bs[g]; i < to/geo.bs[g]; i++ {
						h := geo.blockHash(hs, g, i)
						found := dev && model.held[tierKey("", g, h)]
						for _, s := range tiers {
							found = found || !dev && model.held[tierKey(s.Medium, g, h)]
						}
						if !found {
							return false
						}
					}
				}
				return true
			}
			dev := 0
			for dev+geo.lcm <= limit && held(dev, dev+geo.lcm, true) {
				dev += geo.lcm
			}
			end := dev
			for end+geo.lcm <= limit && held(end, end+geo.lcm, false) {
				end += geo.lcm
			}
			return dev, end - dev
		}
		admitted := func(rt *rapid.T, id blocktable.SeqID, prompt []int32, r hybrid.AdmitResult, wantHit, wantLoad int) {
			if fullOnly && (r.Hit != wantHit || r.LoadTokens != wantLoad) {
				rt.Fatalf("seq %d %v: hit %d + load %d, the model %d + %d", id, prompt, r.Hit, r.LoadTokens, wantHit, wantLoad)
			}
			// Every model: a load names a transfer and the blocks it reads, and no load
			// is planned that reads nothing.
			if (r.LoadTokens > 0) != (r.Load != 0) || (r.Load != 0) != (r.Tiers.Lower > 0) {
				rt.Fatalf("seq %d %v: load of %d tokens, transfer %d, %d lower-tier blocks", id, prompt, r.LoadTokens, r.Load, r.Tiers.Lower)
			}
			live[id] = true
			toks[id] = prompt
		}

		actions := map[string]func(*rapid.T){
			"admit": func(rt *rapid.T) {
				base := rapid.SampledFrom(bases[:]).Draw(rt, "base")
				cut := rapid.IntRange(1, len(base)).Draw(rt, "cut")
				prompt := append(append([]int32(nil), base[:cut]...), rapid.SliceOfN(rapid.Int32Range(1, 3), 0, geo.tokens(6)).Draw(rt, "tail")...)
				wantHit, wantLoad := expect(prompt)
				h, l, err := m.MatchTiers(&hybrid.Request{Prompt: prompt})
				if err != nil {
					rt.Fatal(err)
				}
				var e prefix.Explanation
				if eh, err := m.Explain(&hybrid.Request{Prompt: prompt}, &e); err != nil || eh != h || e.MatchedBlocks != h/geo.unit {
					rt.Fatalf("Explain %v: %d (%d blocks, %v), MatchTiers' hit %d", prompt, eh, e.MatchedBlocks, err, h)
				}
				if fullOnly && (h != wantHit || l != wantLoad) {
					rt.Fatalf("MatchTiers %v: %d + %d, the model %d + %d", prompt, h, l, wantHit, wantLoad)
				}
				if !fullOnly {
					wantHit, wantLoad = h, l // the admission takes what MatchTiers found
				}
				id := next
				next++
				r, err := m.AdmitTiered(id, &hybrid.Request{Prompt: prompt, MaxTokens: len(prompt) + geo.tokens(6)})
				if errors.Is(err, blocks.ErrOutOfBlocks) {
					check("admit refused")
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				if r.Hit != wantHit || r.LoadTokens != wantLoad {
					rt.Fatalf("seq %d %v: hit %d + load %d, MatchTiers (or the model) %d + %d", id, prompt, r.Hit, r.LoadTokens, wantHit, wantLoad)
				}
				admitted(rt, id, prompt, r, wantHit, wantLoad)
				check("admit")
			},
			"append": func(rt *rapid.T) {
				if len(live) == 0 {
					rt.Skip()
				}
				id := rapid.SampledFrom(keys(live)).Draw(rt, "seq")
				if ld, _ := m.Loading(id); ld != 0 {
					rt.Skip() // a scheduler runs a sequence once its load is in
				}
				tok := rapid.Int32Range(1, 3).Draw(rt, "tok")
				err := m.Append(id, []int32{tok})
				if err != nil && !errors.Is(err, blocks.ErrOutOfBlocks) && !errors.Is(err, blocktable.ErrInvalidArgument) {
					rt.Fatal(err)
				}
				if err == nil {
					toks[id] = append(slices.Clip(toks[id]), tok)
				}
				check("append")
			},
			"finish": func(rt *rapid.T) {
				if len(live) == 0 {
					rt.Skip()
				}
				id := rapid.SampledFrom(keys(live)).Draw(rt, "seq")
				if err := m.Finish(id); err != nil {
					rt.Fatal(err)
				}
				delete(live, id)
				check("finish")
			},
			"preempt": func(rt *rapid.T) {
				if len(live) == 0 {
					rt.Skip()
				}
				id := rapid.SampledFrom(keys(live)).Draw(rt, "seq")
				mode := blocktable.PreemptMode(rapid.IntRange(0, 1).Draw(rt, "mode"))
				before := m.Stats()
				if _, err := m.PreemptSeq(id, mode); err != nil {
					var full *prefix.TierFullError
					if mode != blocktable.Swap || !errors.As(err, &full) || full.Requested <= full.Available {
						rt.Fatal(err)
					}
					if !reflect.DeepEqual(m.Stats(), before) || m.Swapped(id) {
						rt.Fatalf("a refused swap changed the state: %+v, then %+v", before, m.Stats())
					}
					check("swap refused")
					return
				}
				delete(live, id)
				if mode == blocktable.Swap {
					swapped = append(swapped, id)
				}
				check("preempt")
			},
			"resume": func(rt *rapid.T) {
				if len(swapped) == 0 {
					rt.Skip()
				}
				i := rapid.IntRange(0, len(swapped)-1).Draw(rt, "which")
				id := swapped[i]
				before := m.Stats()
				r, err := m.Resume(id)
				if errors.Is(err, blocks.ErrOutOfBlocks) {
					check("resume refused")
					return
				}
				if errors.Is(err, blocktable.ErrSwapInFlight) { // its copies handed out, unconfirmed
					if !cfg.StreamOrdered || !m.Swapped(id) || !reflect.DeepEqual(m.Stats(), before) {
						rt.Fatalf("resume of seq %d refused in flight: stream-ordered %v, swapped %v, stats %+v, were %+v",
							id, cfg.StreamOrdered, m.Swapped(id), m.Stats(), before)
					}
					check("resume in flight")
					// Liveness: once every transfer outstanding completes (ok or not), no
					// held block is in flight and Resume fails only for want of blocks.
					for _, p := range takePlans() {
						if !pending[p.ID] {
							pending[p.ID] = true
							order = append(order, p.ID)
						}
					}
					for _, tid := range order {
						if _, err := complete(tid, rapid.IntRange(0, 3).Draw(rt, "drain ok") > 0); err != nil {
							rt.Fatal(err)
						}
						delete(pending, tid)
					}
					order = order[:0]
					check("drained")
					if n := m.HoldInFlight(id); n != 0 {
						rt.Fatalf("seq %d: %d held blocks still in flight with no transfer outstanding", id, n)
					}
					r, err = m.Resume(id)
					if errors.Is(err, blocks.ErrOutOfBlocks) {
						check("resume refused")
						return
					}
				}
				if err != nil {
					rt.Fatal(err)
				}
				swapped = append(swapped[:i], swapped[i+1:]...)
				if (r.LoadTokens > 0) != (r.Load != 0) || (r.Load != 0) != (r.Tiers.Lower > 0) {
					rt.Fatalf("resumed seq %d: load of %d tokens, transfer %d, %d lower-tier blocks", id, r.LoadTokens, r.Load, r.Tiers.Lower)
				}
				live[id] = true
				check("resume")
			},
			"take plans": func(rt *rapid.T) {
				for _, p := range takePlans() {
					if p.Bytes != int64(p.Blocks)*cfg.BlockBytes || len(p.Runs) == 0 {
						rt.Fatalf("plan %+v", p)
					}
					if !pending[p.ID] {
						pending[p.ID] = true
						order = append(order, p.ID)
					}
				}
				check("take plans")
			},
			"complete": func(rt *rapid.T) {
				if len(order) == 0 {
					rt.Skip()
				}
				i := rapid.IntRange(0, len(order)-1).Draw(rt, "which")
				id := order[i]
				ok := rapid.IntRange(0, 3).Draw(rt, "ok") > 0
				d, err := complete(id, ok)
				if err != nil {
					rt.Fatal(err)
				}
				if d.Loaded && !ok && d.ComputeTokens == 0 {
					rt.Fatalf("a failed load leaves nothing to compute")
				}
				order = append(order[:i], order[i+1:]...)
				delete(pending, id)
				check("complete")
			},
			"reset": func(rt *rapid.T) {
				err := m.ResetPrefixCache()
				if err == nil && (len(live) > 0 || m.PendingTransfers() > 0) {
					rt.Fatalf("reset with %d sequences and %d transfers", len(live), m.PendingTransfers())
				}
				if err == nil && len(model.held) != 0 {
					rt.Fatalf("reset leaves %d keys", len(model.held))
				}
				check("reset")
			},
		}
		rounds := 4 // rapid's 30 steps a round, too few to evict, demote and load back
		if invariant.Enabled {
			rounds = 2 // every step checks every invariant twice over
		}
		for range rounds {
			rt.Repeat(actions)
		}
		for id := range live {
			if err := m.Finish(id); err != nil {
				rt.Fatal(err)
			}
		}
		for _, id := range swapped {
			if err := m.Finish(id); err != nil {
				rt.Fatal(err)
			}
		}
		clear(live)
		swapped = swapped[:0]
		for round := 0; m.PendingTransfers() > 0; round++ {
			if round > 10 {
				rt.Fatalf("%d transfers never complete", m.PendingTransfers())
			}
			for _, p := range takePlans() {
				pending[p.ID] = true
			}
			for id := range pending {
				if _, err := complete(id, true); err != nil {
					rt.Fatal(err)
				}
				delete(pending, id)
			}
		}
		check("end")
		if st := m.Stats(); st.Free != st.Capacity {
			rt.Fatalf("leaked: %d of %d blocks free", st.Free, st.Capacity)
		}
	})
}

func keys(m map[blocktable.SeqID]bool) []blocktable.SeqID {
	out := make([]blocktable.SeqID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
