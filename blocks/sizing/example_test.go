package sizing_test

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// Sizing Llama 3.1 70B on two H100s: the KV cache per token, and whether vLLM would start
// with the model's full 128K context (it would not) and what fits instead.
func ExampleNewPlan() {
	model, _ := sizing.ModelPreset("llama-3.1-70b")
	gpu, _ := sizing.GPUPreset("h100-80gb")

	perToken, _ := model.KVBitsPerToken(sizing.FP16)
	fmt.Println("KV cache per token:", perToken)

	plan, err := sizing.NewPlan(sizing.PlanConfig{
		Model:           model,
		GPU:             gpu,
		TensorParallel:  2,
		CacheDType:      sizing.FP8E4M3,
		RuntimeOverhead: sizing.DefaultRuntimeOverhead,
	})
	if err != nil {
		panic(err) // bad input only
	}
	fmt.Println("blocks per GPU:", plan.NumBlocks, "of", plan.BytesPerBlock, "bytes")
	fmt.Println("fits at", plan.Config.MaxModelLen, "tokens:", plan.Fits())
	fmt.Println("longest context that fits:", plan.MaxContext)
	fmt.Println(errors.Is(plan.Err(), sizing.ErrDoesNotFit))
	// Output:
	// KV cache per token: 327680 B
	// blocks per GPU: 3255 of 1310720 bytes
	// fits at 131072 tokens: false
	// longest context that fits: 52080
	// true
}

// ParseSize reads token counts as vLLM's --max-model-len does.
func ExampleParseSize() {
	for _, s := range []string{"32k", "32K", "25.6k", "32q"} {
		n, err := sizing.ParseSize(s)
		fmt.Println(n, err)
	}
	// Output:
	// 32000 <nil>
	// 32768 <nil>
	// 25600 <nil>
	// 0 sizing: bad size "32q": not an integer, nor a number with one of the suffixes k, m, g, t (x1000) or K, M, G, T (x1024)
}
