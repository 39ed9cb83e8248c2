package bench

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// wrongHintIndex caches the W2 prompt and, under each of its 256 nodes (and the root), one
// other block that a request then reuses, so that every node's hint names that other block
// and not the W2 prompt's next one: a W2 lookup finds its hint wrong at every block and
// goes through the child table each time. It is the hint's worst case.
func wrongHintIndex(tb testing.TB) (*prefix.Index, *prefix.Prompt) {
	w2 := W2Prompt()
	n := W2PromptTokens / BlockSize
	pool, err := blocks.New(2*n+2, blocks.WithNullBlock())
	if err != nil {
		tb.Fatal(err)
	}
	x, err := prefix.New(pool, BlockSize)
	if err != nil {
		tb.Fatal(err)
	}
	cache := func(tokens []int32) {
		p := &prefix.Prompt{Tokens: tokens}
		ids, cur := x.Peek(nil, p, prefix.WholePrompt)
		hit := len(ids)
		if err := x.Acquire(ids); err != nil {
			tb.Fatal(err)
		}
		if ids, err = pool.Allocate(ids, len(tokens)/BlockSize-hit); err != nil {
			tb.Fatal(err)
		}
		if _, err := x.Commit(&cur, p, ids[hit:]); err != nil {
			tb.Fatal(err)
		}
		if err := x.Release(ids); err != nil {
			tb.Fatal(err)
		}
	}
	cache(w2)
	other := make([]int32, 0, W2PromptTokens+BlockSize)
	// Deepest first: caching a shallower block acquires the W2 blocks above it, which moves
	// their parents' hints back onto the W2 path, but never touches a deeper node's hint.
	for d := n - 1; d >= 0; d-- {
		other = append(other[:0], w2[:d*BlockSize]...)
		for i := range BlockSize {
			other = append(other, -1-int32(d*BlockSize+i)) // no real token is negative
		}
		cache(other) // commits the other block (the W2 child keeps the hint)...
		cache(other) // ...and reusing it moves the hint to it
	}
	return x, &prefix.Prompt{Tokens: w2}
}

// BenchmarkMatchWrongHints is W2's lookup when every node's hint names another child, so
// each block costs a failed 16-token comparison, a hash and a table probe: the bound on
// what the hint can cost a prompt that leaves the path requests have been reusing.
func BenchmarkMatchWrongHints(b *testing.B) {
	x, p := wrongHintIndex(b)
	dst := make([]blocks.ID, 0, W2PromptTokens/BlockSize)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = x.Peek(dst[:0], p, prefix.WholePrompt)
	}
	if len(dst) != W2PromptTokens/BlockSize {
		b.Fatalf("hit %d blocks, want 256", len(dst))
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "ns/lookup")
	b.ReportMetric(ns/float64(len(dst)), "ns/block")
}

// TestWrongHintsStillHitEverything checks that the worst case is built as described (the
// W2 prompt still hits all 256 blocks, and a prompt of the other blocks hits too) so that
// the benchmark measures what it says.
func TestWrongHintsStillHitEverything(t *testing.T) {
	x, p := wrongHintIndex(t)
	got, _ := x.Peek(nil, p, prefix.WholePrompt)
	if len(got) != 256 {
		t.Fatalf("W2 hits %d blocks, want 256", len(got))
	}
	if s := x.Stats(); s.Cached != 2*256 {
		t.Fatalf("%d cached blocks, want 512", s.Cached)
	}
}
