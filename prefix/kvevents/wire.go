package kvevents

// The wire format is vLLM's kv_events module (vllm/distributed/kv_events.py) as of early
// 2026: msgspec structs declared array_like=True, omit_defaults=True, and, for the events,
// tag=True, serialised with msgspec's msgpack encoder. An array-like struct is a msgpack
// array of its fields in declaration order; a tagged one starts with its tag, the class
// name; omit_defaults drops trailing fields that still hold their default. So:
//
//	EventBatch       [ts float64, events array, data_parallel_rank int]  (rank dropped when None)
//	BlockStored      ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//	                  lora_id, medium, lora_name, extra_keys, group_idx,
//	                  kv_cache_spec_kind, kv_cache_spec_sliding_window]  (trailing Nones dropped)
//	BlockRemoved     ["BlockRemoved", block_hashes, medium, group_idx]  (group_idx dropped when None)
//	AllBlocksCleared ["AllBlocksCleared"]
//
// A block hash is the hash bytes (msgpack bin), or with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
// its last 8 bytes as an unsigned integer. lora_id, medium and lora_name have no default
// and are always present, None (nil) when unset. vLLM fills extra_keys with one entry per
// stored block (None, or the tuple of that block's extra keys), so it is present whenever
// blocks are. A multimodal key in it is the input's identifier, or since March 2026 the
// 2-tuple [identifier, offset] (the Batcher writes that form when the index's events carry
// offsets: prefix.WithMMKeyForm). group_idx and the two kv_cache_spec fields came with vLLM's hybrid
// allocator (mid 2026): vLLM sets group_idx to the KV-cache group's index on every store
// and removal, 0 included (a model with one group sends 0), and leaves the spec fields None
// unless the events describe themselves, so a BlockStored has 10 elements and a
// BlockRemoved 4; older vLLM sends neither. Integers take msgpack's shortest form, strings fixstr/str8/16/32, floats
// float64, exactly as msgspec writes them.
//
// Later in 2026 vLLM dropped array_like: the events became msgpack maps keyed by field
// name, with the tag under "type", and the batch a map of ts, events and
// data_parallel_rank; the decoder here reads both forms of each.

// Event tags: msgspec's tag for a tagged struct is its class name.
const (
	TagBlockStored      = "BlockStored"
	TagBlockRemoved     = "BlockRemoved"
	TagAllBlocksCleared = "AllBlocksCleared"
)

// MediumGPU is the medium vLLM reports for blocks in GPU memory (MEDIUM_GPU).
const MediumGPU = "GPU"

// MediumCPU and MediumDisk are the media of vLLM's offloading tiers (host memory and
// disk), which an index's lower tiers name in their events.
const (
	MediumCPU  = "CPU"
	MediumDisk = "DISK"
)

// Field counts of the array forms.
const (
	batchFields            = 3 // ts, events, data_parallel_rank
	blockStoredFields      = 9 // tag + 8 fields
	blockStoredFieldsNoExt = 8 // without extra_keys
	blockRemovedFields     = 3
	blockStoredFieldsGroup = 10 // with group_idx
	blockRemovedFieldsGrp  = 4  // with group_idx
	allBlocksClearedFields = 1
)
