package bench

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
)

// decodeSteps drives the decode-step benchmarks of W3 and W4: each next gives the running
// sequence and its next output token; once a sequence has taken every token of output it
// is finished and the next one admitted, with the timer stopped, so that only the decode
// steps (the caller's Append, a direct call in its own loop) are timed.
type decodeSteps struct {
	b             *testing.B
	output        []int32
	seq           blocktable.SeqID
	j             int
	admit, finish func(blocktable.SeqID) error
}

// newDecodeSteps admits sequence 0 and reports allocations. admit admits a sequence with
// the request's prompt; finish finishes one.
func newDecodeSteps(b *testing.B, output []int32, admit, finish func(blocktable.SeqID) error) *decodeSteps {
	b.Helper()
	b.ReportAllocs()
	d := &decodeSteps{b: b, output: output, admit: admit, finish: finish}
	if err := admit(0); err != nil {
		b.Fatal(err)
	}
	return d
}

// next returns the sequence to append to and the index in output of the token to append.
// It is small enough to inline, so that the loop costs what the hand-written one did.
func (d *decodeSteps) next() (blocktable.SeqID, int) {
	if d.j == len(d.output) {
		d.rollover()
	}
	d.j++
	return d.seq, d.j - 1
}

// rollover finishes the sequence and admits the next, untimed.
func (d *decodeSteps) rollover() {
	d.b.StopTimer()
	if err := d.finish(d.seq); err != nil {
		d.b.Fatal(err)
	}
	d.seq, d.j = d.seq+1, 0
	if err := d.admit(d.seq); err != nil {
		d.b.Fatal(err)
	}
	d.b.StartTimer()
}
