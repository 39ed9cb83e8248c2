package sim

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
)

// csvReadAhead is what csv.Reader's bufio.Reader may hold beyond the record it returns.
const csvReadAhead = 4096

// parseCSV reads a CSV trace with a header row (FormatCSV). A record (one line, or more
// when a quoted field holds a newline) may span at most lim.MaxLineBytes bytes, a field
// lim.MaxFieldBytes.
func parseCSV(r io.Reader, lim Limits) (*Trace, error) {
	br := newBoundedReader(r, lim.MaxLineBytes, csvReadAhead)
	cr := csv.NewReader(br)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, traceErr(0, "", "empty file: a header row is needed (%s)", acceptedColumns)
	}
	if err != nil {
		return nil, csvErr(br, err)
	}
	br.advance(cr.InputOffset())
	cols := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		c, ok := canonicalColumn(strings.TrimPrefix(h, "\ufeff"))
		if !ok {
			return nil, traceErr(1, clipName(h), "unknown column; accepted: %s", acceptedColumns)
		}
		if seen[c] {
			return nil, traceErr(1, clipName(h), "column %s given twice", c)
		}
		seen[c] = true
		cols[i] = c
	}
	for _, need := range []string{colInput, colOutput} {
		if !seen[need] {
			return nil, traceErr(1, need, "missing column; accepted: %s", acceptedColumns)
		}
	}
	b := newRowBuilder(lim)
	fields := make(map[string]string, len(cols))
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(br, err)
		}
		br.advance(cr.InputOffset())
		line, _ := cr.FieldPos(0)
		clear(fields)
		for i, v := range rec {
			if len(v) > lim.MaxFieldBytes {
				return nil, traceErr(line, cols[i], "field of %d bytes, longer than the limit of %d (Limits.MaxFieldBytes): %s", len(v), lim.MaxFieldBytes, clip(v))
			}
			v = strings.TrimSpace(v)
			if v == "" && (cols[i] == colGroup || cols[i] == colShared) {
				continue // an empty prefix cell: this request shares nothing
			}
			fields[cols[i]] = v
		}
		if err := b.add(line, fields); err != nil {
			return nil, err
		}
	}
	return b.finish(), nil
}

// csvErr turns the csv package's errors (which know the line) and the bounded reader's
// into TraceErrors.
func csvErr(br *boundedReader, err error) error {
	var long *errTooLong
	if errors.As(err, &long) {
		return traceErr(br.lineAt(br.mark), "", "record %v", long)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return traceErr(pe.StartLine, "", "%v", pe.Err)
	}
	return traceErr(0, "", "%v", err)
}
