package blocks

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// WriteState writes the pool's whole state to w as deterministic, line-oriented text: the
// free list in hand-out order, every held block with its refcount, the counters, and any
// Faults. Two pools that will behave identically write identical text, so tests use it for
// golden files and as a deep snapshot ("a failed call changed nothing"). It allocates and
// costs O(capacity): it is for tests and debugging, never for a hot path.
//
//	pool capacity=8 null=true free=5 held=3
//	  free 4 5 6 7 8
//	  held 1x1 2x2 3x1
//	  counters allocations=3 releases=0 failed=0 reclaimed=0
func (p *Pool) WriteState(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pool capacity=%d null=%v free=%d held=%d\n", len(p.ring), p.hasNull, p.nfree, len(p.ring)-p.nfree)
	b.WriteString("  free")
	for i := range p.nfree {
		b.WriteByte(' ')
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(p.ring[(p.head+i)%len(p.ring)]), 10))
	}
	b.WriteString("\n  held")
	for id, r := range p.refs {
		if r != 0 {
			b.WriteByte(' ')
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(id), 10))
			b.WriteByte('x')
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(r), 10))
		}
	}
	fmt.Fprintf(&b, "\n  counters allocations=%d releases=%d failed=%d reclaimed=%d\n", p.allocs, p.releases, p.failed, p.reclaimed)
	if f := p.faults; f != nil {
		fmt.Fprintf(&b, "  faults hidden=%d failin=%d tripped=%d\n", f.Hidden, f.FailIn, f.Tripped)
	}
	_, err := w.Write(b.Bytes())
	return err
}
