package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyRequests is the hand-computed trace of the accounting tests: four requests, all
// arriving at step 0, with true lengths (prompt + output - 1) 3, 5, 4 and 1.
func tinyRequests() []Request {
	return []Request{
		{ID: 0, Input: 2, Output: 2, Group: -1},
		{ID: 1, Input: 3, Output: 3, Group: -1},
		{ID: 2, Input: 4, Output: 1, Group: -1},
		{ID: 3, Input: 1, Output: 1, Group: -1},
	}
}

func tinyConfig(capacity, maxModelLen int) Config {
	return Config{Capacity: capacity, MaxModelLen: maxModelLen, MaxNumSeqs: 8, MaxNumBatchedTokens: 16, StepDuration: 1, Seed: 1}
}

// runRecorded simulates with every step checked and returns the per-step records.
func runRecorded(t *testing.T, reqs []Request, cfg Config, s Scheme) (*Result, []StepRecord) {
	t.Helper()
	var recs []StepRecord
	cfg.OnStep = func(r StepRecord) { recs = append(recs, r) }
	res, err := simulate(reqs, cfg, s, true)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, r.Usage.Check(cfg.Capacity), "step %d", r.Step)
	}
	return res, recs
}

func usages(recs []StepRecord, saturatedOnly bool) []Usage {
	var out []Usage
	for _, r := range recs {
		if r.Saturated || !saturatedOnly {
			out = append(out, r.Usage)
		}
	}
	return out
}

// Each step below was worked out by hand from the rules in doc.go: admission in FCFS
// order by first fit, a snapshot after admission, then one token per running request.
func TestContiguousAccountingByHand(t *testing.T) {
	tests := []struct {
		kind   string
		steps  []Usage // saturated phase
		total  int     // steps of the whole run
		shares Shares
	}{
		{
			// Every request reserves 8 of the 10 slots: one runs at a time and the
			// 2-slot hole left over is too small for anyone.
			kind: OrcaMax,
			steps: []Usage{
				{Tokens: 2, Reserved: 1, Internal: 5, External: 2},
				{Tokens: 3, Reserved: 0, Internal: 5, External: 2},
				{Tokens: 3, Reserved: 2, Internal: 3, External: 2},
				{Tokens: 4, Reserved: 1, Internal: 3, External: 2},
				{Tokens: 5, Reserved: 0, Internal: 3, External: 2},
				{Tokens: 4, Reserved: 0, Internal: 4, External: 2},
				{Tokens: 1, Reserved: 0, Internal: 7, External: 0, Free: 2},
			},
			total:  7,
			shares: Shares{Tokens: 22.0 / 70, Reserved: 4.0 / 70, Internal: 30.0 / 70, External: 12.0 / 70, Free: 2.0 / 70},
		},
		{
			// Reservations 4, 8, 4, 1: request 1 needs 8 contiguous slots while request 0
			// holds [0, 4), so the 6-slot hole is external fragmentation.
			kind: OrcaPow2,
			steps: []Usage{
				{Tokens: 2, Reserved: 1, Internal: 1, External: 6},
				{Tokens: 3, Reserved: 0, Internal: 1, External: 6},
				{Tokens: 3, Reserved: 2, Internal: 3, External: 2},
				{Tokens: 4, Reserved: 1, Internal: 3, External: 2},
				{Tokens: 5, Reserved: 0, Internal: 3, External: 2},
				{Tokens: 5, Free: 5},
			},
			total:  6,
			shares: Shares{Tokens: 22.0 / 60, Reserved: 4.0 / 60, Internal: 11.0 / 60, External: 18.0 / 60, Free: 5.0 / 60},
		},
		{
			// Exact reservations 3, 5, 4, 1. When request 0 leaves, the free 5 slots lie
			// in holes of 3 and 2: neither holds request 2's 4.
			kind: OrcaOracle,
			steps: []Usage{
				{Tokens: 5, Reserved: 3, External: 2},
				{Tokens: 7, Reserved: 1, External: 2},
				{Tokens: 5, Reserved: 0, External: 5},
				{Tokens: 5, Free: 5},
			},
			total:  4,
			shares: Shares{Tokens: 22.0 / 40, Reserved: 4.0 / 40, External: 9.0 / 40, Free: 5.0 / 40},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			res, recs := runRecorded(t, tinyRequests(), tinyConfig(10, 8), Scheme{Name: tt.kind})
			assert.Equal(t, tt.steps, usages(recs, true))
			assert.Equal(t, len(tt.steps), res.SaturatedSteps)
			assert.Equal(t, tt.total, res.TotalSteps)
			assert.InDelta(t, tt.shares.Tokens, res.Shares.Tokens, 1e-12)
			assert.InDelta(t, tt.shares.Reserved, res.Shares.Reserved, 1e-12)
			assert.InDelta(t, tt.shares.Internal, res.Shares.Internal, 1e-12)
			assert.InDelta(t, tt.shares.External, res.Shares.External, 1e-12)
			assert.InDelta(t, tt.shares.Free, res.Shares.Free, 1e-12)
			assert.Equal(t, 4, res.Completed, "all four finish within the saturated phase")
			assert.Zero(t, res.Preemptions)
		})
	}
}

func TestPagedAccountingByHand(t *testing.T) {
	// Block size 2 over 10 tokens: 5 blocks, one of them the null block, so 8 usable
	// token slots and 2 of external fragmentation throughout.
	res, recs := runRecorded(t, tinyRequests(), tinyConfig(10, 8), Scheme{Name: Paged, BlockSize: 2})
	assert.Equal(t, []Usage{
		{Tokens: 5, Internal: 1, External: 2, Free: 2}, // R0 [2] in 1 block, R1 [3] in 2; R2 needs 2 blocks, 1 free
		{Tokens: 7, Internal: 1, External: 2, Free: 0}, // R0 grows into a 4th block, R1 into its tail
		{Tokens: 5, Internal: 1, External: 2, Free: 2}, // R0 finished; R1 grows to 5 tokens in 3 blocks
		{Tokens: 5, Internal: 1, External: 2, Free: 2}, // R2 [4] and R3 [1] admitted; the queue is empty
	}, usages(recs, true))
	assert.InDelta(t, 22.0/40, res.Shares.Tokens, 1e-12)
	assert.InDelta(t, 4.0/40, res.Shares.Internal, 1e-12)
	assert.Zero(t, res.Shares.Reserved)
	assert.Equal(t, 4, res.TotalSteps)
	assert.Equal(t, 2, res.PeakRunning)
	assert.InDelta(t, 1000.0, res.CompletedPerKStep, 1e-9, "4 requests in 4 steps")
}

func TestPagedPreemptionByHand(t *testing.T) {
	// Block size 1 over 6 tokens: 5 usable blocks (one is the null block). Two requests of
	// prompt 2 and output 3 (true length 4) cannot both reach 4 tokens; a third, of prompt
	// 4, keeps the queue waiting so that the saturated phase lasts.
	reqs := []Request{
		{ID: 0, Input: 2, Output: 3, Group: -1},
		{ID: 1, Input: 2, Output: 3, Group: -1},
		{ID: 2, Input: 4, Output: 1, Group: -1},
	}
	cfg := tinyConfig(6, 5)
	for _, sharing := range []bool{false, true} {
		res, recs := runRecorded(t, reqs, cfg, Scheme{Name: Paged, BlockSize: 1, PrefixSharing: sharing})
		sat := usages(recs, true)
		// Step 1: request 0 takes the last free block; request 1 cannot grow, and the
		// newest-first policy preempts request 1 itself. Step 3: request 0 has finished and
		// request 1 is readmitted with its prompt and the token it had generated (3).
		var tokens []int64
		for _, u := range sat {
			tokens = append(tokens, u.Tokens)
			assert.Equal(t, int64(1), u.External, "the null block")
		}
		assert.Equal(t, []int64{4, 3, 4, 3, 4, 4}, tokens, "sharing=%v", sharing)
		assert.Equal(t, 1, res.Preemptions)
		assert.Equal(t, 3, res.Completed)
		assert.Equal(t, 6, res.TotalSteps)
		// Request 1's readmission (3 prompt tokens) is Resumed, counted apart from the
		// first admissions' 2 + 2 + 4 prompt tokens, which hit nothing.
		assert.True(t, res.ResumedApart)
		assert.Equal(t, int64(3), res.ResumedPromptTokens)
		assert.Zero(t, res.PrefixHitRate)
		if !sharing {
			assert.Zero(t, res.ResumedHitRate)
			continue
		}
		// Request 1's two prompt blocks stay cached when it is preempted; request 0's last
		// token evicts one of them (the leaf), so the readmission re-hits one block of its
		// own: 1 of 3 tokens, reported apart (it was 1 of 11 inside the hit rate).
		assert.Equal(t, int64(2), sat[1].Cached, "request 1's blocks cached after preemption")
		assert.Equal(t, int64(1), sat[2].Cached, "one evicted for request 0's last token")
		assert.InDelta(t, 1.0/3, res.ResumedHitRate, 1e-12)
	}
}

// newContiguousFor builds the allocator of the registered contiguous scheme name.
func newContiguousFor(t *testing.T, cfg *Config, name string) *contiguous {
	t.Helper()
	d, ok := lookupScheme(name)
	require.True(t, ok)
	a, err := d.build(cfg, &Scheme{Name: name}, nil)
	require.NoError(t, err)
	return a.(*contiguous)
}

func TestPowerOfTwoReservationIsCappedAtMaxModelLen(t *testing.T) {
	c := newContiguousFor(t, &Config{Capacity: 100, MaxModelLen: 12}, OrcaPow2)
	for _, tt := range []struct{ in, out, want int }{{1, 1, 1}, {1, 2, 2}, {2, 2, 4}, {3, 2, 4}, {4, 2, 8}, {8, 1, 8}, {5, 5, 12}} {
		assert.Equal(t, tt.want, c.reservation(&Request{Input: tt.in, Output: tt.out}), "in %d out %d", tt.in, tt.out)
	}
}
