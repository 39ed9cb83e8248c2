package redisindex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// loadDump writes a dump's lines back into Redis.
func loadDump(t testing.TB, rdb *redis.Client, d string) {
	t.Helper()
	ctx := context.Background()
	for line := range strings.Lines(d) {
		f := strings.SplitN(strings.TrimSpace(line), " ", 4)
		switch f[0] {
		case "hash":
			v, err := strconv.Unquote(f[3])
			require.NoError(t, err)
			require.NoError(t, rdb.HSet(ctx, f[1], f[2], v).Err())
		case "zset":
			s, err := strconv.ParseFloat(f[2], 64)
			require.NoError(t, err)
			require.NoError(t, rdb.ZAdd(ctx, f[1], redis.Z{Score: s, Member: f[3]}).Err())
		}
	}
}

func tokens(from, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(from + i)
	}
	return t
}

// TestReadsLLMDKeys loads the keys llm-d wrote and routes with them: kvpage's request
// keys must be llm-d's for lookups to find anything.
func TestReadsLLMDKeys(t *testing.T) {
	rdb := client(t)
	loadDump(t, rdb, readTestdata(t, "llmd/keys.txt"))
	x := newIndex(t, rdb)
	ctx := context.Background()

	hits, err := x.MatchTokens(ctx, nil, "", tokens(1, 48+10))
	require.NoError(t, err)
	require.Equal(t, []redisindex.Hit{
		{Server: "pod-b", Blocks: 3, GPUBlocks: 3},
		// pod-a evicted its GPU copy of block 2 (and 3) but keeps CPU copies of 1 and 2.
		{Server: "pod-a", Blocks: 2, GPUBlocks: 1},
	}, hits)

	// pod-c's block is keyed under its adapter's name. vLLM puts the adapter's name in
	// the block's extra keys too, and llm-d reads every string extra key as a multimodal
	// identifier, so the key chains it as one: kvpage writes it the same way.
	kh, err := redisindex.NewKeyHasher(16, fixtureSeed)
	require.NoError(t, err)
	lora := kh.Block(kh.Root("sql-lora"), tokens(1, 16), []string{"sql-lora"})
	per, err := x.Lookup(ctx, []uint64{lora}, nil)
	require.NoError(t, err)
	require.Equal(t, [][]redisindex.Entry{{{Server: "pod-c", Tier: "gpu"}}}, per)

	hits, err = x.MatchTokens(ctx, nil, "", tokens(900, 16))
	require.NoError(t, err)
	require.Empty(t, hits, "pod-d cleared its cache")

	// pod-b's multimodal block: its key chains the image's identifier.
	keys := kh.Keys(nil, 0, fixtureModel, tokens(1, 48))
	keys = append(keys, kh.Block(keys[2], tokens(500, 16), []string{"img-7f3a"}))
	per, err = x.Lookup(ctx, keys, []string{"pod-b"})
	require.NoError(t, err)
	require.Len(t, per, 4)
	require.Equal(t, "pod-b@gpu", per[3][0].String())
	textOnly := kh.Block(keys[2], tokens(500, 16), nil)
	per, err = x.Lookup(ctx, []uint64{textOnly}, nil)
	require.NoError(t, err)
	require.Empty(t, per, "the same tokens without the image are another block")

	// Evicting through kvpage prunes keys llm-d wrote.
	require.NoError(t, x.Clear(ctx, "pod-b"))
	hits, err = x.MatchTokens(ctx, nil, "", tokens(1, 48))
	require.NoError(t, err)
	require.Equal(t, []redisindex.Hit{{Server: "pod-a", Blocks: 2, GPUBlocks: 1}}, hits)
}
