package sim

import (
	"math"
	"slices"

	"github.com/kvpage/kvpage/prefix"
)

// Tier links: the bandwidths on the simulator's step clock. Each lower tier has one link
// (the host's to the device, the disk's to the device and the host) whose copies run one
// after another, in the order the index planned them. A plan of B bytes over a link of
// G GB/s occupies it for B / (G x 10^9 x Config.StepDuration) steps, from when the link
// is free (at the earliest the start of the step it was planned in), and is confirmed
// (CompleteTransfer) at the start of the first step after it ends: alone on the link,
// ceil(B / (G x 10^9 x StepDuration)) steps after it was planned. Copies smaller than a
// step share one. A load from two tiers ends when both parts do.
//
// Until a copy is confirmed its device blocks stay as the index holds them: a store's
// source pinned, a load's destinations reserved, so a slow link costs device memory. A
// sequence whose load is in flight neither decodes nor generates; it produces its first
// token in the step its load ends. A sequence that cannot grow because every block is
// held or pinned (preempting every other would free too little) stalls, generating
// nothing, until a copy ends. A link of 0 GB/s (or blocks of 0 bytes) is unlimited: its
// plans are confirmed where they are taken, so the run is exactly the one with every
// copy instantaneous.

// link is one lower tier's copy queue, timed in steps (fractions of a step included, so
// that small copies share a step).
type link struct {
	bytesPerStep float64 // 0: unlimited
	free         float64 // when the link is idle, in steps
	busy         float64 // steps spent copying
}

// inflight is a transfer waiting for its last plan to end.
type inflight struct {
	id   prefix.TransferID
	done int // the step at whose start it is confirmed
}

// tierClock is the paged scheme's transfer timing.
type tierClock struct {
	now      int
	links    [prefix.MaxTiers]link
	inflight []inflight
	waiters  map[prefix.TransferID]*seq
	// loads counts admissions that loaded blocks, admissions all admissions, waited the
	// steps sequences spent waiting for their loads.
	loads, admissions, waited int64
	last                      int // the step the last copy ended at, at the latest
}

func newTierClock(t Tiers, stepDuration float64) tierClock {
	var c tierClock
	for i, g := range [...]float64{t.HostGBps, t.DiskGBps} {
		if g > 0 && t.BlockBytes > 0 {
			c.links[i+1].bytesPerStep = g * 1e9 * stepDuration
		}
	}
	return c
}

// plan queues pl on its link (the lower tier's) and returns the step at whose start it
// has ended: a plan of b bytes on a link idle at step now ends at now + ceil(b / bytes
// per step); behind other copies it starts when they end.
func (c *tierClock) plan(pl *prefix.Plan) int {
	l := &c.links[max(pl.From, pl.To)]
	if l.bytesPerStep == 0 || pl.Bytes <= 0 {
		return c.now
	}
	d := float64(pl.Bytes) / l.bytesPerStep
	l.free = max(float64(c.now), l.free) + d
	l.busy += d
	done := int(math.Ceil(l.free))
	c.last = max(c.last, done)
	return done
}

// transfer takes the Manager's plans, queues them on their links and confirms every
// transfer that has ended by now.
func (p *paged) transfer() error {
	if !p.tiers.enabled() {
		return nil
	}
	p.plans = p.m.TakePlans(p.plans[:0])
	c := &p.clock
	for i := range p.plans {
		pl := &p.plans[i]
		done := c.plan(pl)
		if i > 0 && p.plans[i-1].ID == pl.ID { // one load from two tiers: one completion
			f := &c.inflight[len(c.inflight)-1]
			f.done = max(f.done, done)
			continue
		}
		c.inflight = append(c.inflight, inflight{id: pl.ID, done: done})
	}
	return p.completeDue()
}

// completeDue confirms the transfers that have ended by now, earliest first, ties in
// the order they were planned.
func (p *paged) completeDue() error {
	c := &p.clock
	if len(c.inflight) == 0 {
		return nil
	}
	slices.SortStableFunc(c.inflight, func(a, b inflight) int { return a.done - b.done })
	n := 0
	for n < len(c.inflight) && c.inflight[n].done <= c.now {
		id := c.inflight[n].id
		n++
		if _, err := p.m.CompleteTransfer(id, true); err != nil {
			return err
		}
		if s := c.waiters[id]; s != nil {
			delete(c.waiters, id)
			if s.load == uint64(id) {
				c.waited += int64(c.now - s.loadSince)
				s.load = 0
			}
		}
	}
	c.inflight = c.inflight[:copy(c.inflight, c.inflight[n:])]
	return nil
}

// advance moves the clock to step and confirms what has ended by then; the plans those
// confirmations start (the loaded blocks' write-through copies) are queued at once.
func (p *paged) advance(step int) error {
	p.clock.now = step
	if len(p.clock.inflight) == 0 {
		return nil
	}
	if err := p.completeDue(); err != nil {
		return err
	}
	return p.transfer()
}

// admitted notes an admission; load is its load transfer (0: none). A load still in
// flight makes s wait for it.
func (p *paged) admitted(s *seq, load prefix.TransferID) {
	c := &p.clock
	c.admissions++
	if load == 0 {
		return
	}
	c.loads++
	if !slices.ContainsFunc(c.inflight, func(f inflight) bool { return f.id == load }) {
		return
	}
	if c.waiters == nil {
		c.waiters = make(map[prefix.TransferID]*seq)
	}
	c.waiters[load] = s
	s.load, s.loadSince, s.held = uint64(load), c.now, true
}

// copying reports whether a transfer is in flight.
func (p *paged) copying() bool { return len(p.clock.inflight) > 0 }

// drain confirms every transfer still in flight at the end of a run.
func (p *paged) drain() error {
	c := &p.clock
	for len(c.inflight) > 0 {
		p.clock.now = slices.MaxFunc(c.inflight, func(a, b inflight) int { return a.done - b.done }).done
		if err := p.advance(p.clock.now); err != nil {
			return err
		}
	}
	return nil
}

// utilization is link t's busy steps over the run's steps (or until its last copy ended,
// if later).
func (c *tierClock) utilization(t, totalSteps int) float64 {
	l := &c.links[t]
	if l.busy == 0 {
		return 0
	}
	return l.busy / float64(max(totalSteps, c.last))
}
