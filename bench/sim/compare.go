package sim

import (
	"runtime"
	"slices"
	"sync"
)

// Compare runs every scheme over the same requests, GOMAXPROCS schemes at a time, and
// returns the results in the order of schemes. Each run is deterministic, so the results
// do not depend on the parallelism. It returns the first error in scheme order.
func Compare(reqs []Request, cfg Config, schemes []Scheme) ([]*Result, error) {
	return CompareProgress(reqs, cfg, schemes, nil)
}

// CompareProgress is Compare that calls progress(i, n) as scheme i completes n more
// requests (every 1,024 and at the end), and progress(i, 0) as it starts; from several
// goroutines at once. With progress nil, cfg.Progress is called as Simulate calls it.
//
// The most expensive schemes start first (see cost: small blocks, prefix sharing):
// started last, the slowest would run alone at the end while the other workers idle.
func CompareProgress(reqs []Request, cfg Config, schemes []Scheme, progress func(scheme, done int)) ([]*Result, error) {
	results := make([]*Result, len(schemes))
	errs := make([]error, len(schemes))
	order := make([]int, len(schemes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return schemes[b].cost() - schemes[a].cost() })
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(schemes)) {
		wg.Go(func() {
			for i := range work {
				c := cfg
				if progress != nil {
					progress(i, 0)
					c.Progress = func(n int) { progress(i, n) }
				}
				results[i], errs[i] = Simulate(reqs, c, schemes[i])
			}
		})
	}
	for _, i := range order {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// cost estimates how long a scheme takes to simulate, for CompareProgress's order: the
// contiguous schemes are cheap; paging costs per block, so small blocks cost most (on the
// default comparison paged/1 takes about 1.3 s of CPU, paged/16 0.15 s, the contiguous
// schemes 0.03 s each), and prefix sharing doubles it.
func (s Scheme) cost() int {
	if !s.allocatesBlocks() {
		return 1
	}
	c := 2 + 256/max(s.BlockSize, 1)
	if s.PrefixSharing {
		c *= 2
	}
	return c
}
