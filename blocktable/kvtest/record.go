package kvtest

import (
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// Log is an ordered record of the decisions the stack took: eviction victims, evicted
// batches, preemption choices, resets. Each entry is one line of text, so that a test can
// compare the log with what it expects, or print it when something goes wrong.
type Log struct{ entries []string }

// Addf appends one entry.
func (l *Log) Addf(format string, args ...any) {
	l.entries = append(l.entries, fmt.Sprintf(format, args...))
}

// Entries returns a copy of the entries so far.
func (l *Log) Entries() []string { return append([]string(nil), l.entries...) }

// Take returns the entries so far and empties the log.
func (l *Log) Take() []string {
	out := l.entries
	l.entries = nil
	return out
}

// Len is the number of entries.
func (l *Log) Len() int { return len(l.entries) }

// String is the entries, one per line.
func (l *Log) String() string { return strings.Join(l.entries, "\n") }

// RecordingPolicy wraps an eviction policy and logs every victim it picks, with the last
// access and hit count it was added with, so that a test can assert the eviction order.
// It is itself an evict.Policy; Env plugs one in through prefix.WithPolicy.
type RecordingPolicy struct {
	inner   evict.Policy
	log     *Log
	entries map[int32]evict.Entry
	victims []blocks.ID
}

// RecordEvictions wraps p; victims go to log (which may be nil).
func RecordEvictions(p evict.Policy, log *Log) *RecordingPolicy {
	return &RecordingPolicy{inner: p, log: log, entries: map[int32]evict.Entry{}}
}

// Name is the wrapped policy's name.
func (r *RecordingPolicy) Name() string { return r.inner.Name() }

// Add records e and passes it on.
func (r *RecordingPolicy) Add(e evict.Entry) {
	r.entries[e.Key] = e
	r.inner.Add(e)
}

// Remove passes key on.
func (r *RecordingPolicy) Remove(key int32) bool {
	delete(r.entries, key)
	return r.inner.Remove(key)
}

// Victim asks the wrapped policy and logs its answer.
func (r *RecordingPolicy) Victim() (int32, bool) {
	k, ok := r.inner.Victim()
	if !ok {
		return k, false
	}
	e := r.entries[k]
	delete(r.entries, k)
	r.victims = append(r.victims, blocks.ID(k))
	if r.log != nil {
		r.log.Addf("victim %v policy=%s last=%d hits=%d", k, r.inner.Name(), e.LastAccess, e.Hits)
	}
	return k, true
}

// Len is the wrapped policy's Len.
func (r *RecordingPolicy) Len() int { return r.inner.Len() }

// Reset resets the wrapped policy.
func (r *RecordingPolicy) Reset() {
	clear(r.entries)
	r.inner.Reset()
}

// Victims returns every victim so far, in order.
func (r *RecordingPolicy) Victims() []blocks.ID { return append([]blocks.ID(nil), r.victims...) }

// RecordingPreemption wraps a preemption policy and logs every choice it makes: the need,
// each candidate as the policy saw it, and the victims in order. It is itself an
// evict.Preemption, to put in blocktable.Config.Preemption.
type RecordingPreemption struct {
	inner evict.Preemption
	log   *Log
	name  func(blocktable.SeqID) string
	calls [][]blocktable.SeqID
}

// RecordPreemptions wraps p; choices go to log (which may be nil), sequences named by name
// (nil: "seq N").
func RecordPreemptions(p evict.Preemption, log *Log, name func(blocktable.SeqID) string) *RecordingPreemption {
	if name == nil {
		name = func(id blocktable.SeqID) string { return fmt.Sprintf("seq %d", id) }
	}
	return &RecordingPreemption{inner: p, log: log, name: name}
}

// Name is the wrapped policy's name.
func (r *RecordingPreemption) Name() string { return r.inner.Name() }

// Victims asks the wrapped policy and logs its choice.
func (r *RecordingPreemption) Victims(dst []int, running []evict.Candidate, need int) []int {
	start := len(dst)
	dst = r.inner.Victims(dst, running, need)
	chosen := make([]blocktable.SeqID, 0, len(dst)-start)
	for _, i := range dst[start:] {
		chosen = append(chosen, blocktable.SeqID(running[i].ID))
	}
	r.calls = append(r.calls, chosen)
	if r.log != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "preempt need=%d policy=%s candidates", need, r.inner.Name())
		for _, s := range running {
			fmt.Fprintf(&b, " %s(arrival=%d priority=%d computed=%d held=%d freeable=%d)",
				r.name(blocktable.SeqID(s.ID)), s.Arrival, s.Priority, s.Computed, s.Held, s.Freeable)
		}
		b.WriteString(" ->")
		for _, id := range chosen {
			b.WriteString(" " + r.name(id))
		}
		r.log.Addf("%s", b.String())
	}
	return dst
}

// Choices returns the victims of every call so far, one slice per call, in order.
func (r *RecordingPreemption) Choices() [][]blocktable.SeqID {
	out := make([][]blocktable.SeqID, len(r.calls))
	for i, c := range r.calls {
		out[i] = append([]blocktable.SeqID(nil), c...)
	}
	return out
}

// eventLogger receives the index's events: it logs evicted batches and resets (the
// built-in LRU is not a policy that can be wrapped) and passes every event on.
type eventLogger struct {
	env  *Env
	next prefix.Observer
}

func (o *eventLogger) BlockStored(e *prefix.BlockStored) {
	if o.next != nil {
		o.next.BlockStored(e)
	}
}

func (o *eventLogger) BlockRemoved(e *prefix.BlockRemoved) {
	o.env.Log.Addf("evicted %s", joinIDs(e.Blocks))
	if o.next != nil {
		o.next.BlockRemoved(e)
	}
}

func (o *eventLogger) AllBlocksCleared() {
	o.env.Log.Addf("reset: every cached block dropped")
	if o.next != nil {
		o.next.AllBlocksCleared()
	}
}

// joinIDs writes ids as "1,2,3".
func joinIDs(ids []blocks.ID) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", id)
	}
	return b.String()
}
