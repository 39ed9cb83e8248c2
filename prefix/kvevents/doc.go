// Package kvevents is vLLM's KV-event format: the event types, the msgpack wire codec
// (Batcher encodes the prefix index's events as vLLM puts them on the wire, Decoder reads
// them back), and the Recorder, the transport-independent half of a publisher, which
// keeps the index's events on its goroutine and hands sealed, numbered, encoded batches to
// a transport's Sink. It plugs into package prefix through prefix.Observer; it depends on
// msgpack but on no network code: the transports are subpackages (kvevents/zmq), the
// router's index is package cluster, and vLLM's block hashes are package vllmhash.
//
// # Events on the wire
//
// Batcher writes vLLM's msgpack form of early 2026 (see wire.go for the layout). Decoder
// reads batches back, and also the map form that vLLM adopted for events and batches in
// mid 2026, with the KV-cache group (group_idx) of vLLM's hybrid allocator when present
// (Event.Group; WithGroup writes it). Two choices differ from vLLM without changing what a
// consumer learns: a BlockRemoved lists every block one eviction removed (vLLM sends one
// event per block), and lora_id is None unless WithLoRAIDs maps names to the integer ids
// vLLM would use.
//
// # Never blocking the allocator
//
// A Recorder's observer side only copies each event into reused buffers (a memmove of its
// hashes and tokens, a few nanoseconds per block, no allocation in steady state) and hands
// sealed batches to a bounded queue without waiting; its sender goroutine encodes them and
// calls the Sink. The sender polls the queue every millisecond while batches keep coming,
// so that Flush does not wake it (a system call on the allocator's thread) for every
// batch: a batch may leave up to about a millisecond after its Flush. When the queue is
// full the batch is dropped and counted, and its sequence number is spent anyway, so
// subscribers see a gap rather than silently diverging. A consumer that missed a dropped
// BlockRemoved believes a server holds blocks it no longer has; that costs a routing miss,
// never correctness, because a server always compares tokens before it reuses a block.
//
// # Concurrency
//
// Batcher and Decoder are not safe for concurrent use: each belongs to one goroutine (the
// index's, for a Batcher). A Recorder's observer methods, Flush and Close belong to the
// index's goroutine; its Stats may be read from any.
//
// # Invariants
//
// A Recorder's sequence numbers are consecutive from 0 (or WithFirstSeq's) in the order
// batches were sealed; every sealed batch is handed to the Sink once, in order, or counted
// as dropped.
//
// # Extending
//
// A new transport is a subpackage that implements Sink (publishing side) and feeds a
// kvevents.Applier (subscribing side); a newer vLLM wire form goes in the Decoder, with a
// golden payload from vLLM's own encoder in its tests.
package kvevents
