package hybrid_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"pgregory.net/rapid"
)

// TestMachineAgainstVLLMModel runs random admissions, decode steps, lookahead
// reservations, forks, preemptions, readmissions of preempted sequences and finishes on
// random hybrid models (one to three groups of full attention, sliding windows, Mamba
// state in its default and align modes and chunked local attention, dense or sparse
// retention, small pools, EAGLE or not, two namespaces) through the Manager and through the reference model of vLLM's
// hybrid manager, and requires the same hits, the same block IDs in every group's table,
// the same evictions and free-queue length, the same copy-on-write copies and preemption
// victims, and the invariants, after every step.
func TestMachineAgainstVLLMModel(t *testing.T) {
	rounds := 10 // rapid's 100 checks per round; the rare paths need about a thousand
	if testing.Short() {
		rounds = 1
	}
	for range rounds {
		checkMachine(t)
	}
}

func checkMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const bs = 4
		ng := rapid.IntRange(1, 3).Draw(rt, "groups")
		var specs []hybrid.Spec
		var mgroups []vmGroup
		eagle := rapid.Bool().Draw(rt, "eagle")
		for g := range ng {
			switch kind := rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("kind", g)); {
			case kind == 0:
				specs = append(specs, hybrid.FullAttention{Block: bs})
				mgroups = append(mgroups, vmGroup{blockSize: bs})
			case kind == 1:
				w := rapid.IntRange(1, 3*bs+1).Draw(rt, fmt.Sprint("window", g))
				specs = append(specs, hybrid.SlidingWindow{Block: bs, Window: w})
				mgroups = append(mgroups, vmGroup{blockSize: bs, window: w})
			case kind == 2:
				specs = append(specs, hybrid.Mamba{Block: bs, Mode: hybrid.MambaAll})
				mgroups = append(mgroups, vmGroup{blockSize: bs, mamba: true})
			case kind == 4:
				specs = append(specs, hybrid.Mamba{Block: bs, Mode: hybrid.MambaAlign})
				mgroups = append(mgroups, vmGroup{blockSize: bs, mamba: true, align: true})
			case kind == 3 && !eagle: // vLLM supports no EAGLE with chunked local attention
				c := bs * rapid.IntRange(1, 3).Draw(rt, fmt.Sprint("chunk", g))
				specs = append(specs, hybrid.ChunkedLocal{Block: bs, Chunk: c})
				mgroups = append(mgroups, vmGroup{blockSize: bs, chunk: c})
			default:
				specs = append(specs, hybrid.FullAttention{Block: bs})
				mgroups = append(mgroups, vmGroup{blockSize: bs})
			}
		}
		nb := rapid.IntRange(4, 40).Draw(rt, "blocks")
		sparse := rapid.Bool().Draw(rt, "sparse retention")
		interval := bs * rapid.IntRange(0, 3).Draw(rt, "retention interval")
		if !sparse {
			interval = 0 // New refuses an interval without sparse retention
		}
		m, err := hybrid.New(hybrid.Config{Groups: specs, NumBlocks: nb, Eagle: eagle, SparseRetention: sparse, RetentionInterval: interval})
		if err != nil {
			rt.Fatal(err)
		}
		ref := newVMManager(nb, mgroups, eagle)
		if sparse {
			ref.retention = &interval
		}
		ref.checkFirst = true
		live := map[blocktable.SeqID]*vmRunning{}
		next := blocktable.SeqID(0)
		clock := uint64(0)
		var waiting [][]int32 // tokens of preempted sequences, to admit again
		const maxExtra = 12
		bases := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 2, 3, 4, 9, 9, 9, 9}, {5, 5, 5, 5, 5, 5, 5, 5}}
		check := func(what string) {
			for id, lr := range live {
				r := lr.req
				for g := range ng {
					got, err := m.Table(id, g)
					if err != nil {
						rt.Fatalf("%s: table %d/%d: %v", what, id, g, err)
					}
					want := make([]blocks.ID, len(r.blocks[g]))
					for i, b := range r.blocks[g] {
						want[i] = blocks.ID(b)
					}
					if !slices.Equal(got, want) {
						rt.Fatalf("%s: seq %d group %d: table %v, vLLM %v", what, id, g, got, want)
					}
				}
			}
			st := m.Stats()
			if st.Evictions != uint64(ref.pool.evictions) || st.Free != ref.pool.free {
				rt.Fatalf("%s: evictions %d free %d, vLLM %d and %d", what, st.Evictions, st.Free, ref.pool.evictions, ref.pool.free)
			}
			if err := m.CheckInvariants(); err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			if c := m.TakeCopies(nil); len(c) > 0 && what != "append" && what != "reserve" {
				rt.Fatalf("%s: copies %v", what, c)
			}
		}
		admit := func(rt *rapid.T, prompt []int32, resumed bool) {
			id := next
			next++
			salt := ""
			if !resumed {
				salt = rapid.SampledFrom([]string{"", "", "tenant"}).Draw(rt, "salt")
			}
			n := len(prompt)
			r := ref.newRequestIn(salt, prompt)
			hits, want := ref.computedBlocks(r)
			ok := ref.allocateSlots(r, n-want, want, hits)
			got, err := m.Admit(id, &hybrid.Request{Prompt: prompt, MaxTokens: n + maxExtra, Namespace: prefix.Namespace{Salt: salt}, Resumed: resumed})
			if !ok {
				if !errors.Is(err, blocks.ErrOutOfBlocks) {
					rt.Fatalf("admit %v: vLLM out of blocks, Manager %v", prompt, err)
				}
				check("admit refused")
				return
			}
			if err != nil || got != want {
				rt.Fatalf("admit %v: hit %d err %v, vLLM hit %d", prompt, got, err, want)
			}
			r.computed = n
			clock++
			live[id] = &vmRunning{req: r, arrival: clock}
			check("admit")
		}
		// copies checks the step's copy-on-write copies: every one from a block that r
		// held before into the block r holds now at the same entry.
		copies := func(rt *rapid.T, before [][]int, r *vmRequest) {
			want := 0
			for g := range ng {
				for i := range min(len(before[g]), len(r.blocks[g])) {
					if before[g][i] != r.blocks[g][i] && r.blocks[g][i] != vmNull {
						want++
					}
				}
			}
			got := m.TakeCopies(nil)
			if len(got) != want {
				rt.Fatalf("copies %v, vLLM model made %d", got, want)
			}
			for _, c := range got {
				i := slices.Index(r.blocks[c.Group], int(c.Dst))
				if i < 0 || i >= len(before[c.Group]) || before[c.Group][i] != int(c.Src) {
					rt.Fatalf("copy %+v: not from the block the table held", c)
				}
			}
		}
		clone := func(bl [][]int) [][]int {
			out := make([][]int, len(bl))
			for g := range bl {
				out[g] = slices.Clone(bl[g])
			}
			return out
		}
		rt.Repeat(map[string]func(*rapid.T){
			"admit": func(rt *rapid.T) {
				base := rapid.SampledFrom(bases).Draw(rt, "base")
				n := rapid.IntRange(1, len(base)+maxExtra).Draw(rt, "len")
				prompt := make([]int32, n)
				for i := range prompt {
					if i < len(base) {
						prompt[i] = base[i]
					} else {
						prompt[i] = rapid.Int32Range(0, 2).Draw(rt, "tok")
					}
				}
				admit(rt, prompt, false)
			},
			"readmit": func(rt *rapid.T) {
				if len(waiting) == 0 {
					rt.Skip("nothing preempted")
				}
				prompt := waiting[0]
				waiting = waiting[1:]
				admit(rt, prompt, true)
			},
			"fork": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				child := next
				next++
				if err := m.Fork(id, child); err != nil {
					rt.Fatal(err)
				}
				clock++
				live[child] = &vmRunning{req: ref.fork(live[id].req), arrival: clock}
				check("fork")
			},
			"reserve": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				r := live[id].req
				k := rapid.IntRange(1, 2*bs).Draw(rt, "lookahead")
				err := m.Reserve(id, k)
				if errors.Is(err, blocktable.ErrInvalidArgument) {
					return // past MaxTokens
				}
				before := clone(r.blocks)
				ok := ref.allocateSlotsAhead(r, 0, 0, nil, k)
				if ok != (err == nil) {
					rt.Fatalf("reserve %d: vLLM ok %v, Manager %v", k, ok, err)
				}
				copies(rt, before, r)
				check("reserve")
			},
			"preempt": func(rt *rapid.T) {
				protect := pickSeq(rt, live)
				need := rapid.IntRange(1, nb/2).Draw(rt, "need")
				tokens := map[blocktable.SeqID][]int32{}
				for id := range live {
					toks, err := m.Tokens(id)
					if err != nil || !slices.Equal(toks, live[id].req.tokens) {
						rt.Fatalf("tokens of %d: %v %v", id, toks, err)
					}
					tokens[id] = slices.Clone(toks)
				}
				want, all := ref.preempt(live, protect, need)
				got, err := m.Preempt(blocktable.PreemptRequest{Need: need, Protect: []blocktable.SeqID{protect}}, nil)
				if want == nil {
					var oob *blocks.OutOfBlocksError
					if !errors.As(err, &oob) || oob.Available != all {
						rt.Fatalf("preempt %d: model frees only %d, Manager %v", need, all, err)
					}
					check("preempt refused")
					return
				}
				if err != nil || len(got) != len(want) {
					rt.Fatalf("preempt %d: %v %v, model %v", need, got, err, want)
				}
				freed := 0
				for i, p := range got {
					if p.Seq != want[i] {
						rt.Fatalf("preempt %d: victims %v, model %v", need, got, want)
					}
					freed += p.Freed
					waiting = append(waiting, tokens[p.Seq])
					delete(live, p.Seq)
				}
				if freed < need {
					rt.Fatalf("preempt %d freed %d", need, freed)
				}
				check("preempt")
			},
			"append": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				r := live[id].req
				tok := rapid.Int32Range(0, 2).Draw(rt, "tok")
				err := m.Append(id, []int32{tok})
				if errors.Is(err, blocktable.ErrInvalidArgument) {
					return // at MaxTokens: nothing changed; the model is not told
				}
				before := clone(r.blocks)
				ref.appendTokens(r, []int32{tok})
				ok := ref.allocateSlots(r, 1, 0, nil)
				if ok != (err == nil) {
					rt.Fatalf("append: vLLM ok %v, Manager %v", ok, err)
				}
				if ok {
					r.computed++
				} else {
					r.tokens = r.tokens[:len(r.tokens)-1]
					r.hashes = r.hashes[:len(r.tokens)/bs]
				}
				copies(rt, before, r)
				check("append")
			},
			"finish": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				if err := m.Finish(id); err != nil {
					rt.Fatal(err)
				}
				ref.free(live[id].req)
				delete(live, id)
				check("finish")
			},
		})
	})
}

// pickSeq draws one of the running sequences, in ID order so that runs replay.
func pickSeq[V any](rt *rapid.T, live map[blocktable.SeqID]V) blocktable.SeqID {
	if len(live) == 0 {
		rt.Skip("nothing running")
	}
	ids := make([]blocktable.SeqID, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return rapid.SampledFrom(ids).Draw(rt, "seq")
}
