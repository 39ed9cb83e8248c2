package redisindex_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// BenchmarkMatchTokens looks up a prompt of 1,024 or 16,384 blocks of which one server
// holds the first 0, 16 or all, against the shared Redis (KVPAGE_REDIS_ADDR), and reports
// the HKEYS Redis ran per lookup (the request keys hashed; INFO commandstats counts every
// client's, so give it a Redis of its own).
//
//	KVPAGE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench MatchTokens -count 6 ./prefix/cluster/redisindex/
func BenchmarkMatchTokens(b *testing.B) {
	rdb := client(b)
	ctx := context.Background()
	x := newIndex(b, rdb)
	for _, blocks := range []int{1024, 16384} {
		toks := tokens(1, 16*blocks)
		keys := x.PromptKeys(nil, &prefix.Prompt{Tokens: toks})
		for _, held := range []int{0, 16, blocks} {
			b.Run(fmt.Sprintf("blocks=%d/held=%d", blocks, held), func(b *testing.B) {
				require.NoError(b, rdb.FlushDB(ctx).Err())
				if held > 0 {
					require.NoError(b, x.Add(ctx, nil, keys[:held], []redisindex.Entry{{Server: "pod-a", Tier: redisindex.DefaultTier}}))
				}
				require.NoError(b, rdb.ConfigResetStat(ctx).Err())
				for b.Loop() {
					hits, err := x.MatchTokens(ctx, nil, "", toks)
					require.NoError(b, err)
					if held > 0 && (len(hits) != 1 || hits[0].Blocks != held) {
						b.Fatalf("hits %v, want %d blocks", hits, held)
					}
				}
				b.ReportMetric(float64(hkeysCalls(b, rdb))/float64(b.N), "hkeys/op")
			})
		}
	}
}
