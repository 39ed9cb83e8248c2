package trusted

import "github.com/kvpage/kvpage/blocks"

// ReleaseHeld is prefix.Index.Release for ids that the caller holds, each once, as a
// Manager's table does: it skips the per-block check that each cached block is held
// (the pool still refuses a free block). index is a *prefix.Index. Package prefix
// installs it.
var ReleaseHeld func(index any, ids []blocks.ID)

// AcquireMatched is prefix.Index.Acquire for a path the index has just matched (Peek) and
// whose refcounts the caller has checked against blocks.MaxRefCount: it skips the pass
// that checks each block is cached. Package prefix installs it.
var AcquireMatched func(index any, ids []blocks.ID)

// CommitHeld is prefix.Index.Commit (cur a *prefix.Cursor, prompt a *prefix.Prompt) for
// blocks the caller holds, each once, as a Manager's table does: it skips the per-block
// checks that each block is held and listed once. It returns CommitResult's Stored,
// Duplicates and Orphaned. Package prefix installs it.
var CommitHeld func(index, cur, prompt any, ids []blocks.ID) (stored, duplicates, orphaned int, err error)

// CommitNext commits id as the next block under cur (a *prefix.Cursor) for a decode
// step of a sequence whose prompt is plain (the default namespace, no multimodal inputs,
// no retention, no retention ranges) and whose tokens are tokens, the caller holding id
// once: CommitHeld's one-block path without the Prompt, whose fields a Manager keeps on
// lines a decode step does not read. It reports false, changing nothing, where that path
// does not apply; the caller then commits through CommitHeld. Package prefix installs it.
var CommitNext func(index, cur any, tokens []int32, id blocks.ID) bool

// GroupHeads returns a pointer to a *prefix.GroupTree's device list heads, the block
// prefix.GroupTree.First returns for (node n, group g) at index n*groups+g, 0 for none.
// It is First without its range check, for blocktable/hybrid's lookups, whose walks
// yield only nodes of the tree and groups below its count: one compare less per block
// and group of every match, about 1% of W4's instructions. The pointer stays valid for
// the tree's life (the slice it points to grows with the nodes: read it through the
// pointer each time). Package prefix installs it.
var GroupHeads func(tree any) *[]int32
