package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTraceGood(t *testing.T) {
	tests := []struct {
		name    string
		format  Format
		in      string
		want    []Request
		groups  []string
		skipped map[string]int
	}{
		{
			name:   "csv, lengths only",
			format: FormatCSV,
			in:     "input_len,output_len\n10,20\n5,6\n",
			want:   []Request{{ID: 0, Input: 10, Output: 20, Group: -1}, {ID: 1, Input: 5, Output: 6, Group: -1}},
		},
		{
			name:   "csv, every column, sorted by arrival, blank prefix cells",
			format: FormatCSV,
			in:     "arrival, input_len, output_len, prefix_group, prefix_len\n0.5,10,5,sys,4\n0.1,3,2,,\n0.5,7,1,sys,7\n",
			want: []Request{
				{ID: 0, Arrival: 0.1, Input: 3, Output: 2, Group: -1},
				{ID: 1, Arrival: 0.5, Input: 10, Output: 5, Group: 0, Shared: 4},
				{ID: 2, Arrival: 0.5, Input: 7, Output: 1, Group: 0, Shared: 7},
			},
			groups: []string{"sys"},
		},
		{
			name:   "azure trace",
			format: FormatCSV,
			in:     "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
			want: []Request{
				{ID: 0, Arrival: 0, Input: 374, Output: 44, Group: -1},
				{ID: 1, Arrival: 4.314579, Input: 396, Output: 109, Group: -1},
			},
		},
		{
			name:   "jsonl, numbers and strings, blank lines",
			format: FormatJSONL,
			in:     "{\"arrival\": 1.5, \"input_len\": 12, \"output_len\": 3, \"prefix_group\": 7, \"prefix_len\": 8}\n\n{\"arrival\": 0, \"input_len\": 4.0, \"output_len\": \"2\"}\n",
			want: []Request{
				{ID: 0, Arrival: 0, Input: 4, Output: 2, Group: -1},
				{ID: 1, Arrival: 1.5, Input: 12, Output: 3, Group: 0, Shared: 8},
			},
			groups: []string{"7"},
		},
		{
			name:   "sharegpt, approximated and given lengths, one conversation skipped",
			format: FormatShareGPT,
			in: `[
  {"id": "a", "conversations": [{"from": "human", "value": "12345678"}, {"from": "gpt", "value": "123456789"}]},
  {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
  {"id": "c", "conversations": [{"from": "human", "value": "x", "tokens": 300}, {"from": "gpt", "value": "y", "tokens": 20}, {"from": "human", "value": "ignored"}]},
  {"id": "d", "conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "reply"}]}
]`,
			want:    []Request{{ID: 0, Input: 2, Output: 3, Group: -1}, {ID: 1, Input: 300, Output: 20, Group: -1}},
			skipped: map[string]int{SkipFewerThanTwoTurns: 1, SkipEmptyTurn: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ParseTrace(strings.NewReader(tt.in), tt.format)
			require.NoError(t, err)
			require.Len(t, tr.Requests, len(tt.want))
			for i, w := range tt.want {
				got := tr.Requests[i]
				assert.InDelta(t, w.Arrival, got.Arrival, 1e-9, "request %d arrival", i)
				got.Arrival = w.Arrival
				assert.Equal(t, w, got, "request %d", i)
			}
			assert.Equal(t, tt.groups, tr.Groups)
			assert.Equal(t, tt.skipped, tr.Skipped)
		})
	}
}

func TestParseTraceBad(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		in     string
		line   int
		field  string
		msg    string
	}{
		{"empty csv", FormatCSV, "", 0, "", "header row"},
		{"unknown column", FormatCSV, "input_length,output_len\n1,2\n", 1, "input_length", "unknown column"},
		{"missing output column", FormatCSV, "arrival,input_len\n0,1\n", 1, "output_len", "missing column"},
		{"duplicate column", FormatCSV, "input_len,prompt_len,output_len\n1,2,3\n", 1, "prompt_len", "twice"},
		{"zero output", FormatCSV, "input_len,output_len\n1,2\n3,0\n", 3, "output_len", "outside [1,"},
		{"fractional input", FormatCSV, "input_len,output_len\n12.5,2\n", 2, "input_len", "not an integer"},
		{"empty input cell", FormatCSV, "input_len,output_len\n,2\n", 2, "input_len", "missing"},
		{"short row", FormatCSV, "input_len,output_len\n1,2\n3\n", 3, "", "wrong number of fields"},
		{"group without length", FormatCSV, "input_len,output_len,prefix_group,prefix_len\n4,4,sys,\n", 2, "prefix_len", "missing"},
		{"length without group", FormatCSV, "input_len,output_len,prefix_group,prefix_len\n4,4,,3\n", 2, "prefix_group", "missing"},
		{"shared beyond the request", FormatCSV, "input_len,output_len,prefix_group,prefix_len\n4,4,sys,9\n", 2, "prefix_len", "outside [0"},
		{"negative arrival", FormatCSV, "arrival,input_len,output_len\n-1,4,4\n", 2, "arrival", "not a time"},
		{"arrival not a time", FormatCSV, "arrival,input_len,output_len\nsoon,4,4\n", 2, "arrival", "neither seconds nor a date-time"},
		{"seconds after dates", FormatCSV, "timestamp,input_len,output_len\n2023-11-16 18:15:46,4,4\n3,4,4\n", 3, "arrival", "date-times"},
		{"no rows", FormatCSV, "input_len,output_len\n", 0, "", "no requests"},
		{"jsonl not an object", FormatJSONL, "{\"input_len\":1,\"output_len\":1}\n[1,2]\n", 2, "", "not a JSON object"},
		{"jsonl unknown key", FormatJSONL, "{\"input_len\":1,\"output_len\":1,\"colour\":2}\n", 1, "colour", "unknown key"},
		{"jsonl arrival missing", FormatJSONL, "{\"arrival\":0,\"input_len\":1,\"output_len\":1}\n{\"input_len\":1,\"output_len\":1}\n", 2, "arrival", "earlier rows have arrival"},
		{"jsonl boolean", FormatJSONL, "{\"input_len\":true,\"output_len\":1}\n", 1, "input_len", "want a number"},
		{"jsonl null output", FormatJSONL, "{\"input_len\":3,\"output_len\":null}\n", 1, "output_len", "missing"},
		{"sharegpt not an array", FormatShareGPT, "{\"conversations\": []}", 1, "", "JSON array"},
		{"sharegpt value not a string", FormatShareGPT, "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n{\"conversations\": [{\"from\": \"human\", \"value\": 5}]}\n]", 3, "conversations.value", "conversation 1"},
		{"sharegpt no conversations key", FormatShareGPT, "[\n\n  {\"id\": \"x\"}\n]", 3, "conversations", "no \"conversations\""},
		{"sharegpt syntax error", FormatShareGPT, "[\n{\"conversations\": [}\n]", 2, "", "JSON syntax"},
		{"sharegpt truncated", FormatShareGPT, "[\n{\"conversations\": []},\n", 3, "", ""},
		{"sharegpt trailing data", FormatShareGPT, "[]\nmore", 2, "", "after the array"},
		{"sharegpt negative tokens", FormatShareGPT, "[{\"conversations\": [{\"value\": \"a\", \"tokens\": -3}, {\"value\": \"b\"}]}]", 1, "tokens", "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ParseTrace(strings.NewReader(tt.in), tt.format)
			require.Error(t, err)
			assert.Nil(t, tr)
			assert.ErrorIs(t, err, ErrBadTrace)
			var te *TraceError
			require.True(t, errors.As(err, &te), "%T %v", err, err)
			assert.Equal(t, tt.line, te.Line, "line: %v", err)
			assert.Equal(t, tt.field, te.Field, "field: %v", err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestFormats(t *testing.T) {
	for _, tt := range []struct {
		path string
		want Format
	}{{"a.csv", FormatCSV}, {"dir/b.JSONL", FormatJSONL}, {"c.ndjson", FormatJSONL}, {"ShareGPT_V3.json", FormatShareGPT}} {
		got, err := DetectFormat(tt.path)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, tt.path)
		back, err := ParseFormat(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, back)
	}
	_, err := DetectFormat("trace.txt")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	f, err := ParseFormat("azure")
	require.NoError(t, err)
	assert.Equal(t, FormatCSV, f)
	_, err = ParseFormat("parquet")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = ParseTrace(strings.NewReader("input_len,output_len\n1,1\n"), Format(9))
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestPrepareAppliesMaxModelLen(t *testing.T) {
	tr := &Trace{Requests: []Request{
		{Input: 10, Output: 5, Group: -1},            // fits exactly: 15
		{Input: 15, Output: 1, Group: -1},            // prompt leaves no room: rejected
		{Input: 14, Output: 9, Group: 0, Shared: 20}, // output capped to 1, shared cut to 15
		{Input: 3, Output: 2, Group: -1},
	}}
	p := Prepare(tr, 15)
	assert.Equal(t, 1, p.Rejected)
	assert.Equal(t, 1, p.Capped)
	assert.Equal(t, []Request{
		{ID: 0, Input: 10, Output: 5, Group: -1},
		{ID: 1, Input: 14, Output: 1, Group: 0, Shared: 15},
		{ID: 2, Input: 3, Output: 2, Group: -1},
	}, p.Requests)
	assert.Equal(t, 9, tr.Requests[2].Output, "the trace itself is not modified")
}
