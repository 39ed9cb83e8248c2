package redisindex_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// hkeysCalls returns how many HKEYS Redis has run since the last CONFIG RESETSTAT.
func hkeysCalls(t testing.TB, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_hkeys:calls="); ok {
			n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// A prompt's lookup hashes and asks for its request keys a stage at a time (256 blocks,
// then 1,024, 4,096, ...), the next stage only when the last one was held throughout: a
// 4,096-block prompt whose hit ends early costs one stage of hashing and HKEYS past the
// hit, where it cost all 4,096 (the layout cannot say where the chain breaks without a
// round trip; see lookupStaged). The hits are a single lookup's over every key. Its own
// server: INFO commandstats counts every client's commands.
func TestPromptLookupsStopAfterTheStageWhereTheChainBreaks(t *testing.T) {
	srv := startOwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	const blocks = 4096
	for _, tc := range []struct {
		held, hkeys int
	}{
		{0, 256}, {10, 256}, {255, 256}, {256, 256 + 1024}, {300, 256 + 1024}, {1500, blocks}, {blocks, blocks},
	} {
		for _, form := range []string{"MatchTokens", "MatchPrompt"} {
			t.Run(fmt.Sprintf("%s/held=%d", form, tc.held), func(t *testing.T) {
				require.NoError(t, rdb.FlushAll(ctx).Err())
				x := newIndex(t, rdb)
				p := &prefix.Prompt{Tokens: tokens(1, 16*blocks)}
				if form == "MatchPrompt" {
					p.Namespace = prefix.Namespace{LoRA: "sql-lora", Salt: "tenant-a"}
					p.MM = []prefix.MMInput{{Hash: "img", Offset: 20, Length: 40}}
				}
				keys := x.PromptKeys(nil, p)
				require.Len(t, keys, blocks)
				gpu := []redisindex.Entry{{Server: "pod-a", Tier: redisindex.DefaultTier}}
				if tc.held > 0 {
					require.NoError(t, x.Add(ctx, nil, keys[:tc.held], gpu))
				}
				// pod-b holds the blocks after the break, which no lookup can reach.
				if tc.held+1 < blocks {
					require.NoError(t, x.Add(ctx, nil, keys[tc.held+1:], []redisindex.Entry{{Server: "pod-b", Tier: redisindex.DefaultTier}}))
				}
				require.NoError(t, rdb.ConfigResetStat(ctx).Err())
				var hits []redisindex.Hit
				var err error
				if form == "MatchTokens" {
					hits, err = x.MatchTokens(ctx, nil, "", p.Tokens)
				} else {
					hits, err = x.MatchPrompt(ctx, nil, p)
				}
				require.NoError(t, err)
				require.Equal(t, tc.hkeys, hkeysCalls(t, rdb), "request keys looked up")
				var want []redisindex.Hit
				if tc.held > 0 {
					want = []redisindex.Hit{{Server: "pod-a", Blocks: tc.held, GPUBlocks: tc.held}}
				}
				require.Equal(t, want, hits)
				per, err := x.Lookup(ctx, keys, nil)
				require.NoError(t, err)
				require.Len(t, per, tc.held, "a single lookup over every key")
			})
		}
	}
}
