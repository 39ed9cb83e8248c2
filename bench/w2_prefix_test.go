package bench

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// w2Index caches W2's prompt as ../shared/workloads.md says: allocate its 256 blocks,
// commit them all, release them so they are cached and evictable.
func w2Index(tb testing.TB, opts ...prefix.Option) (*prefix.Index, *prefix.Prompt) {
	p := &prefix.Prompt{Tokens: W2Prompt()}
	n := W2PromptTokens / BlockSize
	pool, err := blocks.New(n+1, blocks.WithNullBlock())
	if err != nil {
		tb.Fatal(err)
	}
	x, err := prefix.New(pool, BlockSize, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	ids, err := pool.Allocate(nil, n)
	if err != nil {
		tb.Fatal(err)
	}
	var cur prefix.Cursor
	if _, err := x.Commit(&cur, p, ids); err != nil {
		tb.Fatal(err)
	}
	if err := x.Release(ids); err != nil {
		tb.Fatal(err)
	}
	return x, p
}

// BenchmarkW2PrefixHit is W2: one iteration looks up the longest cached prefix of the
// 4,096-token prompt from raw tokens (hashing included), taking no references.
func BenchmarkW2PrefixHit(b *testing.B) {
	for _, hc := range []struct {
		name string
		opts []prefix.Option
	}{
		{"fast64", nil},
		// The event hasher is computed at commit only, so SHA-256 costs a lookup nothing.
		{"sha256", []prefix.Option{prefix.WithHasher(prefix.NewSHA256())}},
	} {
		b.Run(hc.name, func(b *testing.B) {
			x, p := w2Index(b, hc.opts...)
			dst := make([]blocks.ID, 0, W2PromptTokens/BlockSize)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				dst, _ = x.Peek(dst[:0], p, prefix.WholePrompt)
			}
			cpu := cpuTime() - cpu0
			if len(dst) != W2PromptTokens/BlockSize {
				b.Fatalf("hit %d blocks, want 256", len(dst))
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns, "ns/lookup")
			b.ReportMetric(ns/float64(len(dst)), "ns/block")
			b.ReportMetric(float64(len(dst)), "blocks-hit")
			if cpu0 != 0 {
				// CPU time per lookup: on this shared machine wall time includes time spent
				// descheduled (see pool_cputime_test.go).
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/lookup")
			}
		})
	}
}

func TestW2FullHit(t *testing.T) {
	x, p := w2Index(t)
	got, _ := x.Peek(nil, p, prefix.WholePrompt)
	if len(got) != 256 {
		t.Fatalf("W2 hits %d blocks, want 256", len(got))
	}
	if got, _ := x.Peek(nil, p, prefix.LeaveOne); len(got) != 255 {
		t.Fatalf("W2 with one token left to compute hits %d blocks, want 255", len(got))
	}
}
