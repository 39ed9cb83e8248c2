package prefix

import "testing"

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
