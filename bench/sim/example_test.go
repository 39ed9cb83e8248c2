package sim_test

import (
	"fmt"
	"os"

	"github.com/kvpage/kvpage/bench/sim"
)

// Four requests through each scheme on a KV budget of 10 tokens: the contiguous schemes
// reserve a region per request in one arena, paging hands out 2-token blocks on demand.
func ExampleCompare() {
	reqs := []sim.Request{
		{ID: 0, Input: 2, Output: 2, Group: -1},
		{ID: 1, Input: 3, Output: 3, Group: -1},
		{ID: 2, Input: 4, Output: 1, Group: -1},
		{ID: 3, Input: 1, Output: 1, Group: -1},
	}
	cfg := sim.DefaultConfig(10)
	cfg.MaxModelLen, cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = 8, 8, 16
	results, err := sim.Compare(reqs, cfg, []sim.Scheme{
		{Name: sim.OrcaMax}, {Name: sim.OrcaPow2}, {Name: sim.OrcaOracle}, {Name: sim.Paged, BlockSize: 2},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sim.WriteTable(os.Stdout, results); err != nil {
		fmt.Println(err)
	}
	// Output:
	// scheme                  tokens reserved internal external   free mean run peak run done/kstep  preempt hit rate sat steps
	// orca-max                 31.4%     5.7%    42.9%    17.1%   2.9%      1.0        1      571.4        0        -         7
	// orca-pow2                36.7%     6.7%    18.3%    30.0%   8.3%      1.2        2      666.7        0        -         6
	// orca-oracle              55.0%    10.0%     0.0%    22.5%  12.5%      1.8        2     1000.0        0        -         4
	// paged/2                  55.0%     0.0%    10.0%    20.0%  15.0%      1.8        2     1000.0        0        -         4
}
