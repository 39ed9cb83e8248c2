package prefix

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// commitHeld's short path for a decode step's commit (commitUnderLeaf), and for a plain
// prompt commitNext's (falling back to commitHeld where it declines, as a Manager does),
// against commit's general one, in lockstep over two indexes: sequences admitted over shared prefixes,
// decoding a token at a time under memory pressure (allocations evict), some decoding the
// same tokens (so their blocks are duplicates, and a cursor's node has children), some
// with a retention priority or a time limit, finishing or dropped when the pool runs out;
// with an observer, another hasher's stored hashes, an eviction history, a host tier.
// Every commit returns the same result and cursor, and both indexes end every step in the
// same state (nodes, holders, hints, hits, eviction set, events).
func TestCommitUnderLeafMatchesCommit(t *testing.T) {
	const bs = 16
	short, next := 0, 0
	for variant := range 5 {
		for seed := range uint64(6) {
			rng := rand.New(rand.NewPCG(seed, uint64(variant)))
			var logA, logB eventLog
			optsA, optsB := []Option{WithSeed(9)}, []Option{WithSeed(9)}
			switch variant {
			case 1:
				optsA, optsB = append(optsA, WithObserver(&logA)), append(optsB, WithObserver(&logB))
			case 2:
				optsA, optsB = append(optsA, WithEvictionHistory(32)), append(optsB, WithEvictionHistory(32))
			case 3: // stored event hashes of another hasher
				optsA = append(optsA, WithHasher(NewSHA256()), WithObserver(&logA))
				optsB = append(optsB, WithHasher(NewSHA256()), WithObserver(&logB))
			case 4: // lower tiers: every commit is written through to the host
				tiers := func() Option {
					return WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 16, Write: WriteThrough}}, BlockBytes: 1000})
				}
				optsA, optsB = append(optsA, tiers()), append(optsB, tiers())
			}
			poolA, err := blocks.New(40, blocks.WithNullBlock())
			require.NoError(t, err)
			a, err := New(poolA, bs, optsA...)
			require.NoError(t, err)
			poolB, err := blocks.New(40, blocks.WithNullBlock())
			require.NoError(t, err)
			b, err := New(poolB, bs, optsB...)
			require.NoError(t, err)

			type seq struct {
				p       Prompt
				ids     []blocks.ID
				curA    Cursor
				curB    Cursor
				copycat bool // decodes the same tokens as every other copycat of its prefix
				prefix  int32
			}
			var running []*seq
			release := func(i int) {
				s := running[i]
				require.NoError(t, a.Release(s.ids))
				require.NoError(t, b.Release(s.ids))
				running = append(running[:i], running[i+1:]...)
			}
			for step := range 600 {
				if len(running) < 4 && rng.IntN(3) == 0 {
					pre := int32(rng.IntN(3))
					s := &seq{prefix: pre, copycat: rng.IntN(2) == 0}
					s.p.Tokens = cat(toks(1000*pre, bs*rng.IntN(3)), toks(int32(100000+1000*step), rng.IntN(2*bs)))
					switch rng.IntN(6) {
					case 0:
						s.p.Retention = Retention{Priority: 60}
					case 1:
						s.p.Retention = Retention{Priority: 70, Until: uint64(step + 50)}
					}
					idsA, curA := a.Peek(nil, &s.p, LeaveOne)
					idsB, curB := b.Peek(nil, &s.p, LeaveOne)
					require.Equal(t, idsA, idsB)
					require.NoError(t, a.Acquire(idsA))
					require.NoError(t, b.Acquire(idsB))
					need := (len(s.p.Tokens)+bs-1)/bs - len(idsA)
					gotA, errA := poolA.Allocate(idsA, need)
					gotB, errB := poolB.Allocate(idsB, need)
					require.Equal(t, gotA, gotB)
					require.Equal(t, errA == nil, errB == nil)
					if errA != nil {
						require.True(t, errors.Is(errA, blocks.ErrOutOfBlocks))
						require.NoError(t, a.Release(idsA))
						require.NoError(t, b.Release(idsB))
					} else {
						s.ids, s.curA, s.curB = gotA, curA, curB
						full := len(s.p.Tokens) / bs
						rA, err := a.Commit(&s.curA, &s.p, s.ids[curA.Blocks():full])
						require.NoError(t, err)
						rB, err := b.Commit(&s.curB, &s.p, s.ids[curB.Blocks():full])
						require.NoError(t, err)
						require.Equal(t, rA, rB)
						running = append(running, s)
					}
				} else if len(running) > 0 {
					i := rng.IntN(len(running))
					s := running[i]
					if rng.IntN(40) == 0 {
						release(i)
					} else {
						tok := int32(5000000 + 1000*step + i)
						if s.copycat {
							tok = 7000000 + 1000*s.prefix + int32(len(s.p.Tokens))
						}
						s.p.Tokens = append(s.p.Tokens, tok)
						if len(s.p.Tokens) > bs*len(s.ids) {
							gotA, errA := poolA.Allocate(s.ids, 1)
							gotB, errB := poolB.Allocate(s.ids, 1)
							require.Equal(t, gotA, gotB)
							require.Equal(t, errA == nil, errB == nil)
							if errA != nil {
								s.p.Tokens = s.p.Tokens[:len(s.p.Tokens)-1]
								release(i)
								requireSameIndex(t, a, b, step)
								continue
							}
							s.ids = gotA
						}
						if len(s.p.Tokens)%bs == 0 {
							full := len(s.p.Tokens) / bs
							ids := s.ids[full-1 : full]
							if s.curA.Blocks() == full-1 && a.leafToExtend(&s.curA, &s.p, ids[0]) != 0 {
								short++
							}
							var rA CommitResult
							var errA error
							if plain := len(s.p.MM) == 0 && s.p.Retention == (Retention{}); plain && a.commitNext(&s.curA, s.p.Tokens, ids[0]) {
								rA = CommitResult{Stored: 1} // a Manager's decode commit of a plain prompt
								next++
							} else {
								rA, errA = a.commitHeld(&s.curA, &s.p, ids)
							}
							rB, errB := b.commit(&s.curB, &s.p, ids, true)
							require.Equal(t, errA, errB)
							require.Equal(t, rA, rB, "step %d", step)
							require.Equal(t, s.curA, s.curB, "step %d", step)
						}
					}
				}
				requireSameIndex(t, a, b, step)
				require.Equal(t, a.Stats(), b.Stats(), "step %d", step)
				require.Equal(t, logA.events, logB.events, "step %d", step)
			}
		}
	}
	if !invariant.Enabled {
		require.Greater(t, short, 100, "the short path must be taken")
		require.Greater(t, next, 100, "the plain path (commitNext) must be taken")
	}
}
