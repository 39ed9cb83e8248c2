package prefix

// Counters of a GroupTree read one at a time, as Stats returns them but without copying
// the per-group slice: what a lock-free stats publisher reads once a step.

// CachedIn returns the number of device entries of group g (Stats().Cached[g]).
func (t *GroupTree) CachedIn(g int) int { return t.res[Device].cached[g] }

// LiveNodes returns the number of live nodes (Stats().Nodes).
func (t *GroupTree) LiveNodes() int { return t.live }

// DuplicateCount returns Stats().Duplicates.
func (t *GroupTree) DuplicateCount() uint64 { return t.duplicates }

// PrefixesIn returns the number of prefixes with a device entry of group g
// (Stats().Prefixes[g]).
func (t *GroupTree) PrefixesIn(g int) int { return t.res[Device].prefixes[g] }
