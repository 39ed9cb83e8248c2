package sim

import (
	"math"
	"slices"

	"github.com/kvpage/kvpage/blocktable"
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
// The clock drives any Manager with lower tiers (transferer: blocktable.Manager for the
// paged scheme, hybrid.Manager for each pool of the hybrid scheme). The Managers of one
// scheme share the links: they are one device's pools, and its host link carries every
// pool's copies, taken from the Managers in pool order each time the clock runs. A
// request admitted into several pools waits for every pool's load.
//
// Until a copy is confirmed its device blocks stay as the index holds them: a store's
// source pinned, a load's destinations reserved, so a slow link costs device memory. A
// sequence whose load is in flight neither decodes nor generates; it produces its first
// token in the step its load ends. A sequence that cannot grow because every block is
// held or pinned (preempting every other would free too little) stalls, generating
// nothing, until a copy ends. A link of 0 GB/s (or blocks of 0 bytes) is unlimited: its
// plans are confirmed where they are taken, so the run is exactly the one with every
// copy instantaneous.

// transferer is a Manager with lower tiers, as the tier clock drives it.
type transferer interface {
	TakePlans(dst []prefix.Plan) []prefix.Plan
	CompleteTransfer(id prefix.TransferID, ok bool) (blocktable.LoadDone, error)
}

// link is one lower tier's copy queue, timed in steps (fractions of a step included, so
// that small copies share a step).
type link struct {
	bytesPerStep float64 // 0: unlimited
	free         float64 // when the link is idle, in steps
	busy         float64 // steps spent copying
}

// loadKey names a transfer: the Manager's index in the clock's and its id there (each
// Manager numbers its own).
type loadKey struct {
	mgr int
	id  prefix.TransferID
}

// inflight is a transfer waiting for its last plan to end.
type inflight struct {
	key  loadKey
	done int // the step at whose start it is confirmed
}

// tierClock is a scheme's transfer timing.
type tierClock struct {
	ms       []transferer // nil: no lower tiers
	now      int
	links    [prefix.MaxTiers]link
	plans    []prefix.Plan
	inflight []inflight
	waiters  map[loadKey]*seq
	// loads counts admissions that loaded blocks, admissions all admissions, waited the
	// steps sequences spent waiting for their loads.
	loads, admissions, waited int64
	last                      int // the step the last copy ended at, at the latest
}

// newTierClock is the clock of Managers ms under t's links (ms only when t has tiers).
func newTierClock(t Tiers, stepDuration float64, ms ...transferer) tierClock {
	c := tierClock{ms: ms}
	for i, g := range [...]float64{t.HostGBps, t.DiskGBps} {
		if g > 0 {
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

// transfer takes the Managers' plans, queues them on their links and confirms every
// transfer that has ended by now.
func (c *tierClock) transfer() error {
	if c.ms == nil {
		return nil
	}
	for k, m := range c.ms {
		c.plans = m.TakePlans(c.plans[:0])
		for i := range c.plans {
			pl := &c.plans[i]
			done := c.plan(pl)
			if i > 0 && c.plans[i-1].ID == pl.ID { // one load from two tiers: one completion
				f := &c.inflight[len(c.inflight)-1]
				f.done = max(f.done, done)
				continue
			}
			c.inflight = append(c.inflight, inflight{key: loadKey{k, pl.ID}, done: done})
		}
	}
	return c.completeDue()
}

// completeDue confirms the transfers that have ended by now, earliest first, ties in
// the order they were planned.
func (c *tierClock) completeDue() error {
	if len(c.inflight) == 0 {
		return nil
	}
	slices.SortStableFunc(c.inflight, func(a, b inflight) int { return a.done - b.done })
	n := 0
	for n < len(c.inflight) && c.inflight[n].done <= c.now {
		k := c.inflight[n].key
		n++
		if _, err := c.ms[k.mgr].CompleteTransfer(k.id, true); err != nil {
			return err
		}
		if s := c.waiters[k]; s != nil {
			delete(c.waiters, k)
			if s.loading--; s.loading == 0 {
				c.waited += int64(c.now - s.loadSince)
			}
		}
	}
	c.inflight = c.inflight[:copy(c.inflight, c.inflight[n:])]
	return nil
}

// advance moves the clock to step and confirms what has ended by then; the plans those
// confirmations start (the loaded blocks' write-through copies) are queued at once.
func (c *tierClock) advance(step int) error {
	c.now = step
	if len(c.inflight) == 0 {
		return nil
	}
	if err := c.completeDue(); err != nil {
		return err
	}
	return c.transfer()
}

// admitted counts an admission, which loaded blocks or not.
func (c *tierClock) admitted(loaded bool) {
	c.admissions++
	if loaded {
		c.loads++
	}
}

// wait makes s wait for load k, an admission's load, if it is still in flight (call it
// after transfer has queued the admission's plans).
func (c *tierClock) wait(s *seq, k loadKey) {
	if !slices.ContainsFunc(c.inflight, func(f inflight) bool { return f.key == k }) {
		return
	}
	if c.waiters == nil {
		c.waiters = make(map[loadKey]*seq)
	}
	c.waiters[k] = s
	if s.loading == 0 {
		s.loadSince = c.now
	}
	s.loading++
	s.held = true
}

// drop takes s, leaving the running requests, off the loads it waits for (the wait so
// far counts).
func (c *tierClock) drop(s *seq) {
	if s.loading != 0 {
		c.waited += int64(c.now - s.loadSince)
		for _, f := range c.inflight {
			if c.waiters[f.key] == s {
				delete(c.waiters, f.key)
			}
		}
	}
	s.loading, s.held, s.stalled = 0, false, false
}

// copying reports whether a transfer is in flight.
func (c *tierClock) copying() bool { return len(c.inflight) > 0 }

// drain confirms every transfer still in flight at the end of a run.
func (c *tierClock) drain() error {
	for len(c.inflight) > 0 {
		if err := c.advance(slices.MaxFunc(c.inflight, func(a, b inflight) int { return a.done - b.done }).done); err != nil {
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

// deviceWaits fills the device's load figures of r.
func (c *tierClock) deviceWaits(r *TierResult) {
	if c.loads > 0 {
		r.Loads = uint64(c.loads)
		r.MeanLoadWaitSteps = float64(c.waited) / float64(c.admissions)
		r.MeanWaitPerLoad = float64(c.waited) / float64(c.loads)
	}
}
