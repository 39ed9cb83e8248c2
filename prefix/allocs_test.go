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

// Hash allocates nothing in steady state in any configuration, including the default one
// (seeded table keys, Fast64, no observer), where it recomputes the hash from the path.
func TestHashAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	mm := []MMInput{{Hash: "img", Offset: 6, Length: 9}}
	for _, tc := range []struct {
		name string
		opts []Option
		mm   []MMInput
	}{
		{name: "default, no observer"},
		{name: "default, multimodal", mm: mm},
		{name: "default, multimodal pairs", opts: []Option{WithMMKeyForm(MMKeyIdentifierOffset)}, mm: mm},
		{name: "observer", opts: []Option{WithObserver(nopObserver{})}},
		{name: "sha256, no observer", opts: []Option{WithHasher(NewSHA256())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 40, tc.opts...)
			r := admit(t, x, pool, Prompt{Namespace: Namespace{LoRA: "l", Salt: "s"}, Tokens: toks(1, 32*testBS), MM: tc.mm})
			dst := make([]byte, 0, 64)
			var ok bool
			assert.Zero(t, testing.AllocsPerRun(100, func() {
				for _, id := range r.ids {
					dst, ok = x.Hash(dst[:0], id)
				}
			}))
			require.True(t, ok)
			require.NotEmpty(t, dst)
		})
	}
}
