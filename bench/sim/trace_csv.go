package sim

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
)

// parseCSV reads a CSV trace with a header row (FormatCSV).
func parseCSV(r io.Reader) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, traceErr(0, "", "empty file: a header row is needed (%s)", acceptedColumns)
	}
	if err != nil {
		return nil, csvErr(err)
	}
	cols := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		c, ok := canonicalColumn(strings.TrimPrefix(h, "\ufeff"))
		if !ok {
			return nil, traceErr(1, h, "unknown column; accepted: %s", acceptedColumns)
		}
		if seen[c] {
			return nil, traceErr(1, h, "column %s given twice", c)
		}
		seen[c] = true
		cols[i] = c
	}
	for _, need := range []string{colInput, colOutput} {
		if !seen[need] {
			return nil, traceErr(1, need, "missing column; accepted: %s", acceptedColumns)
		}
	}
	b := newRowBuilder()
	fields := make(map[string]string, len(cols))
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(err)
		}
		line, _ := cr.FieldPos(0)
		clear(fields)
		for i, v := range rec {
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

// csvErr turns the csv package's errors (which know the line) into TraceErrors.
func csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return traceErr(pe.StartLine, "", "%v", pe.Err)
	}
	return traceErr(0, "", "%v", err)
}
