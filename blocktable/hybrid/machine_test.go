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

// TestMachineAgainstVLLMModel runs random admissions, decode steps and finishes on
// random hybrid models (one to three groups of full attention, sliding windows, Mamba
// state and chunked local attention, small pools, EAGLE or not, two namespaces) through the Manager and through the reference model of vLLM's
// hybrid manager, and requires the same hits, the same block IDs in every group's table,
// the same evictions and free-queue length, and the invariants, after every step.
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
			switch kind := rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("kind", g)); {
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
		m, err := hybrid.New(hybrid.Config{Groups: specs, NumBlocks: nb, Eagle: eagle})
		if err != nil {
			rt.Fatal(err)
		}
		ref := newVMManager(nb, mgroups, eagle)
		ref.checkFirst = true
		live := map[blocktable.SeqID]*vmRequest{}
		next := blocktable.SeqID(0)
		const maxExtra = 12
		bases := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 2, 3, 4, 9, 9, 9, 9}, {5, 5, 5, 5, 5, 5, 5, 5}}
		check := func(what string) {
			for id, r := range live {
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
				id := next
				next++
				salt := rapid.SampledFrom([]string{"", "", "tenant"}).Draw(rt, "salt")
				r := ref.newRequestIn(salt, prompt)
				hits, want := ref.computedBlocks(r)
				ok := ref.allocateSlots(r, n-want, want, hits)
				got, err := m.Admit(id, &hybrid.Request{Prompt: prompt, MaxTokens: n + maxExtra, Namespace: prefix.Namespace{Salt: salt}})
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
				live[id] = r
				check("admit")
			},
			"append": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				r := live[id]
				tok := rapid.Int32Range(0, 2).Draw(rt, "tok")
				err := m.Append(id, []int32{tok})
				if errors.Is(err, blocktable.ErrInvalidArgument) {
					return // at MaxTokens: nothing changed; the model is not told
				}
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
				check("append")
			},
			"finish": func(rt *rapid.T) {
				id := pickSeq(rt, live)
				if err := m.Finish(id); err != nil {
					rt.Fatal(err)
				}
				ref.free(live[id])
				delete(live, id)
				check("finish")
			},
		})
	})
}

// pickSeq draws one of the running sequences, in ID order so that runs replay.
func pickSeq(rt *rapid.T, live map[blocktable.SeqID]*vmRequest) blocktable.SeqID {
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
