package prefix

import "github.com/kvpage/kvpage/blocks"

// PinInfo describes cached block id for a caller that plans a release without making it
// (a preemption planner): its parent block (hasParent false for a block directly under a
// namespace root) and how many of its children are pinned, that is held by a request or
// lying above a held block. A cached block is reclaimable exactly when no request holds it
// and pinnedKids is 0, so a planner that knows who holds what can tell which blocks a
// release would unpin, walking up the path as Release does. For a block that is not cached
// it returns (0, false, 0).
func (x *Index) PinInfo(id blocks.ID) (parent blocks.ID, hasParent bool, pinnedKids int) {
	if !x.IsCached(id) {
		return 0, false, 0
	}
	nd := &x.nodes[nodeOf(id)]
	if !x.isBlock(nd.parent) {
		return 0, false, int(nd.pinnedKids)
	}
	return blockOf(nd.parent), true, int(nd.pinnedKids)
}
