package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress reports a comparison's progress on stderr, in requests completed over every
// scheme, with the schemes finished and an estimate of the time left. On a terminal one
// line is redrawn five times a second; otherwise a line is written every ten seconds.
// Nothing shows for a run under a second. Wall time decides only what is displayed, never
// what is simulated.
//
// The estimate is per scheme: a running scheme will take its elapsed time scaled by the
// share of its requests left, one not yet started as long as the mean of those seen, and
// the schemes share GOMAXPROCS workers, the slowest running one bounding the rest. The
// count alone would mislead: the schemes differ by 10x and more in cost (paging at block
// size 1 is the slowest of the default comparison), so a count at 96% can hide most of the
// time left.
type progress struct {
	w        io.Writer
	terminal bool
	total    int64
	requests int64 // per scheme
	workers  int
	start    time.Time

	mu      sync.Mutex
	done    int64
	begun   []time.Time // per scheme; zero until it starts
	count   []int64     // requests completed per scheme
	elapsed []time.Duration

	quit chan struct{}
	wg   sync.WaitGroup
}

func newProgress(stderr io.Writer, enabled bool, total int64, schemes, workers int) *progress {
	p := &progress{w: stderr, total: total, workers: max(workers, 1), start: time.Now(), quit: make(chan struct{}),
		begun: make([]time.Time, schemes), count: make([]int64, schemes), elapsed: make([]time.Duration, schemes)}
	if schemes > 0 {
		p.requests = total / int64(schemes)
	}
	if !enabled || total <= 0 {
		return p
	}
	if fh, ok := stderr.(*os.File); ok && term.IsTerminal(int(fh.Fd())) {
		p.terminal = true
	}
	p.wg.Go(p.loop)
	return p
}

// update is sim.CompareProgress's callback: scheme i completed n more requests (n = 0 as
// it starts).
func (p *progress) update(i, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.begun[i].IsZero() {
		p.begun[i] = now
	}
	p.count[i] += int64(n)
	p.done += int64(n)
	if p.count[i] >= p.requests {
		p.elapsed[i] = now.Sub(p.begun[i])
	}
}

func (p *progress) loop() {
	every := 10 * time.Second
	if p.terminal {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	shown := false
	for {
		select {
		case <-p.quit:
			if shown && p.terminal {
				fmt.Fprint(p.w, "\r\033[K")
			}
			return
		case <-tick.C:
			if time.Since(p.start) < time.Second {
				continue
			}
			line := p.line()
			if p.terminal {
				fmt.Fprint(p.w, "\r\033[K"+line)
			} else {
				fmt.Fprintln(p.w, line)
			}
			shown = true
		}
	}
}

// line is "kvpage sim: 45,312 of 110,000 requests (41%), 3 of 11 schemes done, about 12 s left".
func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	finished := 0
	for i := range p.count {
		if p.count[i] >= p.requests {
			finished++
		}
	}
	s := fmt.Sprintf("kvpage sim: %s of %s requests simulated (%d%%), %d of %d schemes done", commas(p.done), commas(p.total),
		100*p.done/max(p.total, 1), finished, len(p.count))
	if left, ok := p.estimate(time.Now()); ok {
		s += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	return s
}

// estimate is the time left, when enough has run to say.
func (p *progress) estimate(now time.Time) (time.Duration, bool) {
	var known []time.Duration // whole durations: finished, or running and extrapolated
	var longest, sumLeft time.Duration
	unstarted := 0
	for i := range p.count {
		switch {
		case p.begun[i].IsZero():
			unstarted++
		case p.count[i] >= p.requests:
			known = append(known, p.elapsed[i])
		case p.count[i] == 0:
			return 0, false // a running scheme has completed nothing yet: too early to say
		default:
			ran := now.Sub(p.begun[i])
			whole := time.Duration(float64(ran) * float64(p.requests) / float64(p.count[i]))
			known = append(known, whole)
			longest = max(longest, whole-ran)
			sumLeft += whole - ran
		}
	}
	if len(known) == 0 {
		return 0, false
	}
	var mean time.Duration
	for _, d := range known {
		mean += d
	}
	mean /= time.Duration(len(known))
	shared := (sumLeft + time.Duration(unstarted)*mean) / time.Duration(p.workers)
	return max(longest, shared), true
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
}
