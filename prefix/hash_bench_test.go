package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
)

var sinkU64 uint64
var sinkBool bool

func BenchmarkHashTokens16(b *testing.B) {
	t := toks(12345, 16)
	h := uint64(1)
	for b.Loop() {
		h = hashTokens(h, t)
	}
	sinkU64 = h
}

func BenchmarkSameTokens16(b *testing.B) {
	a, c := toks(12345, 16), toks(12345, 16)
	ok := true
	for b.Loop() {
		ok = ok && sameTokens(a, c)
	}
	sinkBool = ok
}

func TestSameTokens(t *testing.T) {
	for n := 0; n <= 20; n++ {
		a := toks(-5, n)
		if !sameTokens(a, toks(-5, n)) {
			t.Fatalf("len %d: equal blocks differ", n)
		}
		for i := range n {
			b := toks(-5, n)
			b[i] ^= 1 << (i % 32)
			if sameTokens(a, b) {
				t.Fatalf("len %d: blocks differing at %d compare equal", n, i)
			}
		}
		if n > 0 && sameTokens(a, a[:n-1]) {
			t.Fatalf("len %d: different lengths compare equal", n)
		}
	}
}

func BenchmarkMatch256(b *testing.B) {
	pool, err := blocks.New(300)
	if err != nil {
		b.Fatal(err)
	}
	x, err := New(pool, 16)
	if err != nil {
		b.Fatal(err)
	}
	p := &Prompt{Tokens: toks(77, 256*16)}
	ids, _ := pool.Allocate(nil, 256)
	var c Cursor
	if _, err := x.Commit(&c, p, ids); err != nil {
		b.Fatal(err)
	}
	dst := make([]blocks.ID, 0, 256)
	for b.Loop() {
		dst, _ = x.Match(dst[:0], p, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/block")
}
