package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// BenchmarkKVEventsIngest is the router's side: decoding batches and applying them to a
// ClusterIndex of 8 servers. The batches hold W3's commits as a server publishes them:
// the 32 system prompts' chains and unique suffixes, 16-token blocks with vLLM hashes, in
// batches of 64 events, each store followed by the removal of its blocks (a W3 commit is
// one event of up to 160 blocks). One op is the whole stream of 512 events; it reports
// events/s, blocks/s and ns/block.
func BenchmarkKVEventsIngest(b *testing.B) {
	const servers = 8
	tr := NewW3Trace()
	h := vllmhash.NewSHA256CBOR("42")
	bt := newBatcher(b)
	var payloads [][]byte
	var events, blocksIn int
	n := 0
	seal := func() {
		payloads = append(payloads, bt.AppendBatch(nil, 1))
		n = 0
	}
	for i := range 256 {
		rq := &tr.Requests[i]
		p := &prefix.Prompt{Tokens: rq.Prompt}
		hs := vllmhash.PromptHashes(h, p, BlockSize)
		nb := len(hs)
		e := &prefix.BlockStored{HashSize: 32, BlockSize: BlockSize, Tokens: rq.Prompt[:nb*BlockSize], Blocks: make([]blocks.ID, nb)}
		for _, x := range hs {
			e.Hashes = append(e.Hashes, x...)
		}
		bt.BlockStored(e)
		r := &prefix.BlockRemoved{HashSize: 32, Hashes: e.Hashes, Blocks: e.Blocks}
		bt.BlockRemoved(r)
		events += 2
		blocksIn += 2 * nb
		if n += 2; n >= kvEventsPerStep {
			seal()
		}
	}
	seal()
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), BlockSize)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, servers)
	for i := range names {
		names[i] = fmt.Sprintf("server-%d", i)
	}
	var d kvevents.Decoder
	var batch kvevents.Batch
	b.ReportAllocs()
	done := 0
	cpu0 := cpuTime()
	for b.Loop() {
		for i, pl := range payloads {
			if err := d.Decode(pl, &batch); err != nil {
				b.Fatal(err)
			}
			if err := c.Apply(names[(done+i)%servers], &batch); err != nil {
				b.Fatal(err)
			}
		}
		done++
	}
	kvReportCPUPer(b, cpu0, float64(blocksIn), "cpu-ns/block")
	total := float64(b.N) * float64(events)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)*float64(blocksIn)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(blocksIn)), "ns/block")
	require.Zero(b, c.Stats(names[0]).RootMismatches)
}
