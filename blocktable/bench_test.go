package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// BenchmarkTableAppend is one decode step of a plain table (no index): a block every 16
// tokens, released and reused every 4,096 tokens.
func BenchmarkTableAppend(b *testing.B) {
	p, _ := blocks.New(1024, blocks.WithNullBlock())
	tb, _ := NewTable(p, 16)
	b.ReportAllocs()
	for b.Loop() {
		if tb.Len() == 4096 {
			_ = tb.Truncate(0)
		}
		if _, err := tb.Append(1, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkManagerAppend is one decode step through the Manager with the prefix index:
// every 16th step commits a block.
func BenchmarkManagerAppend(b *testing.B) {
	p, _ := blocks.New(1024, blocks.WithNullBlock())
	x, _ := prefix.New(p, 16)
	m, _ := New(Config{Pool: p, Index: x, BlockSize: 16})
	req := &Request{Prompt: seqOf(100, 1), MaxTokens: 4096}
	seq := SeqID(0)
	if _, err := m.Admit(seq, req); err != nil {
		b.Fatal(err)
	}
	tok := []int32{0}
	n := 100
	b.ReportAllocs()
	for b.Loop() {
		if n == 4096 {
			_ = m.Finish(seq)
			seq++
			if _, err := m.Admit(seq, req); err != nil {
				b.Fatal(err)
			}
			n = 100
		}
		tok[0] = int32(n)
		if _, err := m.Append(seq, tok, 0); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkFillSlotsAndRow is a step's inputs for one sequence of 2,048 tokens: the slot
// of its new token and its table row.
func BenchmarkFillSlotsAndRow(b *testing.B) {
	p, _ := blocks.New(1024, blocks.WithNullBlock())
	m, _ := New(Config{Pool: p, BlockSize: 16})
	if _, err := m.Admit(1, &Request{Prompt: seqOf(2048, 1)}); err != nil {
		b.Fatal(err)
	}
	slots := make([]int64, 1)
	row := make([]int32, 256)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = m.FillSlots(1, 2047, 0, slots)
		_, _ = m.FillRow(1, row)
	}
}

// BenchmarkPack packs 256 sequences of 2,048 tokens (128 blocks) into one batch.
func BenchmarkPack(b *testing.B) {
	p, _ := blocks.New(256*128+1, blocks.WithNullBlock())
	m, _ := New(Config{Pool: p, BlockSize: 16})
	seqs := make([]SeqID, 256)
	for i := range seqs {
		seqs[i] = SeqID(i)
		if _, err := m.Admit(seqs[i], &Request{Prompt: seqOf(2048, 1)}); err != nil {
			b.Fatal(err)
		}
	}
	var batch Batch
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Pack(&batch, seqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(256*128), "ns/entry")
}
