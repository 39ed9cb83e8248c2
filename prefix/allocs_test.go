package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type nopObserver struct{}

func (nopObserver) BlockStored(*BlockStored)   {}
func (nopObserver) BlockRemoved(*BlockRemoved) {}
func (nopObserver) AllBlocksCleared()          {}

// The hot paths allocate nothing in steady state: a request's whole life (match, acquire,
// allocate with eviction, commit block by block, release), with and without an observer.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	for name, opts := range map[string][]Option{
		"no observer":     nil,
		"observer":        {WithObserver(nopObserver{})},
		"sha256 observer": {WithHasher(NewSHA256()), WithObserver(nopObserver{})},
	} {
		t.Run(name, func(t *testing.T) {
			pool, x := newTestIndex(t, 24, opts...)
			var prompts []Prompt
			for i := range 8 {
				prompts = append(prompts, Prompt{Tokens: cat(toks(1, 4*testBS), toks(int32(100*i), 4*testBS+1))})
			}
			ids := make([]blocks.ID, 0, 16)
			step := 0
			life := func() {
				p := &prompts[step%len(prompts)]
				step++
				var cur Cursor
				ids, cur = x.Peek(ids[:0], p, LeaveOne)
				hit := len(ids)
				if err := x.Acquire(ids); err != nil {
					t.Fatal(err)
				}
				var err error
				if ids, err = pool.Allocate(ids, 9-hit); err != nil {
					t.Fatal(err)
				}
				for b := hit; b < 8; b++ {
					if _, err := x.Commit(&cur, p, ids[b:b+1]); err != nil {
						t.Fatal(err)
					}
				}
				if err := x.Release(ids); err != nil {
					t.Fatal(err)
				}
			}
			for range 64 {
				life() // warm up: scratch buffers and the eviction heap reach their size
			}
			assert.Zero(t, testing.AllocsPerRun(200, life))
			assert.NotZero(t, x.Stats().Evictions, "the loop evicts")
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	pool, x := newTestIndex(t, 300)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 256*testBS)})
	r.finish(t, x)
	dst := make([]blocks.ID, 0, 256)
	p := &Prompt{Tokens: toks(1, 256*testBS)}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		dst, _ = x.Peek(dst[:0], p, WholePrompt)
	}))
	assert.Len(t, dst, 256)
}
