package prefix

// control holds the index's retention and explanation state that the core paths only
// consult: the eviction history behind Explain and the cause of the eviction under way.
// It lives beside the core so that the match, commit and eviction paths each pay one
// predictable branch for it and nothing else.
type control struct {
	ghost ghostTable
	// cause is what the eviction under way is for, recorded in the history with each
	// victim: EvictPolicy unless a quota or an epoch drives it.
	cause EvictCause

	// Pins (retention.go): pins per block, nil before the first Pin; pinned counts the
	// blocks with at least one.
	pins   []uint32
	pinned int
	// Session holds (retention.go), nil before the first.
	sessions map[SessionID]*session
}

func (c *control) init(cfg *config) {
	c.ghost.init(cfg.history)
	c.cause = EvictPolicy
}

// recordEvicted notes that block node n is being evicted now.
func (x *Index) recordEvicted(n int32) {
	x.ctl.ghost.record(x.nodes[n].key, x.clock.Now(), x.ctl.cause)
}

// rootInfoFor is the namespace information ns's root would have: the hashes its keys mix
// in, for a namespace that has no root now.
func (c *control) rootInfoFor(ns Namespace) rootInfo {
	ri := rootInfo{ns: ns, hasLo: ns.LoRA != "", hasSa: ns.Salt != ""}
	if ri.hasLo {
		ri.lora = hashString(ns.LoRA)
	}
	if ri.hasSa {
		ri.salt = hashString(ns.Salt)
	}
	return ri
}

// explainEpoch says whether block m (toks) after cursor c is cached, or was evicted,
// under an earlier weight epoch of ns.
func (x *Index) explainEpoch(ns Namespace, c Cursor, toks []int32, m int, mm []string) (MissReason, EvictCause, uint64) {
	return MissNone, EvictNone, 0
}

// isSaltKey reports whether an extra key marks the first block of a salt region.
func isSaltKey(k string) bool { return false }
