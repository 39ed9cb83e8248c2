package kvtest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// expect checks every key=value of an expect directive. With -kvtest.rewrite it rewrites
// the directive's line with the actual values instead.
func (r *Runner) expect(d *directive, a *args) error {
	if len(a.pos) > 0 {
		return scriptErrorf("expect: %q is not key=value", a.pos[0])
	}
	if len(a.keys) == 0 {
		return scriptErrorf("expect: nothing to check")
	}
	r.Env()
	var fail []string
	words := []string{"expect"}
	for _, k := range a.keys {
		got, err := r.Value(k)
		if err != nil {
			return err
		}
		if want := a.kv[k]; got != want {
			fail = append(fail, fmt.Sprintf("%s: got %s, want %s", k, got, want))
		}
		words = append(words, k+"="+got)
	}
	if rewrite && r.file != "" {
		lead := d.raw[:len(d.raw)-len(strings.TrimLeft(d.raw, " \t"))]
		d.raw = lead + strings.Join(words, " ")
		return nil
	}
	if len(fail) > 0 {
		return &expectError{msgs: fail}
	}
	return nil
}

// Value returns the current value of an expect key, as text:
//
//	free evictable held cached capacity     where the pool's blocks are (BlockCounts)
//	seqs running swapped                    sequences
//	hit new tokens                          the last successful admission's result
//	admitted finished aborted forks preemptions swapins cows evictions rejected hitrate
//	                                        the Manager's counters (evictions: reclaimed for allocations)
//	evicted inserts duplicates lookups      the index's counters (evicted: every eviction)
//	resumed rehits                          admissions with resumed=true, and their hit tokens
//	miss miss.cause miss.matched miss.shared
//	                                        the last explain: reason, what evicted the next
//	                                        block, blocks matched, tokens shared below a block
//	pinned                                  distinct blocks pinned in the index
//	tripped hidden                          faults delivered, blocks hidden
//	clock                                   the shared clock
//	refs.ID                                 the refcount of block ID
//	SEQ.tokens SEQ.blocks SEQ.table SEQ.hit SEQ.committed SEQ.reserved SEQ.state
//	                                        one sequence (state: running, swapped or gone)
func (r *Runner) Value(key string) (string, error) {
	e := r.Env()
	itoa := strconv.Itoa
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	b := e.Blocks()
	st := e.Manager.Stats()
	switch key {
	case "free":
		return itoa(b.Free), nil
	case "evictable":
		return itoa(b.Evictable), nil
	case "held":
		return itoa(b.Held), nil
	case "cached":
		return itoa(b.Cached), nil
	case "capacity":
		return itoa(b.Capacity), nil
	case "seqs":
		return itoa(st.Running + st.Swapped), nil
	case "running":
		return itoa(st.Running), nil
	case "swapped":
		return itoa(st.Swapped), nil
	case "hit":
		return itoa(r.last.HitTokens), nil
	case "new":
		return itoa(r.last.NewBlocks), nil
	case "tokens":
		return itoa(r.last.Tokens), nil
	case "admitted":
		return u(st.Admitted), nil
	case "finished":
		return u(st.Finished), nil
	case "aborted":
		return u(st.Aborted), nil
	case "forks":
		return u(st.Forks), nil
	case "preemptions":
		return u(st.Preemptions), nil
	case "swapins":
		return u(st.SwapIns), nil
	case "cows":
		return u(st.CopyOnWrites), nil
	case "evictions":
		return u(st.Evictions), nil
	case "rejected":
		return u(st.RejectedAdmissions), nil
	case "hitrate":
		return strconv.FormatFloat(st.HitRate(), 'f', 4, 64), nil
	case "clock":
		return u(e.Clock.Now()), nil
	case "tripped", "hidden":
		f := e.Faults()
		if f == nil {
			return "0", nil
		}
		if key == "tripped" {
			return itoa(f.Tripped), nil
		}
		return itoa(f.Hidden), nil
	case "resumed":
		return u(st.ResumedAdmitted), nil
	case "rehits":
		return u(st.ResumedHitTokens), nil
	case "miss":
		return r.miss.Reason.String(), nil
	case "miss.cause":
		return r.miss.Evicted.String(), nil
	case "miss.matched":
		return itoa(r.miss.MatchedBlocks), nil
	case "miss.shared":
		return itoa(r.miss.SharedTokens), nil
	case "pinned":
		if e.Index == nil {
			return "0", nil
		}
		return itoa(e.Index.Pinned()), nil
	case "evicted", "inserts", "duplicates", "lookups":
		if e.Index == nil {
			return "0", nil
		}
		is := e.Index.Stats()
		return u(map[string]uint64{"evicted": is.Evictions, "inserts": is.Inserts, "duplicates": is.Duplicates, "lookups": is.Lookups}[key]), nil
	}
	name, field, ok := strings.Cut(key, ".")
	if !ok {
		return "", scriptErrorf("expect: unknown key %q", key)
	}
	if name == "refs" {
		id, err := strconv.Atoi(field)
		if err != nil {
			return "", scriptErrorf("expect: %q: bad block", key)
		}
		return itoa(e.Pool.RefCount(blocks.ID(id))), nil
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	id := e.Seq(name)
	info, err := e.Manager.Seq(id)
	if field == "state" {
		switch {
		case err != nil:
			return "gone", nil
		case info.State == blocktable.Swapped:
			return "swapped", nil
		}
		return "running", nil
	}
	if err != nil {
		return "gone", nil
	}
	switch field {
	case "tokens":
		return itoa(info.Tokens), nil
	case "blocks":
		return itoa(info.Blocks), nil
	case "hit":
		return itoa(info.HitTokens), nil
	case "committed":
		return itoa(info.Committed), nil
	case "reserved":
		return itoa(info.Reserved), nil
	case "table":
		ids, err := e.Manager.Blocks(id)
		if err != nil {
			return "swapped", nil
		}
		if len(ids) == 0 {
			return "none", nil
		}
		return joinIDs(ids), nil
	}
	return "", scriptErrorf("expect: unknown key %q", key)
}
