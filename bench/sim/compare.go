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
// The most expensive schemes start first (paging with prefix sharing, then paging, then
// the contiguous schemes): started last, the slowest would run alone at the end while the
// other workers idle.
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

// cost ranks a scheme by how long it takes to simulate, for CompareProgress's order.
func (s Scheme) cost() int {
	switch {
	case s.allocatesBlocks() && s.PrefixSharing:
		return 3
	case s.allocatesBlocks():
		return 2
	}
	return 1
}
