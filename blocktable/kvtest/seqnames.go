package kvtest

import (
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocktable"
)

// seqNames maps test names ("r1") to sequence IDs and back, for Env and HybridEnv alike,
// so that tests, logs and leak reports speak of names rather than of numbers.
type seqNames struct {
	names map[blocktable.SeqID]string
	ids   map[string]blocktable.SeqID
	next  blocktable.SeqID
}

func newSeqNames() seqNames {
	return seqNames{names: map[blocktable.SeqID]string{}, ids: map[string]blocktable.SeqID{}}
}

// seq returns the ID of name, giving it the next ID not yet named on first use.
func (s *seqNames) seq(name string) blocktable.SeqID {
	if id, ok := s.ids[name]; ok {
		return id
	}
	for {
		s.next++
		if _, taken := s.names[s.next]; !taken {
			break
		}
	}
	s.ids[name], s.names[s.next] = s.next, name
	return s.next
}

// name returns the name of id, or "seq N" when it has none.
func (s *seqNames) name(id blocktable.SeqID) string {
	if n, ok := s.names[id]; ok {
		return n
	}
	return fmt.Sprintf("seq %d", id)
}

// writeLeaks appends one line per leaked block to b, in the form both CheckLeaks print.
func writeLeaks(b *strings.Builder, leaks []Leak) {
	for _, l := range leaks {
		who := "no known holder"
		if len(l.Holders) > 0 {
			who = "held by " + strings.Join(l.Holders, ", ")
		}
		if l.Cached {
			who += " (and cached)"
		}
		fmt.Fprintf(b, "\n  block %d: refcount %d, %s", l.Block, l.Refs, who)
	}
}
