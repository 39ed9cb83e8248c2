package sim

import (
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

// shareGPTReadAhead is the slack the bounded reader gives the JSON decoder beyond one
// conversation (the separator and white space before it).
const shareGPTReadAhead = 4096

// parseShareGPT reads a ShareGPT-style JSON array (FormatShareGPT) as a stream, one
// conversation at a time: memory is bounded by lim.MaxLineBytes (the longest conversation
// it accepts) and the requests kept, whatever the file's size. As vLLM's serving
// benchmark does, each conversation gives one request: its first turn is the prompt, its
// second the reply. A conversation with fewer than two turns, or an empty prompt or reply,
// cannot make a request: it is counted in Trace.Skipped under its reason. Anything that is
// not such an array is an error naming the line.
func parseShareGPT(r io.Reader, lim Limits) (*Trace, error) {
	br := newBoundedReader(r, lim.MaxLineBytes, shareGPTReadAhead)
	dec := json.NewDecoder(br)
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(br, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, traceErr(br.lineAt(br.skipSpace(0)), "", "a ShareGPT file is a JSON array of conversations")
	}
	br.advance(dec.InputOffset())
	t := &Trace{Skipped: map[string]int{}}
	for i := 0; dec.More(); i++ {
		elem := dec.InputOffset()
		var c shareGPTConversation
		err := dec.Decode(&c)
		start := br.lineAt(br.skipSpace(elem))
		if err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, traceErr(start, te.Field, "conversation %d: want %v, got JSON %s", i, te.Type, te.Value)
			}
			var long *errTooLong
			if errors.As(err, &long) {
				return nil, traceErr(start, "", "conversation %d %v", i, long)
			}
			return nil, jsonErr(br, dec, err)
		}
		br.advance(dec.InputOffset())
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
		if len(t.Requests) >= lim.MaxRequests {
			return nil, traceErr(start, "", "more than %d requests (Limits.MaxRequests)", lim.MaxRequests)
		}
		t.Requests = append(t.Requests, Request{ID: len(t.Requests), Input: in, Output: out, Group: -1})
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(br, dec, err)
	}
	br.advance(dec.InputOffset())
	if err := onlySpaceLeft(br, dec); err != nil {
		return nil, err
	}
	if len(t.Skipped) == 0 {
		t.Skipped = nil
	}
	return t, nil
}

// onlySpaceLeft reads what follows the array, in bounded chunks, and fails at the first
// byte that is not white space.
func onlySpaceLeft(br *boundedReader, dec *json.Decoder) error {
	rest := io.MultiReader(dec.Buffered(), br)
	off := dec.InputOffset()
	buf := make([]byte, 4096)
	for {
		n, err := rest.Read(buf)
		for i, c := range buf[:n] {
			switch c {
			case ' ', '\t', '\r', '\n':
			default:
				return traceErr(br.lineAt(off+int64(i)), "", "unexpected data after the array")
			}
		}
		off += int64(n)
		if off > br.mark+int64(len(br.pending())) || off == br.delivered {
			br.advance(off)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return traceErr(br.lineAt(off), "", "reading: %v", err)
		}
	}
}

func jsonErr(br *boundedReader, dec *json.Decoder, err error) error {
	var long *errTooLong
	if errors.As(err, &long) {
		return traceErr(br.lineAt(br.skipSpace(br.mark)), "", "JSON value %v", long)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return traceErr(br.lineAt(se.Offset), "", "JSON syntax: %v", err)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return traceErr(br.lineAt(br.delivered), "", "unexpected end of file")
	}
	return traceErr(br.lineAt(dec.InputOffset()), "", "%v", fmt.Sprint(err))
}
