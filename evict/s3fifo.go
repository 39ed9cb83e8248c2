package evict

import (
	"fmt"
	"github.com/kvpage/kvpage/internal/invariant"
)

// s3fifo is the policy NewS3FIFO returns.
type s3fifo struct {
	small, main rankHeap
	seq         uint64
	percent     int
	chk         checker
}

// NewS3FIFO returns an empty S3FIFO policy whose small queue is drained first while it holds
// at least percent of the candidates; percent 0 means DefaultSmallPercent, and one below 0
// or above 100 is refused with an *ArgumentError.
//
// DefaultSmallPercent is S3FIFO's default small-queue share of the candidates.
const DefaultSmallPercent = 10

// S3FIFO is a frequency-aware FIFO after S3-FIFO (Yang et al., SOSP 2023): one-hit wonders
// wait in a small queue and leave before blocks whose content has been reused.
//
// The exact rule. Candidates are numbered by Add, as in FIFO. A candidate with
// e.Hits < ReusedHits (content stored but never hit) goes to the small queue, any other to
// the main queue; each queue is FIFO by Add number. Victim pops the head of the small
// queue when it is not empty and either the main queue is empty or the small queue holds at
// least S percent of the candidates (100·small >= S·n; S is set at construction:
// DefaultSmallPercent); otherwise it pops the head of the main queue.
//
// What differs from the paper, and why. A candidate here is an unreferenced block, and a
// hit takes it out of the policy (Remove) and brings it back later (Add) with more Hits, so
// "promote on hit" is the move from the small to the main queue at that Add, and the main
// queue needs no reinsertion (nothing is hit while queued). There is no ghost queue: keys
// are block IDs, reused for other content after eviction, so a ghost hit would be a lie;
// the cache's Hits count is the frequency history instead. Add, Remove and Victim are
// O(log n).
func NewS3FIFO(capacity int, percent int) (Policy, error) {
	percent, err := checkShare("s3fifo", capacity, percent, DefaultSmallPercent)
	if err != nil {
		return nil, err
	}
	return &s3fifo{small: newRankHeap(capacity), main: newRankHeap(capacity), percent: percent}, nil
}

// Name returns "s3fifo".
func (p *s3fifo) Name() string { return "s3fifo" }

// SmallPercent is the small queue's share of the candidates from which it is drained first.
func (p *s3fifo) SmallPercent() int { return p.percent }

// Add makes e.Key the newest candidate of its queue.
func (p *s3fifo) Add(e Entry) {
	p.small.remove(e.Key)
	p.main.remove(e.Key)
	p.seq++
	if e.Hits >= ReusedHits {
		p.main.push(e.Key, p.seq, 0)
	} else {
		p.small.push(e.Key, p.seq, 0)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *s3fifo) Remove(key int32) bool {
	ok := p.small.remove(key) || p.main.remove(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the oldest one-hit wonder while they hold their share, else the oldest
// reused candidate.
func (p *s3fifo) Victim() (int32, bool) {
	var k int32
	var ok bool
	if s := p.small.len(); s > 0 && (p.main.len() == 0 || 100*s >= p.percent*p.Len()) {
		k, ok = p.small.pop()
	} else {
		k, ok = p.main.pop()
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Restore undoes the latest Victim, which returned key (Restorer): key is a candidate
// again in the queue it left, with the Add number it had. That queue is the one whose
// rank of key is the newer: every Add numbers the key anew and pushes it into one queue,
// and a removal keeps the rank it had there.
func (p *s3fifo) Restore(key int32) {
	s, m := p.small.rankOf(key), p.main.rankOf(key)
	switch {
	case s == 0 && m == 0 || p.small.has(key) || p.main.has(key):
		panic(fmt.Sprintf("evict: s3fifo Restore of key %d, a candidate or never one", key))
	case s > m:
		p.small.restore(key)
	default:
		p.main.restore(key)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Len is the number of candidates.
func (p *s3fifo) Len() int { return p.small.len() + p.main.len() }

// Reset drops every candidate.
func (p *s3fifo) Reset() {
	p.small.reset()
	p.main.reset()
	p.seq = 0
}

// CheckInvariants verifies both queues and that no key is in both.
func (p *s3fifo) check() error {
	if err := p.small.check(); err != nil {
		return fmt.Errorf("s3fifo small: %w", err)
	}
	if err := p.main.check(); err != nil {
		return fmt.Errorf("s3fifo main: %w", err)
	}
	for _, k := range p.main.heap {
		if p.small.has(k) {
			return fmt.Errorf("s3fifo: key %v is in both queues", k)
		}
	}
	return nil
}
