package redisindex_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The fixture: testdata/llmd/batches.txt holds vLLM event batches (pod, model, msgpack
// in hex); testdata/llmd/keys.txt is the keyspace llm-d's own event pool and RedisIndex
// (llm-d-kv-cache at 7be76e1, blockSizeTokens 16, hashSeed "42") wrote from them into an
// empty Redis, dumped as dump() lists it. To regenerate keys.txt, build the program in
// testdata/llmd/README.md against that commit and run it on batches.txt.

var update = flag.Bool("update", false, "rewrite testdata/llmd/batches.txt from fixtureBatches")

const (
	fixtureModel = "meta-llama/Llama-3.1-8B"
	fixtureSeed  = "42"
)

type fixtureBatch struct {
	pod     string
	payload []byte
}

func toks(from, n int) []any {
	t := make([]any, n)
	for i := range t {
		t[i] = from + i
	}
	return t
}

// ih is a 64-bit block hash as vLLM sends them with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES:
// large, so msgpack writes all 8 bytes (llm-d's adapter reads only 64-bit integers).
func ih(n uint64) uint64 { return 0x9e3779b97f4a7c15 * n }

// bhash is a 32-byte block hash as vLLM's sha256 schemes send it.
func bhash(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func batch(events ...[]any) []byte {
	evs := make([]any, len(events))
	for i, e := range events {
		evs[i] = e
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode([]any{1.5, evs, 0}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// stored is vLLM's BlockStored: [tag, hashes, parent, tokens, block_size, lora_id,
// medium, lora_name, extra_keys].
func stored(hashes []any, parent any, tokens []any, medium, lora any, extra any) []any {
	return []any{"BlockStored", hashes, parent, tokens, 16, nil, medium, lora, extra}
}

func removed(hashes []any, medium any) []any { return []any{"BlockRemoved", hashes, medium} }

// fixtureBatches covers every path of the layout: chains from the root and from a
// parent, two servers holding the same blocks, integer and byte hashes, a medium, a
// LoRA adapter, a multimodal block, a tier move (no tokens), an eviction that prunes and
// one that does not, an orphan, and a cache reset.
func fixtureBatches() []fixtureBatch {
	return []fixtureBatch{
		{"pod-a", batch(
			stored([]any{ih(1001), ih(1002)}, nil, toks(1, 32), "GPU", nil, nil),
			stored([]any{ih(1003)}, ih(1002), toks(33, 16), "GPU", nil, nil),
		)},
		{"pod-b", batch(
			stored([]any{bhash("b1"), bhash("b2"), bhash("b3")}, nil, toks(1, 48), nil, nil, nil),
			stored([]any{bhash("b4")}, bhash("b3"), toks(500, 16), nil, nil, []any{[]any{"img-7f3a"}}),
		)},
		{"pod-c", batch(
			stored([]any{ih(3001)}, nil, toks(1, 16), nil, "sql-lora", []any{[]any{"sql-lora"}}),
			stored([]any{ih(3002)}, ih(999999), toks(17, 16), nil, nil, nil), // orphan
		)},
		{"pod-a", batch(
			stored([]any{ih(1001), ih(1002)}, nil, []any{}, "CPU", nil, nil), // offloaded copies
			removed([]any{ih(1003)}, "GPU"),
			removed([]any{ih(1002)}, "GPU"), // pod-b still holds the block: the hash stays
		)},
		{"pod-d", batch(
			stored([]any{ih(4001)}, nil, toks(900, 16), nil, nil, nil),
		)},
		{"pod-d", batch([]any{"AllBlocksCleared"})},
	}
}

func TestFixtureBatchesFile(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("# pod model msgpack-hex: written by fixture_test.go (go test -run TestFixtureBatchesFile -update)\n")
	for _, fb := range fixtureBatches() {
		fmt.Fprintf(&b, "%s %s %s\n", fb.pod, fixtureModel, hex.EncodeToString(fb.payload))
	}
	path := filepath.Join("testdata", "llmd", "batches.txt")
	if *update {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}
	require.Equal(t, b.String(), readTestdata(t, "llmd/batches.txt"), "run with -update")
}
