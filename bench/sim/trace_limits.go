package sim

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// Limits bounds what a trace reader accepts, so that a hostile or broken file costs
// memory proportional to these limits, not to its size or to any length it declares.
// A file beyond a limit is an error (ErrBadTrace) naming the line and the limit.
type Limits struct {
	// MaxLineBytes caps one CSV record or JSONL line (newline excluded), and one element
	// of a ShareGPT array. Default 1 MiB: a trace line is a few dozen bytes, and the
	// largest ShareGPT_V3 conversation is about 0.1 MiB.
	MaxLineBytes int
	// MaxFieldBytes caps one CSV field or JSONL value (a number or a prefix group name).
	// Default 4 KiB.
	MaxFieldBytes int
	// MaxRequests caps the requests one trace may hold. Default 2^24 (16,777,216), about
	// 1.2 GiB of requests.
	MaxRequests int
}

// Default limits (see Limits).
const (
	DefaultMaxLineBytes  = 1 << 20
	DefaultMaxFieldBytes = 4 << 10
	DefaultMaxRequests   = 1 << 24
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxLineBytes: DefaultMaxLineBytes, MaxFieldBytes: DefaultMaxFieldBytes, MaxRequests: DefaultMaxRequests}
}

// orDefault fills the zero fields with the defaults and rejects negative ones.
func (l Limits) orDefault() (Limits, error) {
	d := DefaultLimits()
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{{"MaxLineBytes", &l.MaxLineBytes, d.MaxLineBytes}, {"MaxFieldBytes", &l.MaxFieldBytes, d.MaxFieldBytes}, {"MaxRequests", &l.MaxRequests, d.MaxRequests}} {
		switch {
		case *f.v < 0:
			return l, fmt.Errorf("%w: trace limit %s %d is negative", ErrInvalidConfig, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return l, nil
}

// clip quotes at most 40 bytes of s for an error message, saying how long s was when it
// is cut: an error never carries a whole hostile field.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:n]), len(s))
}

// clipName is s cut to 40 bytes, for a TraceError's Field when the name comes from the
// file.
func clipName(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:40] + "..."
}

// errTooLong is the error a boundedReader returns once the unconsumed part of the input
// passes its limit. Readers turn it into a TraceError naming the line.
type errTooLong struct{ limit int }

func (e *errTooLong) Error() string {
	return fmt.Sprintf("longer than the limit of %d bytes (Limits.MaxLineBytes, --trace-max-line-bytes)", e.limit)
}

// boundedReader passes a reader through to a parser (csv.Reader, json.Decoder) that
// buffers a whole record or value before returning it, and fails once the bytes handed
// to the parser since the last completed record pass the limit plus slack (what the
// parser may read ahead), so that the parser never buffers more than that. The parser's
// caller reports each completed record with mark(offset), offset being the parser's
// InputOffset. It also keeps the bytes after the last mark so that an error can be given
// a line number.
type boundedReader struct {
	r         io.Reader
	limit     int    // bytes one record may span
	slack     int    // bytes the parser may read ahead of the record it is on
	delivered int64  // bytes handed to the parser
	mark      int64  // offset of the end of the last completed record
	lines     int    // newlines before mark
	kept      []byte // kept[start:] are the bytes delivered after mark
	start     int
	err       error
}

func newBoundedReader(r io.Reader, limit, slack int) *boundedReader {
	return &boundedReader{r: r, limit: limit, slack: slack}
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	room := int64(b.limit+b.slack) - (b.delivered - b.mark)
	if room <= 0 {
		b.err = &errTooLong{b.limit}
		return 0, b.err
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.delivered += int64(n)
	if b.start > 0 && b.start >= len(b.kept)/2 {
		b.kept = append(b.kept[:0], b.kept[b.start:]...)
		b.start = 0
	}
	b.kept = append(b.kept, p[:n]...)
	return n, err
}

func (b *boundedReader) pending() []byte { return b.kept[b.start:] }

// advance records that the parser has consumed everything before offset.
func (b *boundedReader) advance(offset int64) {
	if offset <= b.mark {
		return
	}
	n := int(min(offset-b.mark, int64(len(b.pending()))))
	b.lines += bytes.Count(b.pending()[:n], []byte{'\n'})
	b.start += n
	b.mark = offset
}

// lineAt is the 1-based line of offset, which must not lie before the last mark.
func (b *boundedReader) lineAt(offset int64) int {
	n := int(min(max(offset-b.mark, 0), int64(len(b.pending()))))
	return b.lines + bytes.Count(b.pending()[:n], []byte{'\n'}) + 1
}

// skipSpace returns the offset of the first byte at or after offset that is neither
// white space nor a comma, among the bytes kept.
func (b *boundedReader) skipSpace(offset int64) int64 {
	p := b.pending()
	for i := max(offset-b.mark, 0); i < int64(len(p)); i++ {
		switch p[i] {
		case ' ', '\t', '\r', '\n', ',':
		default:
			return b.mark + i
		}
	}
	return b.mark + int64(len(p))
}
