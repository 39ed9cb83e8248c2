package kvevents_test

import (
	"encoding/hex"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A server's prefix index hashes as vLLM does and reports what it caches; the Batcher
// encodes one scheduler step's events as vLLM puts them on the wire, and a router decodes
// them. (A real server publishes through a transport, such as package kvevents/zmq.)
func Example() {
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	events, _ := kvevents.NewBatcher()
	index, _ := prefix.New(pool, 4,
		prefix.WithHasher(vllmhash.NewSHA256CBOR("42")), // PYTHONHASHSEED=42
		prefix.WithObserver(events))

	// The server caches a 3-block prompt, as a finished request leaves it.
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	ids, _ := pool.Allocate(nil, 3)
	var cur prefix.Cursor // no hit: the namespace's root
	_, _ = index.Commit(&cur, p, ids)
	_ = index.Release(ids)

	// The first hash is what Python's cbor2 and hashlib give for vLLM's
	// (NONE_HASH, (1, 2, 3, 4), None).
	batch, _ := kvevents.DecodeBatch(events.AppendBatch(nil, 1700000000))
	stored := batch.Events[0]
	fmt.Println(stored.Kind, len(stored.Hashes), "blocks, first", hex.EncodeToString(stored.Hashes[0].Bytes)[:16])
	// Output:
	// BlockStored 3 blocks, first 0a99040f25d8a5f2
}

// chanSink is a transport that hands batches to a channel.
type chanSink chan uint64

func (c chanSink) Send(seq uint64, payload []byte) error { c <- seq; return nil }

// A Recorder numbers and encodes batches off the index's goroutine and hands them to a
// transport's Sink in order.
func ExampleRecorder() {
	sink := make(chanSink, 8)
	rec, _ := kvevents.NewRecorder(sink, kvevents.WithTimestamps(func() float64 { return 1 }))
	rec.AllBlocksCleared()
	rec.Flush()
	rec.AllBlocksCleared()
	rec.Flush()
	_ = rec.Close() // everything queued has reached the sink
	close(sink)
	for seq := range sink {
		fmt.Println("batch", seq)
	}
	fmt.Printf("%+v\n", rec.Stats())
	// Output:
	// batch 0
	// batch 1
	// {Sealed:2 Published:2 DroppedBatches:0 DroppedEvents:0 SendErrors:0 RefusedEvents:0}
}
