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
		h = hashTokens(h, t, &fastSecret)
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
		dst, _ = x.Peek(dst[:0], p, WholePrompt)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/block")
}

// The unrolled forms used for blocks of 16 tokens agree with the general ones.
func TestHash16AndSame16AgreeWithGeneral(t *testing.T) {
	r := uint64(12345)
	next := func() int32 { r = r*6364136223846793005 + 1442695040888963407; return int32(r >> 33) }
	for range 1000 {
		a := make([]int32, 16)
		for i := range a {
			a[i] = next()
		}
		b := append([]int32(nil), a...)
		if next()%2 == 0 {
			b[next()&15] ^= 1 << (uint32(next()) % 32)
		}
		parent := uint64(next())<<32 | uint64(uint32(next()))
		if chain(parent, content16((*[16]int32)(a), &fastSecret), &fastSecret) != hashTokens(parent, a, &fastSecret) {
			t.Fatal("content16 differs from contentHash")
		}
		if same16((*[16]int32)(a), (*[16]int32)(b)) != sameTokens(a, b) || sameTokens(a, b) != slicesEqual(a, b) {
			t.Fatal("same16, sameTokens and a plain comparison disagree")
		}
	}
}

func slicesEqual(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
