package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// parseJSONL reads a JSONL trace (FormatJSONL): one object per line, keys named as the CSV
// columns. Blank lines are allowed; anything else that is not such an object is an error.
// A line may hold at most lim.MaxLineBytes bytes, a value lim.MaxFieldBytes.
func parseJSONL(r io.Reader, lim Limits) (*Trace, error) {
	sc := bufio.NewScanner(r)
	// The scanner's buffer holds a line and its line ending.
	sc.Buffer(make([]byte, 0, min(64*1024, lim.MaxLineBytes+2)), lim.MaxLineBytes+2)
	b := newRowBuilder(lim)
	fields := map[string]string{}
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if len(text) > lim.MaxLineBytes {
			return nil, traceErr(line, "", "line %v", &errTooLong{lim.MaxLineBytes})
		}
		if err := json.Unmarshal(text, &obj); err != nil {
			return nil, traceErr(line, "", "not a JSON object: %v", err)
		}
		if obj == nil {
			return nil, traceErr(line, "", "not a JSON object: %s", clip(string(text)))
		}
		clear(fields)
		for k, raw := range obj {
			c, ok := canonicalColumn(k)
			if !ok {
				return nil, traceErr(line, clipName(k), "unknown key; accepted: %s", acceptedColumns)
			}
			if _, dup := fields[c]; dup {
				return nil, traceErr(line, clipName(k), "key %s given twice", c)
			}
			if len(raw) > lim.MaxFieldBytes {
				return nil, traceErr(line, c, "value of %d bytes, longer than the limit of %d (Limits.MaxFieldBytes): %s", len(raw), lim.MaxFieldBytes, clip(string(raw)))
			}
			v, err := scalarText(raw)
			if err != nil {
				return nil, traceErr(line, clipName(k), "%v", err)
			}
			if v == "" && (c == colGroup || c == colShared) {
				continue
			}
			fields[c] = v
		}
		if err := b.add(line, fields); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, traceErr(line+1, "", "line %v", &errTooLong{lim.MaxLineBytes})
	} else if err != nil {
		return nil, traceErr(line+1, "", "reading: %v", err)
	}
	return b.finish(), nil
}

// scalarText returns a JSON scalar as text: a string unquoted, a number as written, null
// as "". Objects, arrays and booleans are errors.
func scalarText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		// Integers written as 12.0 or 1e3 are accepted when they are whole.
		if _, err := strconv.Atoi(string(raw)); err == nil {
			return string(raw), nil
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return "", err
		}
		if f == float64(int64(f)) && f >= -1<<53 && f <= 1<<53 {
			return strconv.FormatInt(int64(f), 10), nil
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	}
	return "", errNotScalar{string(raw)}
}

type errNotScalar struct{ v string }

func (e errNotScalar) Error() string { return "want a number or a string, got " + clip(e.v) }
