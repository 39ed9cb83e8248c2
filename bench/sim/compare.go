package sim

import (
	"runtime"
	"sync"
)

// Compare runs every scheme over the same requests, GOMAXPROCS schemes at a time, and
// returns the results in the order of schemes. Each run is deterministic, so the results
// do not depend on the parallelism. It returns the first error in scheme order.
func Compare(reqs []Request, cfg Config, schemes []Scheme) ([]*Result, error) {
	results := make([]*Result, len(schemes))
	errs := make([]error, len(schemes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(schemes)) {
		wg.Go(func() {
			for i := range work {
				results[i], errs[i] = Simulate(reqs, cfg, schemes[i])
			}
		})
	}
	for i := range schemes {
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
