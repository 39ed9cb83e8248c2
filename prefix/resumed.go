package prefix

// RecordResumedLookup counts one lookup of p that matched up to c, as RecordLookup does,
// but in the Resumed counters of Stats: for a request that was preempted and is admitted
// again. Such a request mostly re-hits the blocks it computed itself before preemption;
// counted with the others it would make the cache look better than it is (vLLM counts
// them apart for the same reason: PrefixCacheStats.preempted_*).
func (x *Index) RecordResumedLookup(p *Prompt, c Cursor) {
	x.stats.resLookups++
	if p != nil {
		x.stats.resLookedUp += uint64(len(p.Tokens))
	}
	x.stats.resHitTokens += uint64(max(c.blocks, 0)) * uint64(x.bs)
}
