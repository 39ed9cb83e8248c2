package evict

import (
	"cmp"
	"fmt"
)

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
type S3FIFO[K cmp.Ordered] struct {
	small, main rankHeap[K]
	seq         uint64
	percent     int
	v           verifier
}

// NewS3FIFO returns an empty S3FIFO policy whose small queue is drained first while it holds
// at least percent of the candidates; percent outside 1..100 means DefaultSmallPercent.
func NewS3FIFO[K cmp.Ordered](percent int) *S3FIFO[K] {
	if percent < 1 || percent > 100 {
		percent = DefaultSmallPercent
	}
	return &S3FIFO[K]{small: newRankHeap[K](), main: newRankHeap[K](), percent: percent}
}

// Name returns "s3fifo".
func (p *S3FIFO[K]) Name() string { return "s3fifo" }

// SmallPercent is the small queue's share of the candidates from which it is drained first.
func (p *S3FIFO[K]) SmallPercent() int { return p.percent }

// Add makes e.Key the newest candidate of its queue.
func (p *S3FIFO[K]) Add(e Entry[K]) {
	p.small.remove(e.Key)
	p.main.remove(e.Key)
	p.seq++
	if e.Hits >= ReusedHits {
		p.main.push(e.Key, p.seq, 0)
	} else {
		p.small.push(e.Key, p.seq, 0)
	}
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *S3FIFO[K]) Remove(key K) bool {
	ok := p.small.remove(key) || p.main.remove(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

// Victim pops the oldest one-hit wonder while they hold their share, else the oldest
// reused candidate.
func (p *S3FIFO[K]) Victim() (K, bool) {
	var k K
	var ok bool
	if s := p.small.len(); s > 0 && (p.main.len() == 0 || 100*s >= p.percent*p.Len()) {
		k, ok = p.small.pop()
	} else {
		k, ok = p.main.pop()
	}
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *S3FIFO[K]) Len() int { return p.small.len() + p.main.len() }

// Reset drops every candidate.
func (p *S3FIFO[K]) Reset() {
	p.small.reset()
	p.main.reset()
	p.seq = 0
}

// CheckInvariants verifies both queues and that no key is in both.
func (p *S3FIFO[K]) CheckInvariants() error {
	if err := p.small.check(); err != nil {
		return fmt.Errorf("s3fifo small: %w", err)
	}
	if err := p.main.check(); err != nil {
		return fmt.Errorf("s3fifo main: %w", err)
	}
	for k := range p.main.index {
		if p.small.has(k) {
			return fmt.Errorf("s3fifo: key %v is in both queues", k)
		}
	}
	return nil
}
