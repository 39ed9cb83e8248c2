package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The cluster-index benchmarks of issue 17: events ingested per second by the in-memory
// index, the Redis backend and over NATS JetStream; lookup latency of a 4,096-token
// prompt over 64 servers; Redis memory per cached block. The Redis and NATS ones need the
// servers .ci/run starts (KVPAGE_REDIS_ADDR, KVPAGE_NATS_URL) and are skipped without.

// fleetStream is W3's first 256 prompts as one server publishes them: each store of a
// prompt's full blocks (vLLM hashes, 16-token blocks) followed by the removal of the
// same blocks, in batches of kvEventsPerStep events. It returns the payloads, the events
// and the blocks they carry.
func fleetStream(tb testing.TB) (payloads [][]byte, events, blocksIn int) {
	tb.Helper()
	tr := NewW3Trace()
	h := vllmhash.NewSHA256CBOR("42")
	bt := newBatcher(tb)
	n := 0
	for i := range 256 {
		rq := &tr.Requests[i]
		hs := vllmhash.PromptHashes(h, &prefix.Prompt{Tokens: rq.Prompt}, BlockSize)
		e := &prefix.BlockStored{HashSize: 32, BlockSize: BlockSize, Tokens: rq.Prompt[:len(hs)*BlockSize], Blocks: make([]blocks.ID, len(hs))}
		for _, x := range hs {
			e.Hashes = append(e.Hashes, x...)
		}
		bt.BlockStored(e)
		bt.BlockRemoved(&prefix.BlockRemoved{HashSize: 32, Hashes: e.Hashes, Blocks: e.Blocks})
		events += 2
		blocksIn += 2 * len(hs)
		if n += 2; n >= kvEventsPerStep {
			payloads = append(payloads, bt.AppendBatch(nil, 1))
			n = 0
		}
	}
	return append(payloads, bt.AppendBatch(nil, 1)), events, blocksIn
}

func redisFor(b *testing.B, db int) *redis.Client {
	addr := os.Getenv("KVPAGE_REDIS_ADDR")
	if addr == "" {
		b.Skip("Redis not available: set KVPAGE_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db, PoolSize: 4})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return rdb
}

// BenchmarkClusterIngest: one op applies the whole stream (512 events) for one server.
func BenchmarkClusterIngest(b *testing.B) {
	payloads, events, blocksIn := fleetStream(b)
	report := func(b *testing.B) {
		s := b.Elapsed().Seconds()
		b.ReportMetric(float64(events*b.N)/s, "events/s")
		b.ReportMetric(float64(blocksIn*b.N)/s, "blocks/s")
	}
	decodeApply := func(b *testing.B, idx kvevents.Applier) {
		var d kvevents.Decoder
		var bt kvevents.Batch
		for b.Loop() {
			for _, p := range payloads {
				if err := d.Decode(p, &bt); err != nil {
					b.Fatal(err)
				}
				if err := idx.Apply("server-0", &bt); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b)
	}
	b.Run("memory", func(b *testing.B) {
		c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), BlockSize)
		if err != nil {
			b.Fatal(err)
		}
		decodeApply(b, c)
	})
	b.Run("redis", func(b *testing.B) {
		x, err := redisindex.New(context.Background(), redisFor(b, 14), redisindex.Config{BlockSize: BlockSize, Seed: "42", Model: "m"})
		if err != nil {
			b.Fatal(err)
		}
		decodeApply(b, x)
	})
	b.Run("nats", func(b *testing.B) {
		url := os.Getenv("KVPAGE_NATS_URL")
		if url == "" {
			b.Skip("NATS not available: set KVPAGE_NATS_URL")
		}
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
		sc := natsjs.StreamConfig{Name: "BENCH_INGEST", Subject: "bench.ingest", MaxBytes: 1 << 30}
		_ = js.DeleteStream(context.Background(), sc.Name)
		if _, err := natsjs.EnsureStream(context.Background(), js, sc); err != nil {
			b.Fatal(err)
		}
		c, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), BlockSize)
		sub, err := natsjs.NewSubscriber(context.Background(), js, c, natsjs.SubscriberConfig{Replica: "bench", Stream: sc, FromStart: true, MaxAckPending: 1024})
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		var seq uint64
		for b.Loop() {
			for _, p := range payloads {
				m := nats.NewMsg(sc.Subject + ".server-0")
				m.Data = p
				m.Header.Set(natsjs.HeaderSeq, strconv.FormatUint(seq, 10))
				m.Header.Set(natsjs.HeaderEpoch, "1")
				seq++
				if _, err := js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := sub.WaitFor(ctx, "server-0", 1, seq-1); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
		report(b)
	})
}

// lookupFleet builds a 64-server fleet over a 4,096-token prompt of 256 blocks: server i
// holds its first 4(i+1) blocks, so every lookup walks all 256 blocks and finds 64 hits.
func lookupFleet(b *testing.B, apply func(server string, bt *kvevents.Batch) error) *prefix.Prompt {
	toks := make([]int32, 4096)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	p := &prefix.Prompt{Tokens: toks}
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, BlockSize)
	for s := range 64 {
		n := 4 * (s + 1)
		e := &prefix.BlockStored{HashSize: 32, BlockSize: BlockSize, Tokens: toks[:n*BlockSize], Blocks: make([]blocks.ID, n)}
		for _, x := range hs[:n] {
			e.Hashes = append(e.Hashes, x...)
		}
		bt := newBatcher(b)
		bt.BlockStored(e)
		batch, err := kvevents.DecodeBatch(bt.AppendBatch(nil, 1))
		if err != nil {
			b.Fatal(err)
		}
		if err := apply(fmt.Sprintf("server-%02d", s), batch); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// BenchmarkClusterLookup4096 times each Match of the 4,096-token prompt over 64 servers
// and reports the median and the 99th percentile.
func BenchmarkClusterLookup4096(b *testing.B) {
	run := func(b *testing.B, idx cluster.Index, p *prefix.Prompt) {
		var lat []time.Duration
		var hits []cluster.ServerHit
		for b.Loop() {
			t0 := time.Now()
			var err error
			hits, err = idx.Match(hits[:0], p)
			lat = append(lat, time.Since(t0))
			if err != nil || len(hits) != 64 || hits[0].Blocks != 256 {
				b.Fatalf("%v: %d hits", err, len(hits))
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
	b.Run("memory", func(b *testing.B) {
		c, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), BlockSize)
		run(b, c, lookupFleet(b, c.Apply))
	})
	b.Run("redis", func(b *testing.B) {
		x, err := redisindex.New(context.Background(), redisFor(b, 14), redisindex.Config{BlockSize: BlockSize, Seed: "42", Model: "m"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, x, lookupFleet(b, x.Apply))
	})
}

// BenchmarkRedisBytesPerBlock fills Redis with 64 servers' blocks in llm-d's layout and
// reports used_memory's growth per cached block: blocks held by one server each
// (distinct prompts), and one prompt held by all 64 (each block one hash of 64 fields).
func BenchmarkRedisBytesPerBlock(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "distinct"
		if shared {
			name = "shared-by-64"
		}
		b.Run(name, func(b *testing.B) {
			rdb := redisFor(b, 13)
			ctx := context.Background()
			var perBlock, perEntry float64
			for b.Loop() {
				if err := rdb.FlushDB(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				before := usedMemory(b, rdb)
				x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: BlockSize, Seed: "42", Model: "m"})
				if err != nil {
					b.Fatal(err)
				}
				blocksIn, entries := 0, 0
				for s := range 64 {
					toks := make([]int32, 4096)
					for i := range toks {
						toks[i] = int32(i)
						if !shared {
							toks[i] += int32(s << 16)
						}
					}
					p := &prefix.Prompt{Tokens: toks}
					hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, BlockSize)
					e := &prefix.BlockStored{HashSize: 32, BlockSize: BlockSize, Tokens: toks, Blocks: make([]blocks.ID, len(hs))}
					for _, h := range hs {
						e.Hashes = append(e.Hashes, h...)
					}
					bt := newBatcher(b)
					bt.BlockStored(e)
					batch, _ := kvevents.DecodeBatch(bt.AppendBatch(nil, 1))
					if err := x.Apply(fmt.Sprintf("server-%02d", s), batch); err != nil {
						b.Fatal(err)
					}
					entries += len(hs)
					if !shared || s == 0 {
						blocksIn += len(hs)
					}
				}
				grown := float64(usedMemory(b, rdb) - before)
				perBlock, perEntry = grown/float64(blocksIn), grown/float64(entries)
			}
			b.ReportMetric(perBlock, "bytes/block")
			b.ReportMetric(perEntry, "bytes/entry")
		})
	}
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory")
	return 0
}
