package blocktable

// This file pins the Manager's public contract so that the simulator (bench/sim) and the
// test kit (blocktable/kvtest) can be built against it in parallel. Signatures change only
// by agreement with their users.

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// SeqID is the scheduler's identifier of one sequence (a request, or one branch of a
// parallel-sampling or beam-search request). IDs are chosen by the caller; an ID can be
// used again once its sequence has finished, been aborted or been preempted in recompute
// mode.
type SeqID uint64

// CopyOp is one block copy the server must execute on the device before the step that
// uses Dst: copy-on-write after a fork (Src is the shared block, Dst the sequence's new
// private copy), or one leg of a swap (device to host, or host to device).
type CopyOp struct {
	Src, Dst blocks.ID
}

// PreemptMode says what preemption does with a victim's KV.
type PreemptMode uint8

const (
	// Recompute releases the victim's blocks (its full blocks stay cached in the prefix
	// index, so readmission re-hits them unless they were evicted) and forgets the
	// sequence: the scheduler admits it again later with its prompt and generated tokens.
	Recompute PreemptMode = iota
	// Swap copies every block of the victim to the host pool (Config.HostPool), releases
	// its device blocks and keeps the sequence, swapped out, until SwapIn brings it back.
	Swap
)

// Config configures a Manager. Pool and BlockSize are required.
type Config struct {
	// Pool is the device block pool. The Manager assumes it is the pool's only user (with
	// the Index): CheckInvariants counts every holder of every block.
	Pool *blocks.Pool
	// Index is the prefix index over Pool, built with the same block size. Nil disables
	// prefix caching: no matching, no committing, Finish releases like Abort.
	Index *prefix.Index
	// BlockSize is the number of tokens per block (16 is typical).
	BlockSize int
	// Preemption orders victims for Preempt. Nil means newest first (vLLM's FCFS default).
	Preemption evict.Preemption
	// Watermark is the fraction of usable blocks (0 to 1) that Admit keeps available
	// (free or reclaimable), as vLLM's watermark, so that admitting new sequences does not
	// leave running ones unable to grow. Append and Fork ignore it. 0 disables it.
	Watermark float64
	// SlidingWindow, when positive, is the attention window in tokens of every sequence:
	// blocks wholly outside the window are released and their table entries point at the
	// null block (the pool must have one). Such sequences neither match nor commit to the
	// prefix index. 0 means full attention.
	SlidingWindow int
	// Clock is the logical clock shared with the index (pass the same one to
	// prefix.WithClock). The Manager stamps each admission with Tick, which orders
	// arrivals for preemption. Nil means a private evict.Counter.
	Clock evict.Clock
	// HostPool stands for host memory in Swap mode. Nil disables swapping.
	HostPool *blocks.Pool
	// FullPromptHit lets a prefix hit cover the whole prompt. By default a hit is capped so
	// that at least one prompt token is left to compute, as vLLM caps it at len-1: the
	// model needs the last prompt token's logits.
	FullPromptHit bool
}

// Request is what Admit needs to know about a new sequence.
type Request struct {
	// Namespace keeps apart requests that must never share blocks (LoRA adapter, salt).
	Namespace prefix.Namespace
	// Prompt is the prompt's token ids. The Manager copies them.
	Prompt []int32
	// MM lists the prompt's multimodal inputs (sorted by Offset; nil for text). The
	// Manager keeps a reference to the slice for as long as the sequence lives.
	MM []prefix.MMInput
	// Prefill is how many prompt tokens get slots now. 0 means the whole prompt. With
	// chunked prefill, Admit matches the whole prompt, gives slots to the hit plus the
	// first chunk (Prefill tokens in all, or the hit if that is longer), and the caller
	// passes each later chunk's tokens to Append.
	Prefill int
	// Lookahead reserves slots for that many tokens beyond the prompt (draft tokens of
	// speculative decoding) without committing them.
	Lookahead int
	// Priority is the scheduling priority; as in vLLM, a larger value is less important.
	Priority int
	// MaxTokens, when positive, is a hint of the sequence's final length, so that its
	// token and block buffers are sized once.
	MaxTokens int
}

// AdmitResult says what Admit did (or, from CanAdmit, would do).
type AdmitResult struct {
	// HitTokens is the length of the prefix hit (HitBlocks x BlockSize): KV already
	// computed that the caller must not compute again.
	HitTokens int
	// HitBlocks is the number of cached blocks the sequence shares.
	HitBlocks int
	// NewBlocks is the number of blocks allocated for the rest (prompt and lookahead).
	NewBlocks int
	// Tokens is the sequence's length after admission (the hit plus the prefill).
	Tokens int
}

// AppendResult says what Append did.
type AppendResult struct {
	// NewBlocks is the number of blocks allocated.
	NewBlocks int
	// Copied is true when the first write into a shared last block copied it: the server
	// must execute Copy before the step that writes the new tokens.
	Copied bool
	// Copy is the copy-on-write operation, valid when Copied.
	Copy CopyOp
	// Committed is the number of blocks that filled and were committed to the prefix index.
	Committed int
}

// PreemptRequest asks Preempt to free memory.
type PreemptRequest struct {
	// Need is the number of blocks that must become available (free or reclaimable).
	Need int
	// Mode is Recompute or Swap.
	Mode PreemptMode
	// Protect lists sequences that must not be chosen (typically the one trying to grow).
	Protect []SeqID
}

// Preempted reports one preempted sequence.
type Preempted struct {
	// Seq is the victim.
	Seq SeqID
	// Mode is how it was preempted.
	Mode PreemptMode
	// Tokens is the victim's length when preempted (what recompute mode will compute
	// again, minus any prefix hit at readmission).
	Tokens int
	// Freed is how many blocks became available (free or reclaimable) on the device.
	Freed int
	// SwapOut is the copy plan of a swap, {Src: device block, Dst: host block} per block
	// of the victim's table, in table order. The server executes it before reusing the
	// device blocks. SwapIn returns the reverse plan.
	SwapOut []CopyOp
}

// SeqState is a sequence's lifecycle state.
type SeqState uint8

const (
	// Running sequences hold device blocks and can grow.
	Running SeqState = iota + 1
	// Swapped sequences hold host blocks only; SwapIn brings them back.
	Swapped
)

// SeqInfo describes one sequence, from Manager.Seq.
type SeqInfo struct {
	State SeqState
	// Tokens is the sequence's length.
	Tokens int
	// Reserved is the number of slots beyond Tokens (lookahead) that its blocks cover.
	Reserved int
	// Blocks is the length of its table (null entries of a sliding window included).
	Blocks int
	// HitTokens is the prefix hit at admission.
	HitTokens int
	// Committed is the number of its blocks on its path in the prefix index.
	Committed int
	// Priority and Arrival are what the preemption policy sees.
	Priority int
	Arrival  uint64
}

// Stats is a snapshot of the Manager's state and counters.
type Stats struct {
	// Running and Swapped count sequences.
	Running, Swapped int
	// Capacity is the pool's usable blocks; Free the blocks on its free list.
	Capacity, Free int
	// InUse counts blocks held by at least one sequence.
	InUse int
	// Cached counts blocks in the prefix index; Evictable those held by nobody else.
	Cached, Evictable int
	// HostInUse counts host blocks held by swapped sequences.
	HostInUse int

	// Admitted, Finished, Aborted, Forks, Preemptions, SwapIns count calls that succeeded.
	Admitted, Finished, Aborted, Forks, Preemptions, SwapIns uint64
	// CopyOnWrites counts blocks copied on first write after a fork or truncation.
	CopyOnWrites uint64
	// PromptTokens sums the prompt lengths of admissions; HitTokens their prefix hits.
	PromptTokens, HitTokens uint64
	// Evictions counts cached blocks the pool reclaimed from the index for allocations.
	Evictions uint64
	// RejectedAdmissions counts Admit calls refused for lack of blocks.
	RejectedAdmissions uint64
}

// HitRate is HitTokens / PromptTokens: the token-weighted prefix hit rate of admissions.
func (s Stats) HitRate() float64 {
	if s.PromptTokens == 0 {
		return 0
	}
	return float64(s.HitTokens) / float64(s.PromptTokens)
}

// Manager is what a scheduler drives: it admits sequences against the prefix index,
// grows their block tables as they decode, commits their blocks to the index as they fill,
// and preempts, finishes and aborts them. It is not safe for concurrent use.
type Manager struct{ cfg Config }

// New returns a Manager over cfg.Pool (and cfg.Index, when set).
func New(cfg Config) (*Manager, error) { panic("TODO") }

// Admit admits seq with req: it matches the prompt against the prefix index, takes the hit
// blocks and allocates the rest (prefill and lookahead), counting before it changes
// anything every block it needs, cached blocks it would take off the evictable set
// included. It is all or nothing: on failure nothing changed, and an *OutOfBlocksError
// (errors.Is ErrOutOfBlocks) says how many blocks were missing.
func (m *Manager) Admit(seq SeqID, req *Request) (AdmitResult, error) { panic("TODO") }

// CanAdmit answers what Admit would, changing nothing: the result, or the error.
func (m *Manager) CanAdmit(seq SeqID, req *Request) (AdmitResult, error) { panic("TODO") }

// Append appends tokens to a running sequence (one decode step, or a prefill chunk, or
// accepted draft tokens) and reserves lookahead slots beyond them. Blocks are allocated
// only when the last one is full; each block that fills is committed to the prefix index
// at once, so concurrent requests can hit it. The first write into a shared block copies
// it (see AppendResult.Copy). All or nothing: on ErrOutOfBlocks nothing changed; the
// caller preempts (Preempt) and retries. Append allocates no memory in steady state.
func (m *Manager) Append(seq SeqID, tokens []int32, lookahead int) (AppendResult, error) {
	panic("TODO")
}

// Finish commits seq's full blocks to the prefix index and releases all of its blocks;
// cached blocks become evictable once nobody holds them. The ID is then free for reuse.
func (m *Manager) Finish(seq SeqID) error { panic("TODO") }

// Abort releases all of seq's blocks without committing anything more (blocks already
// committed stay cached). A swapped sequence's host blocks are released too.
func (m *Manager) Abort(seq SeqID) error { panic("TODO") }

// Fork makes child a copy of the running sequence parent that shares all of its blocks
// (parallel sampling, beam search). The first write by either into a shared, partly
// filled block copies it. It fails with ErrUnknownSeq if parent is missing and
// ErrDuplicateSeq if child exists.
func (m *Manager) Fork(parent, child SeqID) error { panic("TODO") }

// Truncate cuts seq to n tokens (rejected speculative tokens) and releases the blocks no
// longer needed, lookahead reservations included. Blocks committed to the index stay
// cached; a later write into a kept shared or cached block copies it first.
func (m *Manager) Truncate(seq SeqID, n int) error { panic("TODO") }

// Preempt asks the preemption policy for victims among the running sequences (minus
// req.Protect), in its order, until req.Need blocks are available (free or reclaimable),
// preempts them in req.Mode, and appends one Preempted per victim to dst. If even all
// candidates cannot free enough it preempts none and returns an *OutOfBlocksError.
func (m *Manager) Preempt(req PreemptRequest, dst []Preempted) ([]Preempted, error) {
	panic("TODO")
}

// PreemptSeq preempts one sequence chosen by the caller, in mode.
func (m *Manager) PreemptSeq(seq SeqID, mode PreemptMode) (Preempted, error) { panic("TODO") }

// SwapIn brings a swapped sequence back: it allocates device blocks for its table and
// appends the reverse copy plan, {Src: host block, Dst: device block} in table order, to
// dst; the host blocks are released once the plan is returned (the server executes it
// before the host blocks are reused). All or nothing.
func (m *Manager) SwapIn(seq SeqID, dst []CopyOp) ([]CopyOp, error) { panic("TODO") }

// Contains reports whether seq is known (running or swapped).
func (m *Manager) Contains(seq SeqID) bool { panic("TODO") }

// Seq describes seq.
func (m *Manager) Seq(seq SeqID) (SeqInfo, error) { panic("TODO") }

// Seqs appends the IDs of every known sequence, in arrival order, to dst.
func (m *Manager) Seqs(dst []SeqID) []SeqID { panic("TODO") }

// Tokens returns seq's token ids. The slice is the Manager's: read it, do not keep it
// past the next call.
func (m *Manager) Tokens(seq SeqID) ([]int32, error) { panic("TODO") }

// Slot returns the flat KV slot (block x BlockSize + offset) of token position pos of
// seq, lookahead slots included.
func (m *Manager) Slot(seq SeqID, pos int) (int64, error) { panic("TODO") }

// FillSlots writes into dst the flat slots of seq's positions from, from+1, ...: the slot
// mapping of a step's new tokens, as vLLM's slot_mapping. Entries past the sequence's
// last reserved slot are -1 (padding). It returns how many entries are real slots.
func (m *Manager) FillSlots(seq SeqID, from int, dst []int64) (int, error) { panic("TODO") }

// FillRow writes seq's block table into dst (int32 block IDs, what paged-attention
// kernels read), pads the rest of dst with the null block (0) and returns the number of
// blocks. It fails with ErrShortBuffer, writing nothing, when dst is too short.
func (m *Manager) FillRow(seq SeqID, dst []int32) (int, error) { panic("TODO") }

// Pack packs the block tables of seqs into b, one padded row each (see Batch).
func (m *Manager) Pack(b *Batch, seqs []SeqID) error { panic("TODO") }

// Stats returns a snapshot of the Manager's state and counters.
func (m *Manager) Stats() Stats { panic("TODO") }

// CheckInvariants verifies manager, tables, index and pool together: every block's
// refcount equals its number of holders (table entries plus the index's reference), no
// table points at a free block, and each part's own invariants hold.
func (m *Manager) CheckInvariants() error { panic("TODO") }

// Table is one sequence's logical-to-physical block map: token position p lives in block
// Blocks()[p / B] at offset p % B, flat slot block x B + offset. It can be used on its own
// over a pool (no prefix caching); the Manager keeps one per sequence. Not safe for
// concurrent use.
type Table struct{ pool *blocks.Pool }

// TableOption configures a Table.
type TableOption func(*Table)

// WithWindow gives the table a sliding attention window of w tokens: blocks wholly
// outside it are released and their entries point at the pool's null block.
func WithWindow(w int) TableOption { panic("TODO") }

// NewTable returns an empty table over pool for blocks of blockSize tokens.
func NewTable(pool *blocks.Pool, blockSize int, opts ...TableOption) (*Table, error) {
	panic("TODO")
}

// Len is the number of tokens in the table.
func (t *Table) Len() int { panic("TODO") }

// Reserved is the number of lookahead slots beyond Len that the table's blocks cover.
func (t *Table) Reserved() int { panic("TODO") }

// Blocks returns the table's block IDs (null entries outside a sliding window included).
// The slice is the table's: read it, do not keep it past the next mutation.
func (t *Table) Blocks() []blocks.ID { panic("TODO") }

// Need returns how many blocks Append(n, lookahead) would allocate now, a copy-on-write
// included, without changing anything.
func (t *Table) Need(n, lookahead int) int { panic("TODO") }

// Append adds n tokens and makes sure lookahead more slots exist, allocating a block only
// when the last one is full, copying a shared block on first write. All or nothing.
func (t *Table) Append(n, lookahead int) (AppendResult, error) { panic("TODO") }

// Truncate cuts the table to n tokens and releases blocks no longer needed.
func (t *Table) Truncate(n int) error { panic("TODO") }

// Fork returns a new table sharing all of t's blocks (one more reference each).
func (t *Table) Fork() (*Table, error) { panic("TODO") }

// Release releases every block of the table and empties it.
func (t *Table) Release() error { panic("TODO") }

// Slot returns the flat slot of position pos (lookahead slots included).
func (t *Table) Slot(pos int) (int64, error) { panic("TODO") }

// FillSlots writes the slots of positions from, from+1, ... into dst, -1 past the last
// reserved slot, and returns how many are real.
func (t *Table) FillSlots(from int, dst []int64) (int, error) { panic("TODO") }

// FillRow writes the block IDs into dst, pads the rest with the null block (0) and returns
// the number of blocks; ErrShortBuffer when dst is too short.
func (t *Table) FillRow(dst []int32) (int, error) { panic("TODO") }

// Batch is a padded, row-major [Len x Stride] int32 buffer of block tables, the input of
// a paged-attention kernel for one step. Its memory is reused from step to step.
type Batch struct {
	// MaxBlocks, when positive, fixes the stride (for fixed kernel shapes, CUDA graphs);
	// a longer table fails with ErrShortBuffer. When 0 the stride is the longest row.
	MaxBlocks int

	rows   []int32
	stride int
	n      int
}

// Rows returns the packed buffer, Len() x Stride() entries, padding 0 (the null block).
func (b *Batch) Rows() []int32 { panic("TODO") }

// Row returns row i.
func (b *Batch) Row(i int) []int32 { panic("TODO") }

// Stride is the length of every row.
func (b *Batch) Stride() int { panic("TODO") }

// Len is the number of rows.
func (b *Batch) Len() int { panic("TODO") }

// PackTables packs tables into b, one row each, reusing b's memory.
func PackTables(b *Batch, tables []*Table) error { panic("TODO") }
