package blocktable

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
)

// Poison values written over memory the package no longer uses, under the kvinvariants
// build tag (and -race): a caller that kept the slice of Manager.Blocks or Manager.Tokens
// past a Finish, Abort, preemption or truncation reads these instead of plausible stale
// block IDs and tokens, and the use after free shows up at once. A normal build never
// writes them.
const (
	poisonID    blocks.ID = -0x0badf00d
	poisonToken int32     = -0x0badf00d
)

// poisonIDs overwrites ids when invariant checking is on.
func poisonIDs(ids []blocks.ID) {
	if !invariant.Enabled {
		return
	}
	for i := range ids {
		ids[i] = poisonID
	}
}

// poisonTokens overwrites toks when invariant checking is on.
func poisonTokens(toks []int32) {
	if !invariant.Enabled {
		return
	}
	for i := range toks {
		toks[i] = poisonToken
	}
}

// poisonRecord overwrites a finished sequence's token and block buffers, whole capacity,
// before the record is kept for reuse.
func poisonRecord(s *sequence) {
	if !invariant.Enabled {
		return
	}
	poisonTokens(s.tokens[:cap(s.tokens)])
	poisonIDs(s.t.ids[:cap(s.t.ids)])
}
