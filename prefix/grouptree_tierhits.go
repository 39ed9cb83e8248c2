package prefix

import "github.com/kvpage/kvpage/blocks"

// SetDeviceHits records device block b's uses on the device as the owner counts them (the
// tree sees no device hits: the owner's free queue does): 1 for the computation that
// cached it, one more for each hit since, as an Index counts a node's hits. A copy of b
// into tier 1 that PrepareStore or Hold prepares starts its slot with that count (at
// least 1), as an Index's lower-tier entry starts with its node's, so that a tier's policy
// that ranks by hits (SLRU, S3-FIFO, LFU) keeps a block a server hit 50 times on the
// device before one it hit once. The owner sets the count again whenever b caches other
// content (blocktable/hybrid does, as it caches a block and at each hit); a block it never
// set counts 1. Without lower tiers, or for an ID outside the pool, it does nothing.
func (t *GroupTree) SetDeviceHits(b blocks.ID, hits uint32) {
	if ts := t.tiers; ts != nil && uint(b) < uint(len(ts.devHits)) {
		ts.devHits[b] = hits
	}
}

// DeviceHits returns the count SetDeviceHits last recorded for device block b (0 when
// none was, without lower tiers, or for an ID outside the pool).
func (t *GroupTree) DeviceHits(b blocks.ID) uint32 {
	if ts := t.tiers; ts != nil && uint(b) < uint(len(ts.devHits)) {
		return ts.devHits[b]
	}
	return 0
}
