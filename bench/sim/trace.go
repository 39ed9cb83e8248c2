package sim

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Format is a trace file format.
type Format int

// Trace formats. CSV covers the Azure LLM inference trace too (recognised by its header).
const (
	// FormatCSV: a header row, then one request per row. Columns (case-insensitive, in
	// any order): arrival (seconds, optional; alias timestamp, which may also be a
	// date-time as in the Azure trace's TIMESTAMP), input_len (aliases input_tokens,
	// prompt_len, ContextTokens), output_len (aliases output_tokens, GeneratedTokens),
	// prefix_group and prefix_len (optional, together).
	FormatCSV Format = iota + 1
	// FormatJSONL: one JSON object per line with the CSV column names as keys.
	FormatJSONL
	// FormatShareGPT: a JSON array of {"conversations": [{"from", "value"}, ...]} as in the
	// ShareGPT dumps vLLM's benchmarks read: the first turn is the prompt, the second the
	// reply; each turn's length is its "tokens" field when present, else ceil(runes/4).
	FormatShareGPT
)

// String returns the format's name, as --trace-format takes it.
func (f Format) String() string {
	switch f {
	case FormatCSV:
		return "csv"
	case FormatJSONL:
		return "jsonl"
	case FormatShareGPT:
		return "sharegpt"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat returns the format called name ("csv", "azure" (an alias of csv), "jsonl",
// "sharegpt").
func ParseFormat(name string) (Format, error) {
	switch strings.ToLower(name) {
	case "csv", "azure":
		return FormatCSV, nil
	case "jsonl":
		return FormatJSONL, nil
	case "sharegpt", "json":
		return FormatShareGPT, nil
	}
	return 0, fmt.Errorf("%w: unknown trace format %q (csv, azure, jsonl, sharegpt)", ErrInvalidConfig, name)
}

// DetectFormat guesses a file's format from its extension: .csv, .jsonl (or .ndjson),
// .json (ShareGPT).
func DetectFormat(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return FormatCSV, nil
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".json":
		return FormatShareGPT, nil
	}
	return 0, fmt.Errorf("%w: cannot tell the format of %q from its extension; pass --trace-format", ErrInvalidConfig, path)
}

// ParseTrace reads a whole trace. Every malformed record is an error naming its line
// (a *TraceError wrapping ErrBadTrace); nothing is skipped silently (ShareGPT
// conversations without a prompt and a reply are counted in Trace.Skipped). Requests are
// sorted by arrival time, ties in file order, and numbered in that order.
//
// ParseTrace applies DefaultLimits; ParseTraceLimited takes others.
func ParseTrace(r io.Reader, f Format) (*Trace, error) {
	return ParseTraceLimited(r, f, DefaultLimits())
}

// ParseTraceLimited is ParseTrace within lim (zero fields take the defaults).
func ParseTraceLimited(r io.Reader, f Format, lim Limits) (*Trace, error) {
	lim, err := lim.orDefault()
	if err != nil {
		return nil, err
	}
	var t *Trace
	switch f {
	case FormatCSV:
		t, err = parseCSV(r, lim)
	case FormatJSONL:
		t, err = parseJSONL(r, lim)
	case FormatShareGPT:
		t, err = parseShareGPT(r, lim)
	default:
		return nil, fmt.Errorf("%w: unknown trace format %v", ErrInvalidConfig, f)
	}
	if err != nil {
		return nil, err
	}
	if len(t.Requests) == 0 {
		return nil, traceErr(0, "", "no requests")
	}
	slices.SortStableFunc(t.Requests, func(a, b Request) int {
		switch {
		case a.Arrival < b.Arrival:
			return -1
		case a.Arrival > b.Arrival:
			return 1
		}
		return 0
	})
	for i := range t.Requests {
		t.Requests[i].ID = i
	}
	return t, nil
}

// Canonical column names and the aliases each accepts (lower case).
const (
	colArrival = "arrival"
	colInput   = "input_len"
	colOutput  = "output_len"
	colGroup   = "prefix_group"
	colShared  = "prefix_len"
)

var columnAliases = map[string]string{
	"arrival": colArrival, "arrival_time": colArrival, "timestamp": colArrival,
	"input_len": colInput, "input_tokens": colInput, "prompt_len": colInput, "contexttokens": colInput,
	"output_len": colOutput, "output_tokens": colOutput, "generatedtokens": colOutput,
	"prefix_group": colGroup,
	"prefix_len":   colShared,
}

func canonicalColumn(name string) (string, bool) {
	c, ok := columnAliases[strings.ToLower(strings.TrimSpace(name))]
	return c, ok
}

const acceptedColumns = "arrival (or arrival_time, timestamp), input_len (or input_tokens, prompt_len, ContextTokens), " +
	"output_len (or output_tokens, GeneratedTokens), prefix_group, prefix_len"

// rowBuilder turns records of named fields into Requests, checking every value and the
// consistency of optional fields across rows, and interning prefix group names.
type rowBuilder struct {
	t          *Trace
	lim        Limits
	groups     map[string]int
	hasArrival int // 0 unknown, 1 every row has one, -1 no row has one
	epoch      *time.Time
}

func newRowBuilder(lim Limits) *rowBuilder {
	return &rowBuilder{t: &Trace{}, lim: lim, groups: map[string]int{}}
}

// add validates one record. fields maps canonical column names to their text; a column
// that is absent from the record is missing from the map.
func (b *rowBuilder) add(line int, fields map[string]string) error {
	if len(b.t.Requests) >= b.lim.MaxRequests {
		return traceErr(line, "", "more than %d requests (Limits.MaxRequests)", b.lim.MaxRequests)
	}
	req := Request{Group: -1}
	var err error
	if req.Input, err = positiveInt(line, colInput, fields); err != nil {
		return err
	}
	if req.Output, err = positiveInt(line, colOutput, fields); err != nil {
		return err
	}
	arrival, has := fields[colArrival]
	switch {
	case b.hasArrival == 0 && has:
		b.hasArrival = 1
	case b.hasArrival == 0:
		b.hasArrival = -1
	case b.hasArrival == 1 && !has:
		return traceErr(line, colArrival, "missing, but earlier rows have arrival times")
	case b.hasArrival == -1 && has:
		return traceErr(line, colArrival, "present, but earlier rows have no arrival time")
	}
	if has {
		if req.Arrival, err = b.parseArrival(line, arrival); err != nil {
			return err
		}
	}
	group, hasGroup := fields[colGroup]
	shared, hasShared := fields[colShared]
	hasGroup = hasGroup && group != ""
	hasShared = hasShared && shared != ""
	switch {
	case hasGroup && !hasShared:
		return traceErr(line, colShared, "missing for prefix group %s", clip(group))
	case hasShared && !hasGroup:
		if n, perr := strconv.Atoi(shared); perr == nil && n == 0 {
			break // a shared length of 0 without a group shares nothing: harmless
		}
		return traceErr(line, colGroup, "missing, but prefix_len is %s", clip(shared))
	case hasGroup:
		n, perr := strconv.Atoi(shared)
		if perr != nil {
			return traceErr(line, colShared, "not an integer: %s", clip(shared))
		}
		if n < 0 || n > req.Input+req.Output {
			return traceErr(line, colShared, "%d is outside [0, input_len+output_len = %d]", n, req.Input+req.Output)
		}
		g, ok := b.groups[group]
		if !ok {
			g = len(b.t.Groups)
			b.groups[group] = g
			b.t.Groups = append(b.t.Groups, group)
		}
		req.Group, req.Shared = g, n
	}
	b.t.Requests = append(b.t.Requests, req)
	return nil
}

// maxTraceTokens bounds input and output lengths so that sums never overflow.
const maxTraceTokens = 1 << 30

func positiveInt(line int, col string, fields map[string]string) (int, error) {
	s, ok := fields[col]
	if !ok || s == "" {
		return 0, traceErr(line, col, "missing")
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, traceErr(line, col, "not an integer: %s", clip(s))
	}
	if n < 1 || n > maxTraceTokens {
		return 0, traceErr(line, col, "%d is outside [1, %d]", n, maxTraceTokens)
	}
	return n, nil
}

// dateLayouts are the date-times an arrival column may hold instead of seconds: the Azure
// trace's "2023-11-16 18:15:46.6805900" and RFC 3339. Arrivals are then seconds after the
// earliest row.
var dateLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05", time.RFC3339Nano}

func (b *rowBuilder) parseArrival(line int, s string) (float64, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if b.epoch != nil {
			return 0, traceErr(line, colArrival, "%s is a number, but earlier rows hold date-times", clip(s))
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > 1e12 {
			return 0, traceErr(line, colArrival, "%s is not a time in seconds in [0, 1e12]", clip(s))
		}
		return v, nil
	}
	for _, layout := range dateLayouts {
		ts, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if b.epoch == nil {
			if len(b.t.Requests) > 0 {
				return 0, traceErr(line, colArrival, "%s is a date-time, but earlier rows hold seconds", clip(s))
			}
			b.epoch = &ts
		}
		return ts.Sub(*b.epoch).Seconds(), nil
	}
	return 0, traceErr(line, colArrival, "neither seconds nor a date-time: %s", clip(s))
}

// finish shifts date-time arrivals so that the earliest is 0 and returns the trace.
func (b *rowBuilder) finish() *Trace {
	if b.epoch != nil {
		lo := math.Inf(1)
		for _, r := range b.t.Requests {
			lo = min(lo, r.Arrival)
		}
		for i := range b.t.Requests {
			b.t.Requests[i].Arrival -= lo
		}
	}
	return b.t
}
