package vllmhash_test

import (
	"encoding/hex"
	"fmt"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The hash vLLM computes for the first block of tokens 0..15 with PYTHONHASHSEED=42, and
// its 64-bit form.
func ExampleSHA256CBOR() {
	h := vllmhash.NewSHA256CBOR("42")
	tokens := make([]int32, 16)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	dst := make([]byte, h.Size())
	h.Block(dst, nil, tokens, prefix.Extra{})
	fmt.Println(hex.EncodeToString(dst))
	fmt.Println(vllmhash.Uint64(dst))
	// Output:
	// 63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d
	// 2863503375995570957
}

// The chained hashes of a salted prompt's full blocks, as a vLLM server computes them.
func ExamplePromptHashes() {
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, Namespace: prefix.Namespace{Salt: "tenant-a"}}
	for _, h := range vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 4) {
		fmt.Println(hex.EncodeToString(h)[:16])
	}
	// Output:
	// f0e6a24abfba1d35
	// 78ebdea9800ef935
}

// A vLLM server started without PYTHONHASHSEED hashes from the fixed default seed, so a
// router computes the same hashes without being told a seed.
func ExampleNewSHA256CBORDefault() {
	h := vllmhash.NewSHA256CBORDefault()
	tokens := make([]int32, 16)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	dst := make([]byte, h.Size())
	h.Block(dst, nil, tokens, prefix.Extra{})
	fmt.Println(hex.EncodeToString(dst))
	// Output:
	// dc918a88b139e5afe60b88eda27508d4aee16c10fdc354791efea06206ac0749
}
