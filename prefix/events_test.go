package prefix

import (
	"bytes"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type storedCopy struct {
	hashes [][]byte
	parent []byte
	ids    []blocks.ID
	tokens []int32
	bs     int
	ns     Namespace
	mm     [][]string
	offs   [][]int
}

type removedCopy struct {
	hashes [][]byte
	ids    []blocks.ID
}

// eventLog copies every event, as an observer that keeps them must.
type eventLog struct {
	events []any
}

func (l *eventLog) BlockStored(e *BlockStored) {
	c := storedCopy{parent: bytes.Clone(e.Parent), ids: append([]blocks.ID(nil), e.Blocks...),
		tokens: append([]int32(nil), e.Tokens...), bs: e.BlockSize, ns: e.Namespace}
	for i := range e.Blocks {
		c.hashes = append(c.hashes, bytes.Clone(e.Hash(i)))
	}
	for _, m := range e.MM {
		c.mm = append(c.mm, append([]string(nil), m...))
	}
	for _, o := range e.MMOffsets {
		c.offs = append(c.offs, append([]int(nil), o...))
	}
	l.events = append(l.events, c)
}

func (l *eventLog) BlockRemoved(e *BlockRemoved) {
	c := removedCopy{ids: append([]blocks.ID(nil), e.Blocks...)}
	for i := range e.Blocks {
		c.hashes = append(c.hashes, bytes.Clone(e.Hash(i)))
	}
	l.events = append(l.events, c)
}

func (l *eventLog) AllBlocksCleared() { l.events = append(l.events, "cleared") }

// hasherChain computes the hashes a hasher gives blocks 0..n of p, independently of the index.
func hasherChain(h Hasher, p Prompt, n int) [][]byte {
	parent := make([]byte, h.Size())
	h.Root(parent)
	var out [][]byte
	for b := 0; b < n; b++ {
		e := Extra{LoRA: p.Namespace.LoRA}
		for _, m := range p.MM {
			if m.Offset < (b+1)*testBS && m.Offset+m.Length > b*testBS {
				e.MM = append(e.MM, m.Hash)
			}
		}
		if b == 0 {
			e.Salt = p.Namespace.Salt
		}
		dst := make([]byte, h.Size())
		h.Block(dst, parent, p.Tokens[b*testBS:(b+1)*testBS], e)
		out = append(out, dst)
		parent = dst
	}
	return out
}

func TestEvents(t *testing.T) {
	for _, h := range []Hasher{Fast64{}, NewSHA256()} {
		t.Run(h.Name(), func(t *testing.T) {
			log := &eventLog{}
			pool, x := newTestIndex(t, 32, WithHasher(h), WithObserver(log))
			p := Prompt{Namespace: Namespace{LoRA: "ad", Salt: "t1"}, Tokens: toks(1, 3*testBS+1),
				MM: []MMInput{{Hash: "img", Offset: testBS + 2, Length: 3}}}
			want := hasherChain(h, p, 3)

			// Commit the first block, then the next two: two events, the second chained.
			r := &request{p: p}
			var err error
			r.ids, err = pool.Allocate(nil, 4)
			require.NoError(t, err)
			_, err = x.Commit(&r.cur, &r.p, r.ids[:1])
			require.NoError(t, err)
			_, err = x.Commit(&r.cur, &r.p, r.ids[1:3])
			require.NoError(t, err)
			require.Len(t, log.events, 2)
			first, second := log.events[0].(storedCopy), log.events[1].(storedCopy)
			assert.Equal(t, storedCopy{hashes: want[:1], ids: r.ids[:1], tokens: p.Tokens[:testBS], bs: testBS, ns: p.Namespace}, first)
			assert.Equal(t, storedCopy{hashes: want[1:3], parent: want[0], ids: r.ids[1:3], tokens: p.Tokens[testBS : 3*testBS],
				bs: testBS, ns: p.Namespace, mm: [][]string{{"img"}, {"img"}}}, second)
			for i, id := range r.ids[:3] {
				got, ok := x.Hash(nil, id)
				assert.True(t, ok)
				assert.Equal(t, want[i], got)
			}

			// A duplicate stores nothing and says nothing.
			dup, err := pool.Allocate(nil, 1)
			require.NoError(t, err)
			var c Cursor
			_, err = x.Commit(&c, &r.p, dup)
			require.NoError(t, err)
			assert.Len(t, log.events, 2)
			require.NoError(t, pool.Release(dup...))

			require.NoError(t, x.Release(r.ids))
			assert.Equal(t, 3, x.Evict(3))
			require.Len(t, log.events, 3)
			assert.Equal(t, removedCopy{hashes: [][]byte{want[2], want[1], want[0]}, ids: []blocks.ID{r.ids[2], r.ids[1], r.ids[0]}}, log.events[2])

			admit(t, x, pool, p).finish(t, x)
			require.NoError(t, x.Reset())
			assert.Equal(t, "cleared", log.events[len(log.events)-1])
		})
	}
}

// A hasher that gives every block the same hash changes nothing about what matches: hashes
// label blocks, tokens decide equality.
type constHasher struct{}

func (constHasher) Name() string                            { return "const" }
func (constHasher) Size() int                               { return 4 }
func (constHasher) Root(dst []byte)                         { copy(dst, "root") }
func (constHasher) Block(dst, _ []byte, _ []int32, _ Extra) { copy(dst, "same") }

func TestCollisionsGiveNoFalseHit(t *testing.T) {
	for name, opt := range map[string]Option{"stub hasher": WithHasher(constHasher{}), "all table keys equal": withKeyMask(0)} {
		t.Run(name, func(t *testing.T) {
			pool, x := newTestIndex(t, 64, opt)
			a := cat(toks(1, testBS), toks(10, testBS))
			b := cat(toks(1, testBS), toks(20, testBS))
			c := cat(toks(2, testBS), toks(10, testBS))
			for _, tk := range [][]int32{a, b, c} {
				admit(t, x, pool, Prompt{Tokens: tk}).finish(t, x)
			}
			assert.Equal(t, 5, x.Stats().Cached, "a and b share their first block; c shares nothing")
			for _, tk := range [][]int32{a, b, c} {
				got, _ := x.Peek(nil, &Prompt{Tokens: tk}, WholePrompt)
				assert.Len(t, got, 2)
			}
			got, _ := x.Peek(nil, &Prompt{Tokens: cat(toks(1, testBS), toks(30, testBS))}, false)
			assert.Len(t, got, 1, "colliding siblings are told apart by their tokens")
			got, _ = x.Peek(nil, &Prompt{Tokens: toks(3, 2*testBS)}, WholePrompt)
			assert.Empty(t, got)
			assert.Equal(t, 5, x.Evict(10))
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestHashers(t *testing.T) {
	tk := toks(7, 16)
	for _, h := range []Hasher{Fast64{}, NewSHA256()} {
		t.Run(h.Name(), func(t *testing.T) {
			root := make([]byte, h.Size())
			h.Root(root)
			hash := func(parent []byte, tk []int32, e Extra) []byte {
				dst := make([]byte, h.Size())
				h.Block(dst, parent, tk, e)
				return dst
			}
			base := hash(root, tk, Extra{})
			assert.Equal(t, base, hash(root, tk, Extra{}), "deterministic")
			other := append([]int32(nil), tk...)
			other[15]++
			distinct := [][]byte{
				base,
				hash(base, tk, Extra{}),
				hash(root, other, Extra{}),
				hash(root, tk, Extra{LoRA: "a"}),
				hash(root, tk, Extra{Salt: "a"}),
				hash(root, tk, Extra{MM: []string{"a"}}),
				hash(root, tk, Extra{MM: []string{"a", "b"}}),
				hash(root, tk, Extra{MM: []string{"b", "a"}}),
			}
			for i := range distinct {
				for j := range i {
					assert.NotEqual(t, distinct[i], distinct[j], "inputs %d and %d", i, j)
				}
			}
		})
	}
	// The default scheme is part of the event format: pin it.
	dst := make([]byte, 8)
	root := make([]byte, 8)
	Fast64{}.Root(root)
	Fast64{}.Block(dst, root, toks(0, 16), Extra{})
	assert.Equal(t, "6b7670616765a5a5", hexs(root))
	assert.Equal(t, "ea30816fccf34148", hexs(dst))
}

func hexs(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
