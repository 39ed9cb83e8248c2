package cluster_test

import (
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// FuzzDecodeApply feeds whatever decodes into a ClusterIndex, as a subscriber does: Apply
// must accept every decoded batch without panicking, respect the per-server cap, keep its
// invariants, and keep answering lookups.
func FuzzDecodeApply(f *testing.F) {
	h := vllmhash.NewSHA256CBOR("42")
	p := prompt(prefix.Namespace{Salt: "s"}, 0, 32)
	hs := vllmhash.PromptHashes(h, p, 4)
	for _, opts := range [][]kvevents.Option{nil, {kvevents.WithIntHashes()}, {kvevents.WithoutExtraKeys()}} {
		b := newBatcher(f, opts...)
		e := &prefix.BlockStored{HashSize: 32, BlockSize: 4, Namespace: p.Namespace, Tokens: p.Tokens[:16]}
		for i := range 4 {
			e.Hashes = append(e.Hashes, hs[i]...)
			e.Blocks = append(e.Blocks, blocks.ID(i))
		}
		b.BlockStored(e)
		b.BlockRemoved(&prefix.BlockRemoved{HashSize: 32, Hashes: hs[3], Blocks: []blocks.ID{3}})
		b.AllBlocksCleared()
		f.Add(b.AppendBatch(nil, 1))
	}
	toks := make([]any, 16)
	for i := range toks {
		toks[i] = i
	}
	root, _ := msgpack.Marshal([]any{1.0, []any{ // issue 13 item 4
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks, 16, nil, "GPU", nil, []any{}},
	}, 0})
	f.Add(root)
	m, _ := msgpack.Marshal([]any{1.0, []any{map[string]any{"type": "BlockStored", "block_hashes": []any{1, 2}, "token_ids": toks[:8], "block_size": 4, "extra_keys": []any{[]any{"x", 1}}}}})
	f.Add(m)
	// A root block in the (identifier, offset) form (vLLM since March 2026) beside lora and
	// salt, with offsets at the edges of int64 and uint64, pairs of the wrong shape, a
	// group_idx beyond the index's slots and one of -1, and a medium no vLLM tier names.
	pairs, _ := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks[:4], 4, nil, "GPU", "l", []any{[]any{"l", []any{"img", -3}, "s"}}, 0},
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks[:4], 4, nil, "TAPE", nil, []any{[]any{[]any{"img", int64(math.MinInt64)}}}, 62},
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks[:4], 4, nil, nil, nil, []any{[]any{[]any{"img", uint64(math.MaxUint64)}, []any{"img"}, []any{1, 2}}}, 63},
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks[:4], 4, nil, "DISK", nil, []any{[]any{[]any{"img", int64(math.MaxInt64), "x"}}}, math.MaxInt16},
		[]any{"BlockRemoved", []any{make([]byte, 32)}, "CPU", 63},
	}, 0})
	f.Add(pairs)
	neg, _ := msgpack.Marshal([]any{1.0, []any{[]any{"BlockRemoved", []any{make([]byte, 32)}, "CPU", -1}}}) // refused
	f.Add(neg)
	mp, _ := msgpack.Marshal(map[string]any{"ts": 1.0, "events": []any{map[string]any{
		"type": "BlockStored", "block_hashes": []any{make([]byte, 32)}, "token_ids": toks[:4], "block_size": 4,
		"medium": "CPU", "group_idx": 5, "extra_keys": []any{[]any{[]any{"img", int64(1 << 40)}}},
	}}})
	f.Add(mp)
	for _, opts := range [][]kvevents.Option{{kvevents.WithGroup(2), kvevents.WithMedium(kvevents.MediumDisk)}} {
		b := newBatcher(f, opts...)
		pm := &prefix.Prompt{Namespace: prefix.Namespace{LoRA: "l", Salt: "s"}, Tokens: p.Tokens[:8], MM: []prefix.MMInput{{Hash: "img", Offset: 2, Length: 4}}}
		hm := vllmhash.PromptHashesForm(h, pm, 4, prefix.MMKeyIdentifierOffset)
		e := &prefix.BlockStored{HashSize: 32, BlockSize: 4, Namespace: pm.Namespace, Tokens: pm.Tokens,
			Hashes: append(append([]byte(nil), hm[0]...), hm[1]...), Blocks: []blocks.ID{0, 1},
			MM: [][]string{{"img"}, {"img"}}, MMOffsets: [][]int{{2}, {-2}}}
		b.BlockStored(e)
		f.Add(b.AppendBatch(nil, 1))
	}

	const maxBlocks = 64
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d kvevents.Decoder
		var b kvevents.Batch
		if d.Decode(payload, &b) != nil {
			return
		}
		c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4, cluster.WithMaxBlocksPerServer(maxBlocks))
		if err != nil {
			t.Fatal(err)
		}
		for _, srv := range []string{"a", "b", "a"} { // twice to one server: idempotent
			if err := c.Apply(srv, &b); err != nil {
				t.Fatalf("Apply refused a decoded batch: %v", err)
			}
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats("a"); st.Blocks > maxBlocks {
			t.Fatalf("server holds %d blocks, cap %d", st.Blocks, maxBlocks)
		}
		// Without the cap in play a batch is idempotent.
		if a, b := c.Stats("a").Blocks, c.Stats("b").Blocks; c.Stats("a").Refused == 0 && a != b {
			t.Fatalf("the same batch applied once and twice gives %d and %d blocks", b, a)
		}
		hits, err := c.Match(nil, p)
		if err != nil || len(hits) != 2 {
			t.Fatalf("Match: %v, %v", hits, err)
		}
		for _, hit := range hits {
			if hit.Blocks < 0 || hit.Blocks > len(hs) {
				t.Fatalf("hit %+v", hit)
			}
		}
	})
}
