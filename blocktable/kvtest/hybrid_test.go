package kvtest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A hybrid scheduler loop (admit, decode, preempt the newest other sequence on
// ErrOutOfBlocks and readmit it later with its tokens, finish) over three kinds of
// groups, checked by the kit after every step and for leaks at the end.
func TestHybridSchedulerLoop(t *testing.T) {
	for _, c := range []struct {
		name    string
		groups  []hybrid.Spec
		blocks  int
		preempt bool // the pool is small enough that someone is preempted
	}{
		{"full+window", nil, 13, true},
		{"full+window+mamba", []hybrid.Spec{hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 6}, hybrid.Mamba{Block: 4, Mode: hybrid.MambaAll}}, 19, true},
		// A window of 8 tokens holds at most 3 blocks a sequence: 12 blocks run all four.
		{"window only", []hybrid.Spec{hybrid.SlidingWindow{Block: 4, Window: 8}}, 13, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := kvtest.NewHybrid(t, kvtest.HybridConfig{Groups: c.groups, Blocks: c.blocks})
			m := env.Manager
			type req struct {
				id      blocktable.SeqID
				tokens  []int32 // prompt and output so far: what a readmission computes again
				left    int
				resumed bool
			}
			var waiting, running []*req
			for i := range 4 {
				waiting = append(waiting, &req{id: env.Seq(fmt.Sprint("r", i)), tokens: kvtest.MustTokens("0..11"), left: 10})
			}
			byID := func(id blocktable.SeqID) *req {
				for _, r := range running {
					if r.id == id {
						return r
					}
				}
				t.Fatalf("victim %d is not running", id)
				return nil
			}
			for steps := 0; len(waiting)+len(running) > 0; steps++ {
				require.Less(t, steps, 200, "no progress:\n%s", env.Dump())
				for len(waiting) > 0 {
					r := waiting[0]
					_, err := m.Admit(r.id, &hybrid.Request{Prompt: r.tokens, MaxTokens: len(r.tokens) + r.left, Resumed: r.resumed})
					if errors.Is(err, blocks.ErrOutOfBlocks) {
						break
					}
					require.NoError(t, err)
					waiting, running = waiting[1:], append(running, r)
				}
				for i := 0; i < len(running); i++ {
					r := running[i]
					tok := []int32{int32(100 + r.left)}
					err := m.Append(r.id, tok)
					for errors.Is(err, blocks.ErrOutOfBlocks) && len(running) > 1 {
						got, perr := m.Preempt(blocktable.PreemptRequest{Need: 1, Protect: []blocktable.SeqID{r.id}}, nil)
						require.NoError(t, perr)
						for _, p := range got {
							v := byID(p.Seq)
							v.resumed = true
							running = removeReq(running, v)
							waiting = append([]*req{v}, waiting...)
						}
						i = slices.Index(running, r)
						err = m.Append(r.id, tok)
					}
					if errors.Is(err, blocks.ErrOutOfBlocks) { // alone and stuck: preempt itself
						_, err = m.PreemptSeq(r.id, blocktable.Recompute)
						require.NoError(t, err)
						r.resumed = true
						running = removeReq(running, r)
						waiting = append([]*req{r}, waiting...)
						i--
						continue
					}
					require.NoError(t, err)
					r.tokens = append(r.tokens, tok...)
					if r.left--; r.left == 0 {
						require.NoError(t, m.Finish(r.id))
						running = removeReq(running, r)
						i--
					}
				}
				require.NoError(t, env.Check(), "step %d:\n%s", steps, env.Dump())
			}
			st := m.Stats()
			require.NotZero(t, st.HitTokens, "the shared prompt is hit")
			if c.preempt {
				require.NotEmpty(t, env.Preemptions.Choices())
				require.NotZero(t, st.ResumedPromptTokens)
			} else {
				require.Zero(t, st.Preemptions)
			}
		})
	}
}

func removeReq[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// The kit fails a test that leaves a hybrid sequence running, naming each block still
// held with the sequence and the group holding it; a test that finishes everything passes.
func TestHybridLeakDetection(t *testing.T) {
	f := &fakeTB{}
	env := kvtest.NewHybrid(f, kvtest.HybridConfig{})
	_, err := env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	require.NoError(t, env.Manager.Fork(env.Seq("a"), env.Seq("b")))
	require.NoError(t, env.Manager.Finish(env.Seq("a")))
	f.finish()
	rep := f.report()
	require.Contains(t, rep, "sequences never finished or preempted: b")
	require.Contains(t, rep, "block 1: refcount 1, held by b (group 0) (and cached)")
	require.Contains(t, rep, "block 4: refcount 1, held by b (group 1)")
	require.Equal(t, 4, strings.Count(rep, "\n  block "))

	f = &fakeTB{}
	env = kvtest.NewHybrid(f, kvtest.HybridConfig{})
	_, err = env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	require.NoError(t, env.Manager.Fork(env.Seq("a"), env.Seq("b")))
	b := env.Blocks()
	require.Equal(t, kvtest.HybridBlocks{Capacity: 16, Free: 12, Held: 4, HeldPerGroup: []int{4, 4}, CachedPerGroup: []int{1, 1}}, b,
		"a fork holds the same blocks: counted once in Held, once per table per group")
	env.FinishAll()
	require.Equal(t, kvtest.HybridBlocks{Capacity: 16, Free: 14, Evictable: 2, HeldPerGroup: []int{0, 0}, CachedPerGroup: []int{1, 1}}, env.Blocks())
	f.finish()
	require.Empty(t, f.report())
}

// With lower tiers the kit checks their books, and a block a transfer never completed
// holds is a leak, named as such.
func TestHybridTiersLeakDetection(t *testing.T) {
	tiers := &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteThrough}}}
	f := &fakeTB{}
	env := kvtest.NewHybrid(f, kvtest.HybridConfig{Tiers: tiers})
	_, err := env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	require.NoError(t, env.Check())
	require.NoError(t, env.Manager.Finish(env.Seq("a")))
	f.finish()
	rep := f.report()
	require.Contains(t, rep, "block 1: refcount 1, held by a transfer in flight (and cached)")
	require.Equal(t, 2, strings.Count(rep, "\n  block "), "the full block of each group, held by its write-through copy")

	f = &fakeTB{}
	env = kvtest.NewHybrid(f, kvtest.HybridConfig{Tiers: tiers})
	_, err = env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	for _, p := range env.Manager.TakePlans(nil) {
		_, err := env.Manager.CompleteTransfer(p.ID, true)
		require.NoError(t, err)
	}
	env.FinishAll()
	require.Equal(t, 2, env.Manager.TierStats(1).Resident)
	f.finish()
	require.Empty(t, f.report())
}

// A sequence swapped out and never resumed or finished holds the host tier: the kit names
// it (swapped) in the leak report, Dump shows it, and FinishAll finishes it, as the plain
// kit does. Before, the hybrid Manager's Seqs left swapped sequences out, so the report
// passed with a hold still on the tier and FinishAll left it there.
func TestHybridSwappedSequenceIsALeak(t *testing.T) {
	tiers := &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8}}}
	f := &fakeTB{}
	env := kvtest.NewHybrid(f, kvtest.HybridConfig{Tiers: tiers})
	_, err := env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	_, err = env.Manager.PreemptSeq(env.Seq("a"), blocktable.Swap)
	require.NoError(t, err)
	require.NoError(t, env.Check())
	require.Contains(t, env.Dump(), "seq a tokens=6 computed=0 hit=0 swapped")
	f.finish()
	require.Contains(t, f.report(), "sequences never finished or preempted: a (swapped)")

	f = &fakeTB{}
	env = kvtest.NewHybrid(f, kvtest.HybridConfig{Tiers: tiers})
	_, err = env.Manager.Admit(env.Seq("a"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8})
	require.NoError(t, err)
	_, err = env.Manager.PreemptSeq(env.Seq("a"), blocktable.Swap)
	require.NoError(t, err)
	env.FinishAll()
	require.False(t, env.Manager.Contains(env.Seq("a")))
	for _, p := range env.Manager.TakePlans(nil) {
		_, err := env.Manager.CompleteTransfer(p.ID, true)
		require.NoError(t, err)
	}
	f.finish()
	require.Empty(t, f.report())
}
