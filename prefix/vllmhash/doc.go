// Package vllmhash computes block hashes exactly as vLLM does, so that a server built on
// kvpage names its cached blocks the way a vLLM fleet's routers (llm-d's KV-cache indexer,
// Dynamo's router) expect. It depends on the standard library and package prefix only: a
// server that wants vLLM's hashes and publishes nothing imports no msgpack or network code.
//
// SHA256CBOR is vLLM's sha256_cbor scheme bit for bit (vllm/v1/core/kv_cache_utils.py,
// hash_block_tokens; vllm/utils/hashing.py, sha256_cbor): SHA-256 over the RFC 8949 core
// deterministic CBOR of [parent hash, token ids, extra keys], the first parent being the
// hash of the seed string (vLLM's NONE_HASH). Extra keys are, in order, the LoRA name, the
// multimodal inputs overlapping the block, and the cache salt on the first block only;
// none gives CBOR null. A multimodal input is keyed in either of vLLM's forms, as the
// prefix.Extra given says: by its identifier (vLLM before March 2026), or by the pair
// [identifier, offset of its start relative to the block's first token] (since; an index
// built with prefix.WithMMKeyForm(prefix.MMKeyIdentifierOffset) passes the offsets, and
// BlockExtraForm and PromptHashesForm compute them). Uint64 gives the 64-bit form vLLM publishes with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (the last 8 bytes, big-endian); the chain itself
// always runs on 32-byte hashes. Give an index the hasher with prefix.WithHasher; the
// command `kvpage hash` prints these hashes for a token sequence.
//
// The seed is the server's PYTHONHASHSEED (NewSHA256CBOR) or, when that is unset, the
// fixed DefaultSeed "vllm-none-hash" that vLLM hashes sha256_cbor roots from since it
// gained DEFAULT_NONE_HASH_SEED (NewSHA256CBORDefault; ResolveSeed picks between the two
// as vLLM does). Older vLLM releases drew an unset seed's root from os.urandom, as vLLM
// still does for xxhash: nothing can reproduce such a root, but NewSHA256CBORFromRoot
// takes one that is known.
//
// # Concurrency
//
// A SHA256CBOR encodes into a buffer it keeps (Block allocates nothing in steady state), so
// one value belongs to one goroutine; BlockExtra, BlockExtraForm, PromptHashes,
// PromptHashesForm and Uint64 are pure.
//
// # Invariants
//
// Hashes are deterministic: the same seed, tokens and extras give the same bytes in every
// process, and those bytes are vLLM's (the test vectors come from Python's cbor2 and
// hashlib, and are checked against a second CBOR encoder).
//
// # Extending
//
// Another of vLLM's schemes (sha256 over pickle, xxhash) goes in a file of its own here,
// as a type implementing prefix.Hasher, with vectors produced by vLLM's own code in a test
// beside it.
package vllmhash
