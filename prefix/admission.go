package prefix

import (
	"cmp"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// Waiting is one request of a scheduler's waiting queue, for QueueOrder.
type Waiting struct {
	Prompt *Prompt
	// Since is when the request joined the queue, on the scheduler's logical clock.
	Since uint64
}

// QueueOrder orders a waiting queue so that requests with more of their prompt cached go
// first, without starving the rest: only the first Window requests are reordered (the
// others keep their places behind them, first come first served), and a request that has
// waited MaxWait or longer goes ahead of every request of the window that has not, in
// arrival order. A request therefore waits at most MaxWait after it enters the window,
// plus the time to serve the aged requests ahead of it; it enters the window in arrival
// order. It is a helper, not a policy: it looks at the index (Peek, which counts and
// touches nothing) and returns an order; the scheduler decides what to admit.
//
// A QueueOrder keeps scratch space between calls, so Order allocates nothing once it has
// seen a queue of the same length. It is not safe for concurrent use.
type QueueOrder struct {
	// Window is how many requests at the head of the queue may be reordered; 0 means all.
	Window int
	// MaxWait is the age (now - Since) at which a request stops yielding to warmer ones;
	// 0 means requests never age (pure longest-cached-prefix-first within the window).
	MaxWait uint64
	// LeaveOne caps each hit as the Manager does (at least one prompt token to compute).
	LeaveOne bool

	keys []orderKey
	hits []blocks.ID
}

type orderKey struct {
	class  uint8  // 0 aged, 1 in the window, 2 behind it
	cached uint64 // cached tokens (class 1 only)
	pos    int
}

// Order appends to dst the positions of q in the order to consider them and returns dst.
// now is the scheduler's current logical time.
func (o *QueueOrder) Order(x *Index, q []Waiting, now uint64, dst []int) []int {
	w := o.Window
	if w <= 0 || w > len(q) {
		w = len(q)
	}
	keys := o.keys[:0]
	for i := range q {
		k := orderKey{class: 2, pos: i}
		if i < w {
			k.class = 1
			if o.MaxWait > 0 && now >= q[i].Since && now-q[i].Since >= o.MaxWait {
				k.class = 0
			} else {
				o.hits, _ = x.Peek(o.hits[:0], q[i].Prompt, HitLimit(o.LeaveOne))
				k.cached = uint64(len(o.hits)) * uint64(x.bs)
			}
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys[:w], func(a, b orderKey) int {
		if c := cmp.Compare(a.class, b.class); c != 0 {
			return c
		}
		if c := cmp.Compare(b.cached, a.cached); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for _, k := range keys {
		dst = append(dst, k.pos)
	}
	o.keys = keys
	return dst
}

// Share says, for one request of a batch, which request of the batch should compute the
// prefix it shares with others that is not cached yet.
type Share struct {
	// Leader is the position in the batch of the request that computes the shared uncached
	// prefix: the request itself when it leads (or shares nothing).
	Leader int
	// Blocks is the number of full blocks past the cached prefix that this request shares
	// with its leader (0 for a leader).
	Blocks int
}

// BatchSharing groups the requests of one batch whose prompts continue their cached
// prefix with the same uncached block, as SGLang's in-batch prefix sharing does: within
// each group the first request (in batch order) leads, and the scheduler can run it alone
// first, so that the others hit its blocks once it has committed them instead of each
// computing the same tokens. Requests with multimodal inputs lead their own group.
//
// It appends one Share per request to dst and returns dst. It looks at the index (Peek)
// and changes nothing; a BatchSharing keeps scratch space, so it allocates nothing once
// it has seen a batch of the same size. It is not safe for concurrent use.
type BatchSharing struct {
	// LeaveOne caps each hit as the Manager does.
	LeaveOne bool

	ents []shareEnt
	hits []blocks.ID
}

type shareEnt struct {
	key  uint64 // chained key of the first uncached block; 0 = none (leads alone)
	node int32  // cursor node where the hit ends
	hit  int    // cached blocks
	pos  int
}

// Group appends to dst one Share per prompt of batch, in batch order.
func (g *BatchSharing) Group(x *Index, batch []*Prompt, dst []Share) []Share {
	ents := g.ents[:0]
	for i, p := range batch {
		var c Cursor
		g.hits, c = x.Peek(g.hits[:0], p, HitLimit(g.LeaveOne))
		e := shareEnt{hit: len(g.hits), node: c.node, pos: i}
		limit := len(p.Tokens)
		if g.LeaveOne {
			limit--
		}
		if m := e.hit; len(p.MM) == 0 && (m+1)*x.bs <= limit && !(x.cfg.requireNS && p.Namespace == (Namespace{})) {
			e.key = x.nextKey(x.rootOf(p.Namespace), c, p.Namespace, p.Tokens[m*x.bs:(m+1)*x.bs], m == 0, nil) | 1
		}
		ents = append(ents, e)
	}
	g.ents = ents
	base := len(dst)
	for i := range batch {
		dst = append(dst, Share{Leader: i})
	}
	slices.SortFunc(ents, func(a, b shareEnt) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for i := 0; i < len(ents); {
		j := i + 1
		for j < len(ents) && ents[j].key == ents[i].key {
			j++
		}
		if ents[i].key != 0 {
			g.lead(x, batch, ents[i:j], dst[base:])
		}
		i = j
	}
	return dst
}

// lead assigns leaders within one run of requests whose first uncached blocks have the
// same key (sorted by position): a request follows the first earlier one that stands at
// the same node with the same next block's tokens and namespace (keys only pick the run).
func (g *BatchSharing) lead(x *Index, batch []*Prompt, run []shareEnt, out []Share) {
	for i := 1; i < len(run); i++ {
		f := &run[i]
		pf := batch[f.pos]
		for j := 0; j < i; j++ {
			l := &run[j]
			if out[l.pos].Leader != l.pos {
				continue // a follower: its leader was tried first
			}
			pl := batch[l.pos]
			if l.node != f.node || l.hit != f.hit || pl.Namespace != pf.Namespace {
				continue
			}
			n := sharedBlocks(pl.Tokens, pf.Tokens, f.hit, x.bs)
			if n > 0 {
				out[f.pos] = Share{Leader: l.pos, Blocks: n}
				break
			}
		}
	}
}

// sharedBlocks counts the full blocks from block from on where a and b agree.
func sharedBlocks(a, b []int32, from, bs int) int {
	n := 0
	for k := from; (k+1)*bs <= len(a) && (k+1)*bs <= len(b); k++ {
		if !slices.Equal(a[k*bs:(k+1)*bs], b[k*bs:(k+1)*bs]) {
			break
		}
		n++
	}
	return n
}
