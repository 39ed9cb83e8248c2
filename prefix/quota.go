package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/evict"
)

// WithQuotas lets SetQuota cap namespaces (tenants, salts): the index then keeps, beside
// its eviction policy, one more policy of the same kind per capped namespace, ordering
// that namespace's own candidates, and the namespace of every cached block (4 bytes a
// block). Without it SetQuota fails. Quotas are meant for a handful of tenants: each
// capped namespace costs a policy sized for the pool.
func WithQuotas() Option { return func(c *config) { c.quotas = true } }

// SetQuota caps how many cached blocks namespace ns may hold (held ones included): when a
// Commit of ns takes it beyond max, its own least valuable evictable blocks (in the
// index's policy order) are evicted until it is back at max, or until none of them is
// evictable (blocks its running requests hold stay; the namespace is over quota until
// they are released and its next commit). Other namespaces are never evicted for it. A
// max below 0 removes the cap. Lowering a cap takes effect at the namespace's next Commit.
// It fails with ErrInvalidArgument in an index built without WithQuotas.
func (x *Index) SetQuota(ns Namespace, max int) error {
	q := x.ctl.quota
	if q == nil {
		return fmt.Errorf("%w: quotas need an index built WithQuotas", ErrInvalidArgument)
	}
	slot, ok := q.slots[ns]
	if !ok && max < 0 {
		return nil
	}
	var sub evict.Policy // built before anything changes: a failing factory leaves all as it was
	if max >= 0 && (!ok || q.ns[slot].sub == nil) {
		var err error
		if sub, err = q.factory(x.nb, x.clock); err != nil {
			return fmt.Errorf("%w: eviction policy: %w", ErrInvalidArgument, err)
		}
		if sub == nil {
			return fmt.Errorf("%w: the eviction policy factory returned nil", ErrInvalidArgument)
		}
	}
	if !ok {
		slot = int32(len(q.ns))
		q.ns = append(q.ns, nsQuota{ns: ns})
		q.slots[ns] = slot
	}
	qs := &q.ns[slot]
	qs.max = max
	if sub != nil {
		qs.sub = sub
		// Blocks of ns cached before it had a cap: count them and order its candidates.
		for n := int32(1); int(n) <= x.nb; n++ {
			if x.nodes[n].flags&flagCached != 0 && q.blockSlot[n] == 0 && x.nsOfBlock(n) == ns {
				x.setSlot(n, slot)
			}
		}
	}
	return nil
}

// Quota returns ns's cap and how many cached blocks it holds; ok is false without a cap.
func (x *Index) Quota(ns Namespace) (max, cached int, ok bool) {
	q := x.ctl.quota
	if q == nil {
		return 0, 0, false
	}
	slot, found := q.slots[ns]
	if !found || q.ns[slot].max < 0 {
		return 0, 0, false
	}
	return q.ns[slot].max, q.ns[slot].cached, true
}

// quotas is the state behind WithQuotas. Slot 0 of ns is "no cap".
type quotas struct {
	factory   evict.Factory
	ns        []nsQuota
	slots     map[Namespace]int32
	blockSlot []int32 // per node: the quota slot of a cached block, 0 for none
	force     int32   // while enforcing: Victim takes from this slot's policy
	inner     evict.Policy
}

type nsQuota struct {
	ns     Namespace
	max    int
	cached int
	sub    evict.Policy // this namespace's candidates, in the index's policy order
}

// initQuotas wraps the index's policy so that capped namespaces' candidates are ordered
// apart too.
func (x *Index) initQuotas(f evict.Factory) {
	if f == nil {
		f = func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLRU(n) }
	}
	q := &quotas{factory: f, ns: []nsQuota{{max: -1}}, slots: map[Namespace]int32{},
		blockSlot: make([]int32, x.nb+1), inner: x.policy}
	x.ctl.quota = q
	x.policy = &quotaPolicy{q: q}
}

// nsOfBlock walks up from block node n to its root's namespace (SetQuota only).
func (x *Index) nsOfBlock(n int32) Namespace {
	for x.isBlock(n) {
		n = x.nodes[n].parent
	}
	return x.root(n).ns
}

// setSlot files cached block node n under quota slot s.
func (x *Index) setSlot(n, s int32) {
	q := x.ctl.quota
	q.blockSlot[n] = s
	qs := &q.ns[s]
	qs.cached++
	if evictable(&x.nodes[n]) {
		qs.sub.Add(x.evictEntry(n))
	}
}

// quotaInserted files the new block node n, child of at, under its namespace's slot.
func (x *Index) quotaInserted(n, at int32) {
	q := x.ctl.quota
	var s int32
	if x.isBlock(at) {
		s = q.blockSlot[at]
	} else {
		s = q.slots[x.root(at).ns]
	}
	if s != 0 && q.ns[s].sub != nil {
		q.blockSlot[n] = s
		q.ns[s].cached++
	}
}

// quotaRemoved takes block node n, leaving the tree, out of its slot's count.
func (x *Index) quotaRemoved(n int32) {
	q := x.ctl.quota
	if s := q.blockSlot[n]; s != 0 {
		q.ns[s].cached--
		q.blockSlot[n] = 0
	}
}

// enforceQuota evicts the namespace of block node n's own blocks while it is over its cap.
func (x *Index) enforceQuota(n int32) {
	q := x.ctl.quota
	s := q.blockSlot[n]
	if s == 0 {
		return
	}
	qs := &q.ns[s]
	if qs.max < 0 || qs.cached <= qs.max {
		return
	}
	q.force, x.ctl.cause = s, EvictQuota
	x.evictUpTo(qs.cached - qs.max)
	q.force, x.ctl.cause = 0, EvictPolicy
}

func (x *Index) quotaReset() {
	q := x.ctl.quota
	clear(q.blockSlot)
	for i := range q.ns {
		q.ns[i].cached = 0
		if q.ns[i].sub != nil {
			q.ns[i].sub.Reset()
		}
	}
}

// quotaPolicy is the index's policy when quotas are on: the inner policy over every
// candidate, and a policy per capped namespace over that namespace's own.
type quotaPolicy struct{ q *quotas }

func (p *quotaPolicy) Name() string { return p.q.inner.Name() }

func (p *quotaPolicy) sub(key int32) evict.Policy {
	if s := p.q.blockSlot[key+1]; s != 0 {
		return p.q.ns[s].sub
	}
	return nil
}

func (p *quotaPolicy) Add(e evict.Entry) {
	p.q.inner.Add(e)
	if s := p.sub(e.Key); s != nil {
		s.Add(e)
	}
}

func (p *quotaPolicy) Remove(key int32) bool {
	if s := p.sub(key); s != nil {
		s.Remove(key)
	}
	return p.q.inner.Remove(key)
}

func (p *quotaPolicy) Victim() (int32, bool) {
	if f := p.q.force; f != 0 {
		k, ok := p.q.ns[f].sub.Victim()
		if ok {
			p.q.inner.Remove(k)
		}
		return k, ok
	}
	k, ok := p.q.inner.Victim()
	if ok {
		if s := p.sub(k); s != nil {
			s.Remove(k)
		}
	}
	return k, ok
}

func (p *quotaPolicy) Len() int { return p.q.inner.Len() }

func (p *quotaPolicy) Reset() {
	p.q.inner.Reset()
	for i := range p.q.ns {
		if p.q.ns[i].sub != nil {
			p.q.ns[i].sub.Reset()
		}
	}
}
