package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runKVPage(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = run(args, &out, &errw)
	return code, out.String(), errw.String()
}

func seq(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// The expected hashes were computed with Python's cbor2 and hashlib, as vLLM computes
// them: sha256(cbor2.dumps((parent, tuple(tokens), extra_keys), canonical=True)), the
// first parent being sha256(cbor2.dumps("42", canonical=True)).
func TestHashPrintsVLLMHashes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{
			name: "hex, partial block left out",
			args: append([]string{"hash", "--seed", "42", "--block-size", "16"}, seq(0, 40)...),
			want: "63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d\n" +
				"78a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320\n",
		},
		{
			name: "64-bit form, comma-separated tokens",
			args: []string{"hash", "--seed=42", "--block-size=16", "--int64", strings.Join(seq(0, 32), ",")},
			want: "2863503375995570957\n13957787785847563040\n",
		},
		{
			// No --seed: a vLLM server without PYTHONHASHSEED, rooted at
			// sha256(cbor2.dumps("vllm-none-hash", canonical=True)), vLLM's DEFAULT_NONE_HASH_SEED.
			name: "default seed",
			args: append([]string{"hash", "--block-size", "16"}, seq(0, 32)...),
			want: "dc918a88b139e5afe60b88eda27508d4aee16c10fdc354791efea06206ac0749\n" +
				"c300ec275d7bf08af8fc63e76cdc0086911bbc7091e03c5cf892553bef84ef0c\n",
		},
		{
			name: "default seed spelled out",
			args: append([]string{"hash", "--seed", "vllm-none-hash", "--block-size", "16", "--int64"}, seq(0, 16)...),
			want: "2233398808101521225\n",
		},
		{
			name: "LoRA and salt",
			args: []string{"hash", "--seed", "42", "--block-size", "4", "--lora", "my-lora", "--salt", "tenant-a", "0", "23", "24", "255"},
			// cbor2: extras ("my-lora", "tenant-a") on the first block.
			want: "11700f6f410a3eb972a028cb9546511c4c15813eb488e27cc56e06e9837deb05\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runKVPage(tc.args...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, tc.want, out)
		})
	}
}

func TestHashRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad token", []string{"hash", "--seed", "1", "--block-size", "2", "1", "x2"}, 2, `bad token "x2"`},
		{"negative token", []string{"hash", "--seed", "1", "--block-size", "2", "-5"}, 2, "unknown flag -5"},
		{"negative token after --", []string{"hash", "--seed", "1", "--block-size", "2", "--", "-5"}, 2, `bad token "-5"`},
		{"token too large", []string{"hash", "--seed", "1", "--block-size", "2", "1,4294967296"}, 2, `bad token "4294967296"`},
		{"no block size", []string{"hash", "--seed", "1", "1", "2"}, 2, "--block-size must be"},
		{"unknown flag", []string{"hash", "--sede", "1"}, 2, "unknown flag --sede"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runKVPage(tc.args...)
			require.Equal(t, tc.code, code)
			require.Empty(t, out)
			require.Contains(t, errOut, tc.msg)
		})
	}
	code, out, errOut := runKVPage("hash", "--seed", "", "--block-size", "16", "1", "2")
	require.Equal(t, 0, code, "an empty seed is a seed")
	require.Empty(t, out)
	require.Contains(t, errOut, "no full block")
}

// An empty --seed is PYTHONHASHSEED="" (os.getenv gives "", not None), not an unset one.
// Both digests from cbor2 and hashlib, block (0, 1, 2, 3) under each root.
func TestHashEmptySeedIsNotTheDefault(t *testing.T) {
	_, empty, _ := runKVPage(append([]string{"hash", "--seed", "", "--block-size", "4"}, seq(0, 4)...)...)
	_, unset, _ := runKVPage(append([]string{"hash", "--block-size", "4"}, seq(0, 4)...)...)
	require.Equal(t, "524c59ca44d4a70c4d21b7569f2c2040b25f6dfde24caedc0835fbb7c92c20be\n", empty)
	require.Equal(t, "c49ab11fb576db6f376aef58c24f728a0ba1807e8cac5f940f1a5c4c20741898\n", unset)
}
