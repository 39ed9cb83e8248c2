package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Skip reasons reported in Trace.Skipped for ShareGPT conversations.
const (
	SkipFewerThanTwoTurns = "conversation with fewer than two turns"
	SkipEmptyTurn         = "conversation whose prompt or reply is empty"
)

// shareGPTConversation is one element of a ShareGPT dump. Other keys ("id", ...) are
// ignored: the dumps carry many.
type shareGPTConversation struct {
	Conversations *[]shareGPTTurn `json:"conversations"`
}

type shareGPTTurn struct {
	From   string `json:"from"`
	Value  string `json:"value"`
	Tokens *int   `json:"tokens"`
}

// tokens is the turn's length: its "tokens" field when given, else ceil(runes / 4), the
// usual rule of thumb for English text with a BPE tokenizer such as Llama 3's.
func (t *shareGPTTurn) tokens() int {
	if t.Tokens != nil {
		return *t.Tokens
	}
	return (utf8.RuneCountInString(t.Value) + 3) / 4
}

// parseShareGPT reads a ShareGPT-style JSON array (FormatShareGPT). As vLLM's serving
// benchmark does, each conversation gives one request: its first turn is the prompt, its
// second the reply. A conversation with fewer than two turns, or an empty prompt or reply,
// cannot make a request: it is counted in Trace.Skipped under its reason. Anything that is
// not such an array is an error naming the line.
func parseShareGPT(r io.Reader) (*Trace, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, traceErr(0, "", "reading: %v", err)
	}
	lines := lineCounter{data: data}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(&lines, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, traceErr(lines.at(0), "", "a ShareGPT file is a JSON array of conversations")
	}
	t := &Trace{Skipped: map[string]int{}}
	for i := 0; dec.More(); i++ {
		start := lines.at(skipSpace(data, int(dec.InputOffset())))
		var c shareGPTConversation
		if err := dec.Decode(&c); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, traceErr(start, te.Field, "conversation %d: want %v, got JSON %s", i, te.Type, te.Value)
			}
			return nil, jsonErr(&lines, dec, err)
		}
		if c.Conversations == nil {
			return nil, traceErr(start, "conversations", "conversation %d has no \"conversations\" list", i)
		}
		turns := *c.Conversations
		if len(turns) < 2 {
			t.Skipped[SkipFewerThanTwoTurns]++
			continue
		}
		in, out := turns[0].tokens(), turns[1].tokens()
		if in < 0 || out < 0 || in > maxTraceTokens || out > maxTraceTokens {
			return nil, traceErr(start, "tokens", "conversation %d: token counts %d and %d outside [0, %d]", i, in, out, maxTraceTokens)
		}
		if in == 0 || out == 0 {
			t.Skipped[SkipEmptyTurn]++
			continue
		}
		t.Requests = append(t.Requests, Request{ID: len(t.Requests), Input: in, Output: out, Group: -1})
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(&lines, dec, err)
	}
	if rest := skipSpace(data, int(dec.InputOffset())); rest < len(data) {
		return nil, traceErr(lines.at(rest), "", "unexpected data after the array")
	}
	if len(t.Skipped) == 0 {
		t.Skipped = nil
	}
	return t, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n', ',':
			i++
		default:
			return i
		}
	}
	return i
}

func jsonErr(lines *lineCounter, dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return traceErr(lines.at(int(se.Offset)), "", "JSON syntax: %v", err)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return traceErr(lines.at(len(lines.data)), "", "unexpected end of file")
	}
	return traceErr(lines.at(int(dec.InputOffset())), "", "%v", fmt.Sprint(err))
}

// lineCounter maps byte offsets to 1-based line numbers, counting newlines incrementally
// (offsets mostly grow, so a whole file costs one pass).
type lineCounter struct {
	data []byte
	off  int
	line int
}

func (c *lineCounter) at(off int) int {
	off = min(max(off, 0), len(c.data))
	if off < c.off {
		c.off, c.line = 0, 0
	}
	c.line += bytes.Count(c.data[c.off:off], []byte{'\n'})
	c.off = off
	return c.line + 1
}
