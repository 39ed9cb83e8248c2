package sim

import (
	"bytes"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseTrace feeds arbitrary bytes to every parser. A parse either fails with a
// *TraceError (ErrBadTrace) or yields requests that the simulator accepts as they are;
// a CSV trace written back from them parses to the same requests.
func FuzzParseTrace(f *testing.F) {
	f.Add(uint8(0), []byte("arrival,input_len,output_len,prefix_group,prefix_len\n0.5,10,5,sys,4\n0.1,3,2,,\n"))
	f.Add(uint8(0), []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"))
	f.Add(uint8(0), []byte("input_len,output_len\n1,2\n3\n"))
	f.Add(uint8(1), []byte("{\"arrival\": 1.5, \"input_len\": 12, \"output_len\": 3, \"prefix_group\": 7, \"prefix_len\": 8}\n"))
	f.Add(uint8(1), []byte("{\"input_len\":1,\"output_len\":1}\n[1,2]\n"))
	f.Add(uint8(2), []byte(`[{"conversations": [{"from": "human", "value": "hello there"}, {"from": "gpt", "value": "hi", "tokens": 3}]}]`))
	f.Add(uint8(2), []byte("[\n{\"conversations\": [}\n]"))
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		tr, err := ParseTrace(bytes.NewReader(data), Format(1+int(format)%3))
		if err != nil {
			var te *TraceError
			require.True(t, errors.As(err, &te), "error %v is not a *TraceError", err)
			require.ErrorIs(t, err, ErrBadTrace)
			require.Less(t, len(err.Error()), 600, "an error quotes a bounded prefix of its field")
			return
		}
		for i, r := range tr.Requests {
			require.Equal(t, i, r.ID)
			require.GreaterOrEqual(t, r.Input, 1)
			require.GreaterOrEqual(t, r.Output, 1)
			require.GreaterOrEqual(t, r.Arrival, 0.0)
			if i > 0 {
				require.GreaterOrEqual(t, r.Arrival, tr.Requests[i-1].Arrival)
			}
			if r.Group < 0 {
				require.Zero(t, r.Shared)
			} else {
				require.Less(t, r.Group, len(tr.Groups))
				require.LessOrEqual(t, r.Shared, r.Input+r.Output)
			}
		}
		back, err := ParseTrace(bytes.NewReader(writeCSVTrace(t, tr)), FormatCSV)
		require.NoError(t, err)
		require.Equal(t, tr.Requests, back.Requests)
	})
}

// writeCSVTrace writes a trace in FormatCSV, group names and all.
func writeCSVTrace(t *testing.T, tr *Trace) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	require.NoError(t, w.Write([]string{"arrival", "input_len", "output_len", "prefix_group", "prefix_len"}))
	for _, r := range tr.Requests {
		group, shared := "", ""
		if r.Group >= 0 {
			group, shared = tr.Groups[r.Group], strconv.Itoa(r.Shared)
		}
		require.NoError(t, w.Write([]string{strconv.FormatFloat(r.Arrival, 'g', -1, 64), strconv.Itoa(r.Input), strconv.Itoa(r.Output), group, shared}))
	}
	w.Flush()
	require.NoError(t, w.Error())
	return buf.Bytes()
}

// FuzzParseTraceLimited runs the readers under small limits: a parse either fails with a
// *TraceError whose message is bounded, or every record lies within the limits.
func FuzzParseTraceLimited(f *testing.F) {
	f.Add(uint8(0), uint8(16), uint8(4), uint8(2), []byte("input_len,output_len,prefix_group\n1,2,abcdefgh\n3,4,\"x\ny\"\n"))
	f.Add(uint8(1), uint8(40), uint8(3), uint8(1), []byte("{\"input_len\": 1, \"output_len\": 2}\n{\"input_len\": 12345}\n"))
	f.Add(uint8(2), uint8(80), uint8(8), uint8(3), []byte(`[{"conversations": [{"value": "hello"}, {"value": "there"}]}, {"conversations": [{"value": "`+strings.Repeat("x", 100)+`"}]}]`))
	f.Fuzz(func(t *testing.T, format, line, field, requests uint8, data []byte) {
		lim := Limits{MaxLineBytes: 1 + int(line), MaxFieldBytes: 1 + int(field), MaxRequests: 1 + int(requests)}
		tr, err := ParseTraceLimited(bytes.NewReader(data), Format(1+int(format)%3), lim)
		if err != nil {
			require.ErrorIs(t, err, ErrBadTrace)
			require.Less(t, len(err.Error()), 600)
			return
		}
		require.LessOrEqual(t, len(tr.Requests), lim.MaxRequests)
		for _, g := range tr.Groups {
			require.LessOrEqual(t, len(g), lim.MaxFieldBytes)
		}
	})
}
