package sim

import (
	"fmt"
	"math/bits"
)

// The Orca schemes differ only in the size of the region they reserve for a request.
func init() {
	for _, s := range []struct {
		name    string
		reserve func(r *Request, maxModelLen int) int
	}{
		{OrcaMax, func(_ *Request, maxModelLen int) int { return maxModelLen }},
		{OrcaPow2, func(r *Request, maxModelLen int) int { return min(1<<bits.Len(uint(r.KVLen()-1)), maxModelLen) }},
		{OrcaOracle, func(r *Request, _ int) int { return r.KVLen() }},
	} {
		reserve := s.reserve
		registerScheme(schemeDef{name: s.name, build: func(c *Config, _ *Scheme, seqs []seq) (allocator, error) {
			return newContiguous(c, reserve, len(seqs)), nil
		}})
	}
}

// contiguous is the Orca schemes' allocator: at admission a request reserves one region of
// the arena sized by the scheme, and keeps it until it finishes. The reservation always
// covers the request's true length, so it never needs to grow or preempt.
type contiguous struct {
	reserve     func(r *Request, maxModelLen int) int
	maxModelLen int
	arena       *arena
	regions     []region // by request ID; valid while the request runs

	// running sums, so that usage costs O(holes) rather than O(requests)
	tokens, trueLen, reserved int64
	held                      map[*seq]struct{} // the running requests, for check
}

// region is a running request's reservation in the arena.
type region struct{ offset, size int }

func newContiguous(cfg *Config, reserve func(*Request, int) int, requests int) *contiguous {
	return &contiguous{reserve: reserve, maxModelLen: cfg.MaxModelLen, arena: newArena(cfg.Capacity),
		regions: make([]region, requests), held: map[*seq]struct{}{}}
}

// reservation is the region the scheme reserves for r.
func (c *contiguous) reservation(r *Request) int { return c.reserve(r, c.maxModelLen) }

func (c *contiguous) admit(s *seq, budget int) (prefill, hit int, ok bool, err error) {
	prompt := s.req.Input + s.generated
	if prompt > budget {
		return 0, 0, false, nil
	}
	n := c.reservation(s.req)
	off, ok := c.arena.alloc(n)
	if !ok {
		return 0, 0, false, nil
	}
	c.regions[s.req.ID] = region{off, n}
	s.stored = prompt
	c.tokens += int64(prompt)
	c.trueLen += int64(s.req.KVLen())
	c.reserved += int64(n)
	c.held[s] = struct{}{}
	return prompt, 0, true, nil
}

func (c *contiguous) grow(s *seq, victims []*seq) ([]*seq, error) {
	if n := c.regions[s.req.ID].size; s.stored >= n {
		return victims, fmt.Errorf("request %d outgrew its reservation of %d tokens: a bug in the simulator", s.req.ID, n)
	}
	s.stored++
	c.tokens++
	return victims, nil
}

func (c *contiguous) finish(s *seq) error {
	g := c.regions[s.req.ID]
	c.arena.release(g.offset, g.size)
	c.regions[s.req.ID] = region{}
	c.tokens -= int64(s.stored)
	c.trueLen -= int64(s.req.KVLen())
	c.reserved -= int64(g.size)
	delete(c.held, s)
	return nil
}

func (c *contiguous) usage(head *seq) Usage {
	u := Usage{
		Tokens:   c.tokens,
		Reserved: c.trueLen - c.tokens,
		Internal: c.reserved - c.trueLen,
		Free:     int64(c.arena.free),
	}
	if head != nil {
		u.External = int64(c.arena.freeBelow(c.reservation(head.req)))
		u.Free -= u.External
	}
	return u
}

func (c *contiguous) check(bool) error {
	if err := c.arena.checkInvariants(); err != nil {
		return err
	}
	var tokens, trueLen, reserved int64
	for s := range c.held {
		if s.stored > s.req.KVLen() {
			return fmt.Errorf("request %d holds %d token states, more than its true length %d", s.req.ID, s.stored, s.req.KVLen())
		}
		tokens += int64(s.stored)
		trueLen += int64(s.req.KVLen())
		reserved += int64(c.regions[s.req.ID].size)
	}
	if tokens != c.tokens || trueLen != c.trueLen || reserved != c.reserved {
		return fmt.Errorf("running sums (%d, %d, %d) differ from the requests' (%d, %d, %d)", c.tokens, c.trueLen, c.reserved, tokens, trueLen, reserved)
	}
	if reserved+int64(c.arena.free) != int64(c.arena.size) {
		return fmt.Errorf("reservations %d + free %d != arena %d", reserved, c.arena.free, c.arena.size)
	}
	return nil
}
