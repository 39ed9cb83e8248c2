package bench

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// scalingTail is the number of own blocks each extra cached prefix adds after the point
// where it leaves the W2 prompt.
const scalingTail = 4

// scalingIndex caches the W2 prompt plus n-1 other prefixes. Prefix i follows the W2 prompt
// for a seeded random number of blocks in [0, 256) and then adds scalingTail blocks of its
// own, so the W2 path grows siblings all along its length. It returns the index, the number
// of cached blocks, and the heap bytes the index holds (runtime.MemStats, after GC,
// measured around New and the inserts; the pool and the prompts are not counted).
func scalingIndex(tb testing.TB, n int) (x *prefix.Index, cached int, heapBytes uint64, prefixes [][2]int) {
	w2 := W2Prompt()
	w2Blocks := W2PromptTokens / BlockSize
	total := w2Blocks + (n-1)*scalingTail
	pool, err := blocks.New(total+1, blocks.WithNullBlock())
	if err != nil {
		tb.Fatal(err)
	}
	rng := NewSplitMix64(Seed)
	prefixes = make([][2]int, n) // (shared blocks, seed of own tokens)
	for i := 1; i < n; i++ {
		prefixes[i] = [2]int{int(rng.Next() % uint64(w2Blocks)), i}
	}
	prefixes[0] = [2]int{w2Blocks, 0}
	buf := make([]int32, 0, W2PromptTokens+scalingTail*BlockSize)
	ids := make([]blocks.ID, 0, w2Blocks+scalingTail)

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	x, err = prefix.New(pool, BlockSize)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range prefixes {
		p := prefix.Prompt{Tokens: scalingPrompt(buf, w2, prefixes[i])}
		var cur prefix.Cursor
		ids, cur = x.Peek(ids[:0], &p, prefix.WholePrompt)
		hit := len(ids)
		if err := x.Acquire(ids); err != nil {
			tb.Fatal(err)
		}
		if ids, err = pool.Allocate(ids, len(p.Tokens)/BlockSize-hit); err != nil {
			tb.Fatal(err)
		}
		if _, err := x.Commit(&cur, &p, ids[hit:]); err != nil {
			tb.Fatal(err)
		}
		if err := x.Release(ids); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(x)
	cached = x.Stats().Cached
	if cached != total {
		tb.Fatalf("cached %d blocks, want %d", cached, total)
	}
	return x, cached, m1.HeapAlloc - m0.HeapAlloc, prefixes
}

// scalingPrompt builds prefix (shared, seed): the first shared blocks of w2, then
// scalingTail blocks of seeded tokens (none for the W2 prompt itself).
func scalingPrompt(buf, w2 []int32, pr [2]int) []int32 {
	buf = append(buf[:0], w2[:pr[0]*BlockSize]...)
	if pr[1] == 0 {
		return buf
	}
	r := NewSplitMix64(uint64(pr[1]) * 7919)
	for range scalingTail * BlockSize {
		buf = append(buf, r.Token())
	}
	return buf
}

// rotation hands out the prompts of k cached prefixes in turn, each assembled in one reused
// buffer: the W2 prompt with the prefix's own tail written over it where it leaves the W2
// path. A server looks up a prompt its tokenizer has just written, so the prompt is in the
// CPU cache and only the index may be cold; k separate prompt buffers (34 MB at k = 4,096)
// would time streaming them from memory instead. Assembling costs two copies of 64 tokens
// per lookup, the same at every index size.
type rotation struct {
	buf     []int32   // the W2 prompt, with room for a tail after its end
	w2      []int32   // the W2 prompt, to restore buf from
	shared  []int     // per prompt: tokens it shares with the W2 prompt
	tails   [][]int32 // per prompt: its own tokens (none for the W2 prompt itself)
	i, prev int
	p       prefix.Prompt
}

func newRotation(w2 []int32, prefixes [][2]int, k int) *rotation {
	r := &rotation{buf: make([]int32, len(w2)+scalingTail*BlockSize), w2: w2, prev: -1}
	copy(r.buf, w2)
	n := len(prefixes)
	for i := range k {
		pr := prefixes[(i*7919)%n]
		full := scalingPrompt(nil, w2, pr)
		r.shared = append(r.shared, pr[0]*BlockSize)
		r.tails = append(r.tails, full[pr[0]*BlockSize:])
	}
	return r
}

// next restores the tokens the previous prompt overwrote and returns the next prompt.
func (r *rotation) next() *prefix.Prompt {
	if j := r.prev; j >= 0 {
		s := r.shared[j]
		copy(r.buf[s:s+len(r.tails[j])], r.w2[min(s, len(r.w2)):])
	}
	s, t := r.shared[r.i], r.tails[r.i]
	copy(r.buf[s:], t)
	r.p.Tokens = r.buf[:s+len(t)]
	r.prev = r.i
	if r.i++; r.i == len(r.tails) {
		r.i = 0
	}
	return &r.p
}

// BenchmarkMatchScaling looks up prompts in an index holding 1, 1,000 and 100,000 cached
// prefixes. "w2" looks up the W2 prompt every time (256 blocks, the same path); "rotating"
// looks up a different cached prefix each time, so the path is rarely in the CPU cache.
// bytes/block is the index's heap per cached block, its 16 tokens included.
func BenchmarkMatchScaling(b *testing.B) {
	for _, n := range []int{1, 1000, 100000} {
		x, cached, heap, prefixes := scalingIndex(b, n)
		w2 := W2Prompt()
		dst := make([]blocks.ID, 0, W2PromptTokens/BlockSize+scalingTail)
		b.Run(fmt.Sprintf("prefixes=%d/w2", n), func(b *testing.B) {
			p := &prefix.Prompt{Tokens: w2}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				dst, _ = x.Peek(dst[:0], p, prefix.WholePrompt)
			}
			if cpu := cpuTime() - cpu0; cpu0 != 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(len(dst)), "cpu-ns/block")
			}
			if len(dst) != W2PromptTokens/BlockSize {
				b.Fatalf("hit %d blocks", len(dst))
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns, "ns/lookup")
			b.ReportMetric(ns/float64(len(dst)), "ns/block")
			b.ReportMetric(float64(heap)/float64(cached), "bytes/block")
			b.ReportMetric(float64(cached), "cached-blocks")
		})
		b.Run(fmt.Sprintf("prefixes=%d/rotating", n), func(b *testing.B) {
			r := newRotation(w2, prefixes, min(n, 4096))
			hit := 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				dst, _ = x.Peek(dst[:0], r.next(), prefix.WholePrompt)
				hit += len(dst)
			}
			if cpu := cpuTime() - cpu0; cpu0 != 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(hit), "cpu-ns/block")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hit), "ns/block")
			b.ReportMetric(float64(heap)/float64(cached), "bytes/block")
		})
	}
}

// TestMatchScalingMemory holds the index to 160 bytes per cached block with the default
// hasher, 64 of them tokens, at the largest size of BenchmarkMatchScaling. (It was 128 while
// the default LRU was built into the index and read each candidate's time from its node;
// evict.NewLRU keeps the time in its own heap element, 4 bytes more a block. 132 until the
// child table went from two slots a block to four, 8 bytes more, which halved the cost of
// each eviction's deletion from it: 3.4% of W3's instructions, see bench/README.md. 136
// until a node became one 64-byte cache line holding its generation, hits and hint child,
// 20 bytes more a block, for two to three fewer lines a commit touches: 13% fewer
// last-level misses in the simulator's sharing run, see bench/README.md's seventh session.)
func TestMatchScalingMemory(t *testing.T) {
	if testing.Short() || invariant.Enabled {
		t.Skip("builds an index of 400,000 blocks (too slow with invariant checks)")
	}
	_, cached, heap, _ := scalingIndex(t, 100000)
	perBlock := float64(heap) / float64(cached)
	t.Logf("%d cached blocks, %.1f bytes each", cached, perBlock)
	if perBlock > 160 {
		t.Fatalf("index memory %.1f bytes per cached block, want at most 160", perBlock)
	}
}

// TestRotationBuildsEachPrefix checks that the reused buffer holds exactly each cached prefix
// in turn, the W2 prompt's own tokens restored in between.
func TestRotationBuildsEachPrefix(t *testing.T) {
	w2 := W2Prompt()
	prefixes := [][2]int{{256, 0}, {3, 1}, {255, 2}, {0, 3}, {100, 4}}
	r := newRotation(w2, prefixes, len(prefixes))
	for round := range 2 {
		for i := range prefixes {
			want := scalingPrompt(nil, w2, prefixes[(i*7919)%len(prefixes)])
			got := r.next().Tokens
			if !slices.Equal(got, want) {
				t.Fatalf("round %d prompt %d: got %d tokens, want %d, or different tokens", round, i, len(got), len(want))
			}
		}
	}
}

// BenchmarkDependentLoad is the machine's memory latency, for reading MatchScaling's
// rotating figures: one b.N iteration is one load whose address depends on the previous
// load, over a random cycle through an array of the size given (lmbench's lat_mem_rd).
// A 64 MB array, larger than the 100,000-prefix index, misses the caches and the TLB on
// nearly every load; a 1 MB one mostly hits L2.
func BenchmarkDependentLoad(b *testing.B) {
	for _, mb := range []int{1, 64} {
		b.Run(fmt.Sprintf("MB=%d", mb), func(b *testing.B) {
			// One int32 per 64-byte line, so that every load is a different cache line.
			const stride = 16
			lines := mb << 20 / 64
			next := make([]int32, lines*stride)
			order := make([]int32, lines)
			r := NewSplitMix64(Seed)
			for i := range order {
				order[i] = int32(i)
			}
			for i := len(order) - 1; i > 0; i-- { // Fisher-Yates: one cycle through all lines
				j := int(r.Next() % uint64(i+1))
				order[i], order[j] = order[j], order[i]
			}
			for i := range order {
				next[int(order[i])*stride] = order[(i+1)%len(order)] * stride
			}
			p := int32(0)
			for b.Loop() {
				p = next[p]
			}
			if p < 0 {
				b.Fatal("unreachable: keeps p alive")
			}
		})
	}
}
