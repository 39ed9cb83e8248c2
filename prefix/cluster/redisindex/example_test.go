package redisindex_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// The request keys of a prompt, as llm-d's indexer names the blocks in Redis.
func ExampleKeyHasher() {
	kh, _ := redisindex.NewKeyHasher(4, "42")
	keys := kh.Keys(nil, 0, "meta-llama/Llama-3.1-8B", []int32{1, 2, 3, 4, 5, 6, 7, 8, 9})
	for _, k := range keys {
		fmt.Println(redisindex.RequestKeyString(k))
	}
	fmt.Println(redisindex.Entry{Server: "pod-a", Tier: "gpu"}.Field())
	// Output:
	// 6103659745230961796
	// 9570618632608582147
	// {"PodIdentifier":"pod-a","DeviceTier":"gpu","Speculative":false,"HasGroup":false,"GroupIdx":0}
}

// A router replica routes with the index that every replica shares.
func ExampleIndex_Match() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: "42", Model: "meta-llama/Llama-3.1-8B"})
	if err != nil {
		fmt.Println(err)
		return
	}
	hits, err := x.MatchTokens(ctx, nil, "", make([]int32, 4096))
	if err == nil && len(hits) > 0 {
		fmt.Println("route to", hits[0].Server)
	}
}
