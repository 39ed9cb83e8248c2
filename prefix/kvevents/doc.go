// Package kvevents makes a server built on kvpage a member of the KV-aware routing systems
// that already exist for vLLM fleets (llm-d's KV-cache indexer, NVIDIA Dynamo's router):
// it hashes blocks as vLLM does, and publishes the prefix index's events as vLLM publishes
// its KV events. It also has the other end, a subscriber and a small cluster index that
// routes a prompt to the server holding its longest cached prefix, for routing tests and
// fleet simulations. It plugs into package prefix through prefix.Hasher and
// prefix.Observer, so a server that publishes nothing never imports CBOR, msgpack or
// ZeroMQ.
//
// # Block hashes
//
// SHA256CBOR is vLLM's sha256_cbor scheme bit for bit (vllm/v1/core/kv_cache_utils.py,
// hash_block_tokens; vllm/utils/hashing.py, sha256_cbor): SHA-256 over the RFC 8949 core
// deterministic CBOR of [parent hash, token ids, extra keys], the first parent being the
// hash of the PYTHONHASHSEED string. Extra keys are, in order, the LoRA name, the
// identifiers of the multimodal inputs overlapping the block, and the cache salt on the
// first block only; none gives CBOR null. Uint64 gives the 64-bit form vLLM publishes with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (the last 8 bytes, big-endian); the chain itself
// always runs on 32-byte hashes. Give the index the hasher with prefix.WithHasher. The
// command `kvpage hash` prints these hashes for a token sequence.
//
// Facts of vLLM's that matter here: without PYTHONHASHSEED a vLLM server draws its root at
// random, so nothing can reproduce its hashes; from March 2026 vLLM keys a multimodal input
// as the pair (identifier, offset within the block) rather than the identifier alone, which
// prefix.Extra cannot express, so multimodal blocks hash as vLLM did before (text, LoRA
// and salt blocks are unaffected).
//
// # Events on the wire
//
// Batcher (a prefix.Observer) encodes events into vLLM's msgpack form of early 2026 (see
// wire.go for the layout). Publisher (also a prefix.Observer) publishes batches of them
// over a ZeroMQ PUB socket with vLLM's framing [topic, sequence number, payload] and serves
// replays on a ROUTER socket with vLLM's protocol. Decoder reads batches back, and also the
// map form that vLLM adopted for events in mid 2026. Two choices differ from vLLM without
// changing what a consumer learns: a BlockRemoved lists every block one eviction removed
// (vLLM sends one event per block), and lora_id is None unless WithLoRAIDs maps names to
// the integer ids vLLM would use.
//
// # Never blocking the allocator
//
// A Publisher's observer side only copies each event into reused buffers (a memmove of its
// hashes and tokens, a few nanoseconds per block, no allocation in steady state) and hands
// sealed batches to a bounded queue without waiting; its sender goroutine encodes them. The
// sender polls the queue every millisecond while batches keep coming, so that Flush does
// not wake it (a system call on the allocator's thread) for every batch: a batch may leave
// up to about a millisecond after its Flush.
// When the queue is full the batch is dropped and counted, and its sequence number is spent
// anyway, so subscribers see a gap rather than silently diverging. A consumer that missed a dropped BlockRemoved believes a
// server holds blocks it no longer has; that costs a routing miss, never correctness,
// because a server always compares tokens before it reuses a block.
//
// # Concurrency
//
// SHA256CBOR, Batcher and Decoder are not safe for concurrent use: each belongs to one
// goroutine (the index's, for the first two). A Publisher's observer methods, Flush and
// Close belong to the index's goroutine; its Stats and endpoints may be read from any, and
// it runs a sender goroutine and, with replay, a replay goroutine. ClusterIndex is safe for
// concurrent use (one mutex). A Subscriber runs one goroutine and its methods are safe
// for concurrent use.
//
// # Invariants
//
// A Publisher's sequence numbers are consecutive from 0 in the order batches were sealed;
// every sealed batch is either published once, in order, or counted as dropped. Its
// replay buffer holds the last published batches in sequence order, at most its capacity.
// A Subscriber applies each batch at most once and in sequence order, and counts every
// sequence number it neither applied nor received twice as lost.
package kvevents
