package blocks

import "github.com/kvpage/kvpage/internal/poolrefs"

// The prefix index's trusted paths read and change cached blocks' holder counts in
// their own pass (internal/poolrefs); refs is allocated once in New and never moved.
func init() {
	poolrefs.Of = func(pool any) []int32 { return pool.(*Pool).refs }
	poolrefs.AllocateOne = func(pool any) (int32, bool) {
		id, ok := pool.(*Pool).allocateOne()
		return int32(id), ok
	}
}
