package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endless is a reader of head followed by n bytes of fill, generated as read (no buffer of
// the whole), counting what was read from it.
type endless struct {
	head []byte
	fill byte
	n    int64
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	if len(e.head) > 0 {
		k := copy(p, e.head)
		e.head = e.head[k:]
		e.read += int64(k)
		return k, nil
	}
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), e.n))
	for i := range p[:k] {
		p[i] = e.fill
	}
	e.n -= int64(k)
	e.read += int64(k)
	return k, nil
}

// A 256 MiB line (issue 13, item 17: it peaked at 1.6 GiB of heap) fails at the line
// limit, having read at most the limit plus the reader's read-ahead, and the message
// names the line and the limit, not the line's content.
func TestTraceLineCap(t *testing.T) {
	const huge = 256 << 20
	lim := Limits{MaxLineBytes: 64 << 10}
	for _, tt := range []struct {
		name   string
		format Format
		head   string
		fill   byte
		line   int
	}{
		{"csv", FormatCSV, "input_len,output_len\n1,2\n", '7', 3},
		{"csv quoted field spanning lines", FormatCSV, "input_len,output_len\n1,2\n3,\"", '\n', 3},
		{"jsonl", FormatJSONL, "{\"input_len\": 1, \"output_len\": 2}\n{\"input_len\": ", '7', 2},
		{"sharegpt", FormatShareGPT, `[{"conversations": [{"value": "a"}, {"value": "b"}]},` + "\n" + `{"conversations": [{"value": "`, 'x', 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &endless{head: []byte(tt.head), fill: tt.fill, n: huge}
			_, err := ParseTraceLimited(src, tt.format, lim)
			require.ErrorIs(t, err, ErrBadTrace)
			var te *TraceError
			require.True(t, errors.As(err, &te))
			assert.Equal(t, tt.line, te.Line, "%v", err)
			assert.Contains(t, err.Error(), "limit of 65536 bytes")
			assert.Less(t, len(err.Error()), 200, "%v", err)
			assert.LessOrEqual(t, src.read, int64(len(tt.head)+lim.MaxLineBytes+2*4096), "bytes read before failing")
		})
	}
}

// Every error quotes at most a bounded prefix of the field it is about, and a field
// beyond MaxFieldBytes is refused.
func TestTraceErrorsQuoteABoundedPrefix(t *testing.T) {
	long := strings.Repeat("9", 3000) + "x"
	group := strings.Repeat("g", 5000)
	for _, tt := range []struct {
		name   string
		format Format
		in     string
		want   string
	}{
		{"csv integer", FormatCSV, "input_len,output_len\n" + long + ",1\n", "not an integer"},
		{"csv arrival", FormatCSV, "arrival,input_len,output_len\n" + long + ",1,1\n", "neither seconds nor a date-time"},
		{"csv group over the field limit", FormatCSV, "input_len,output_len,prefix_group,prefix_len\n4,1," + group + ",2\n", "longer than the limit of 4096"},
		{"csv unknown column", FormatCSV, group + ",input_len,output_len\n", "unknown column"},
		{"jsonl value over the field limit", FormatJSONL, `{"input_len": "` + group + `", "output_len": 1}` + "\n", "longer than the limit of 4096"},
		{"jsonl integer", FormatJSONL, `{"input_len": "` + long + `", "output_len": 1}` + "\n", "not an integer"},
		{"jsonl unknown key", FormatJSONL, `{"` + group + `": 1}` + "\n", "unknown key"},
		{"jsonl array value", FormatJSONL, `{"input_len": [` + strings.Repeat("1,", 1000) + `1], "output_len": 1}` + "\n", "want a number or a string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tt.in), tt.format)
			require.ErrorIs(t, err, ErrBadTrace)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, len(err.Error()), 400, "%v", err)
		})
	}
}

// ShareGPT is read as a stream: an error early in a large file is found having read
// little more than the conversation it is in (the old reader read the whole file first).
func TestShareGPTIsReadAsAStream(t *testing.T) {
	head := `[` + strings.Repeat(`{"conversations": [{"value": "hello"}, {"value": "there"}]},`+"\n", 100) + `{"conversations": 7},` + "\n"
	src := &endless{head: []byte(head), fill: ' ', n: 64 << 20}
	_, err := ParseTrace(src, FormatShareGPT)
	require.ErrorIs(t, err, ErrBadTrace)
	assert.Contains(t, err.Error(), "trace line 101")
	assert.Less(t, src.read, int64(len(head)+1<<20), "bytes read before failing")

	// A valid stream far longer than the line limit parses, conversation by conversation.
	var b bytes.Buffer
	b.WriteString("[\n")
	for i := range 5000 {
		fmt.Fprintf(&b, `{"id": "%d", "conversations": [{"from": "human", "value": "%s"}, {"from": "gpt", "value": "ok", "tokens": %d}]},`+"\n", i, strings.Repeat("w", 400), 1+i%7)
	}
	b.WriteString(`{"conversations": []}]` + "\n\n")
	tr, err := ParseTraceLimited(&b, FormatShareGPT, Limits{MaxLineBytes: 1024})
	require.NoError(t, err)
	require.Len(t, tr.Requests, 5000)
	assert.Equal(t, 100, tr.Requests[0].Input)
	assert.Equal(t, map[string]int{SkipFewerThanTwoTurns: 1}, tr.Skipped)

	_, err = ParseTrace(strings.NewReader(`[{"conversations": []}]`+"\n \n x"), FormatShareGPT)
	require.ErrorIs(t, err, ErrBadTrace)
	assert.Contains(t, err.Error(), "trace line 3: unexpected data after the array")
}

func TestTraceRequestCapAndBadLimits(t *testing.T) {
	in := "input_len,output_len\n1,1\n2,2\n3,3\n"
	_, err := ParseTraceLimited(strings.NewReader(in), FormatCSV, Limits{MaxRequests: 2})
	require.ErrorIs(t, err, ErrBadTrace)
	assert.Contains(t, err.Error(), "trace line 4: more than 2 requests")
	tr, err := ParseTraceLimited(strings.NewReader(in), FormatCSV, Limits{MaxRequests: 3})
	require.NoError(t, err)
	assert.Len(t, tr.Requests, 3)
	_, err = ParseTraceLimited(strings.NewReader(in), FormatCSV, Limits{MaxFieldBytes: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
