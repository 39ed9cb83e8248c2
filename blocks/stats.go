package blocks

// Stats is a snapshot of a pool's state and counters.
//
// Two usage figures are reported because they answer different questions. Usage counts
// every block that is not on the free list, warm cached blocks included: it says how full
// the memory is. ActiveUsage leaves out the reclaimable blocks (cached, held by nobody but
// the cache), which an allocation can have at any time: it says how much memory running
// requests need. vLLM reports the second, which is why its users see usage fall to 0% while
// the prefix cache is still warm.
type Stats struct {
	// Capacity is the number of usable blocks (the null block excluded).
	Capacity int
	// Free is the number of blocks on the free list.
	Free int
	// InUse is Capacity - Free: blocks with at least one holder (cached blocks included).
	InUse int
	// Reclaimable is what the Reclaimer can free now (0 without one).
	Reclaimable int

	// Allocations counts blocks handed out, Releases blocks returned to the free list.
	Allocations, Releases uint64
	// FailedAllocations counts Allocate calls that returned ErrOutOfBlocks.
	FailedAllocations uint64
	// Reclaimed counts blocks the Reclaimer freed for allocations.
	Reclaimed uint64
}

// Usage is InUse / Capacity: the share of blocks not on the free list, cache included.
func (s Stats) Usage() float64 { return ratio(s.InUse, s.Capacity) }

// ActiveUsage is (InUse - Reclaimable) / Capacity: the share held by running requests.
func (s Stats) ActiveUsage() float64 { return ratio(s.InUse-s.Reclaimable, s.Capacity) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
