package sim

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

func init() {
	registerScheme(schemeDef{name: Paged, blocks: true, build: func(c *Config, s *Scheme, seqs []seq) (allocator, error) {
		return newPaged(c, *s, seqs)
	}})
}

// paged drives this library's blocktable.Manager: blocks on demand, prefix sharing through
// the prefix index when enabled, and preemption in recompute mode, by the scheme's
// preemption policy, when a running request cannot grow.
type paged struct {
	m         *blocktable.Manager
	pool      *blocks.Pool
	seqs      []seq
	seed      uint64
	blockSize int
	sharing   bool
	capacity  int // tokens

	live     int   // running requests
	internal int64 // sum of the running requests' last-block tails
	tokens   int64 // sum of the running requests' token states (shared ones counted per holder)
	prompt   []int32
	pre      []blocktable.Preempted
	req      blocktable.Request
	tiers    Tiers
	clock    tierClock
	// readmitted counts the prompt tokens of readmissions after preemption, which the
	// Manager must have counted as Resumed (check).
	readmitted uint64
}

// newPaged builds the scheme; opts go to the prefix index (the fleet simulator gives it a
// vLLM hasher and an event observer).
func newPaged(cfg *Config, s Scheme, seqs []seq, opts ...prefix.Option) (*paged, error) {
	pool, err := blocks.New(cfg.Capacity/s.BlockSize, blocks.WithNullBlock())
	if err != nil {
		return nil, err
	}
	clock := &evict.Counter{}
	preempt, err := NewPreemptionPolicy(s.Preemption)
	if err != nil {
		return nil, err
	}
	mc := blocktable.Config{Pool: pool, BlockSize: s.BlockSize, Watermark: s.Watermark, Clock: clock, Preemption: preempt}
	if s.PrefixSharing {
		policy, err := NewEvictionPolicy(s.EvictionName())
		if err != nil {
			return nil, err
		}
		if s.Tiers.enabled() {
			opts = append(opts, prefix.WithTiers(tierConfig(s.Tiers.HostBlocks, s.Tiers.DiskBlocks, s.Tiers.BlockBytes)))
		}
		if mc.Index, err = prefix.New(pool, s.BlockSize, append([]prefix.Option{prefix.WithPolicy(policy), prefix.WithClock(clock)}, opts...)...); err != nil {
			return nil, err
		}
	}
	m, err := blocktable.New(mc)
	if err != nil {
		return nil, err
	}
	p := &paged{m: m, pool: pool, seqs: seqs, seed: cfg.Seed, blockSize: s.BlockSize, sharing: s.PrefixSharing, capacity: cfg.Capacity, tiers: s.Tiers}
	if s.Tiers.enabled() {
		p.clock = newTierClock(s.Tiers, cfg.StepDuration, m)
	}
	return p, nil
}

// tail is the number of empty slots in the last block of a sequence of n tokens.
func (p *paged) tail(n int) int64 { return int64((p.blockSize - n%p.blockSize) % p.blockSize) }

func (p *paged) admit(s *seq, budget int) (prefill, hit int, ok bool, err error) {
	n := s.req.Input + s.generated
	if n > budget && !p.sharing {
		return 0, 0, false, nil
	}
	if cap(p.prompt) < n {
		p.prompt = make([]int32, n, 2*n)
	}
	p.prompt = p.prompt[:n]
	for i := range p.prompt {
		p.prompt[i] = Token(p.seed, s.req, i)
	}
	// A readmission after preemption is Resumed: the Manager counts its re-hits apart, and
	// so does the scheduler (Result.ResumedHitRate).
	p.req = blocktable.Request{Prompt: p.prompt, MaxTokens: s.req.KVLen(), Resumed: s.preempted}
	id := blocktable.SeqID(s.req.ID)
	if n > budget {
		// Only a prefix hit can bring the prefill within the budget: ask first.
		res, err := p.m.CanAdmit(id, &p.req)
		if errors.Is(err, blocks.ErrOutOfBlocks) {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, err
		}
		if n-res.HitTokens-res.LoadTokens > budget {
			return 0, 0, false, nil
		}
	}
	res, err := p.m.Admit(id, &p.req)
	if errors.Is(err, blocks.ErrOutOfBlocks) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	s.stored = n
	if s.preempted {
		p.readmitted += uint64(n)
	}
	p.live++
	p.tokens += int64(n)
	p.internal += p.tail(n)
	if err := p.clock.transfer(); err != nil {
		return 0, 0, false, err
	}
	p.clock.admitted(res.Load != 0)
	if res.Load != 0 {
		p.clock.wait(s, loadKey{0, res.Load})
	}
	hit = res.HitTokens + res.LoadTokens // loaded from a lower tier: not computed
	return n - hit, hit, true, nil
}

func (p *paged) grow(s *seq, victims []*seq) ([]*seq, error) {
	id := blocktable.SeqID(s.req.ID)
	tok := Token(p.seed, s.req, s.stored)
	for {
		_, err := p.m.AppendToken(id, tok) // a server's decode step: one token, no slice
		if err == nil {
			p.internal += p.tail(s.stored+1) - p.tail(s.stored)
			p.tokens++
			s.stored++
			s.stalled = false
			if s.stored%p.blockSize == 0 { // a block filled and was committed: write-through copies
				return victims, p.clock.transfer()
			}
			return victims, nil
		}
		if !errors.Is(err, blocks.ErrOutOfBlocks) {
			return victims, err
		}
		// One token needs at most one block. The policy may pick s itself (vLLM preempts
		// the newest request, which can be the one growing).
		first := len(victims)
		if victims, err = p.preempt(victims); err != nil {
			if errors.Is(err, blocks.ErrOutOfBlocks) && p.clock.copying() {
				// Every block is held or pinned by a copy in flight: s stalls until a
				// copy ends and frees one (tierlinks.go).
				s.stalled = true
				return victims, nil
			}
			return victims, fmt.Errorf("request %d cannot grow: %w", s.req.ID, err)
		}
		for _, v := range victims[first:] {
			p.tokens -= int64(v.stored)
			p.internal -= p.tail(v.stored)
			p.drop(v)
			v.preempted = true
		}
		if s.preempted {
			return victims, nil
		}
	}
}

// preempt frees at least one block by preempting running requests in the policy's order
// (Manager.Preempt, which counts what each victim really frees, shared blocks included)
// and appends them to victims.
func (p *paged) preempt(victims []*seq) ([]*seq, error) {
	var err error
	if p.pre, err = p.m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Recompute}, p.pre[:0]); err != nil {
		return victims, err
	}
	for _, v := range p.pre {
		victims = append(victims, &p.seqs[v.Seq])
	}
	return victims, nil
}

func (p *paged) finish(s *seq) error {
	if err := p.m.Finish(blocktable.SeqID(s.req.ID)); err != nil {
		return err
	}
	p.tokens -= int64(s.stored)
	p.internal -= p.tail(s.stored)
	p.drop(s)
	return p.clock.transfer()
}

// drop takes s out of the running requests; one preempted while its load was in flight
// stops waiting for it (the wait so far counts).
func (p *paged) drop(s *seq) {
	p.live--
	p.clock.drop(s)
}

// usage reads the pool, O(1): blocks held by running requests are those in use less the
// cached blocks only the index holds (which the pool can reclaim).
func (p *paged) usage(*seq) Usage {
	b := int64(p.blockSize)
	capacity, free := int64(p.pool.Capacity()), int64(p.pool.NumFree())
	cached := int64(p.pool.Available()) - free
	held := capacity - free - cached
	return Usage{
		Tokens:   held*b - p.internal,
		Internal: p.internal,
		External: int64(p.capacity) - capacity*b,
		Free:     (free + cached) * b,
		Cached:   cached * b,
	}
}

func (p *paged) check(deep bool) error {
	st := p.m.Stats()
	if st.InUse+st.Evictable+st.Free != st.Capacity {
		return fmt.Errorf("blocks in use %d + evictable %d + free %d != capacity %d", st.InUse, st.Evictable, st.Free, st.Capacity)
	}
	if u := p.usage(nil); u.Tokens+u.Internal != int64(st.InUse)*int64(p.blockSize) || u.Cached != int64(st.Evictable)*int64(p.blockSize) {
		return fmt.Errorf("the pool says %d slots held and %d cached, the Manager %d blocks in use and %d evictable", u.Tokens+u.Internal, u.Cached, st.InUse, st.Evictable)
	}
	if st.Running != p.live {
		return fmt.Errorf("the Manager runs %d sequences, the simulator %d", st.Running, p.live)
	}
	if st.ResumedPromptTokens != p.readmitted {
		return fmt.Errorf("the Manager counts %d resumed prompt tokens, the simulator readmitted %d", st.ResumedPromptTokens, p.readmitted)
	}
	// Without sharing every block has one holder, so the requests' own counts must
	// account for every block in use exactly.
	if !p.sharing && p.tokens+p.internal != int64(st.InUse)*int64(p.blockSize) {
		return fmt.Errorf("requests hold %d tokens + %d tail slots, but %d blocks of %d are in use", p.tokens, p.internal, st.InUse, p.blockSize)
	}
	if !deep {
		return nil
	}
	return p.m.CheckInvariants()
}
