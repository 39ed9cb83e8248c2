package blocktable

import "github.com/kvpage/kvpage/prefix"

// FinishTurn finishes seq, the current turn of a session (an agent's run, a chat), and
// keeps the session's context cached through the pause before its next turn: the cached
// path of the sequence's tokens, prompt and output, gets retention r (typically
// {Priority: prefix.SessionPriority, Until: now + pause}) under session id, replacing the
// session's previous hold (see prefix.Index.HoldSession). Only a policy that reads
// priorities ("priority") orders by it. Without an index it is Finish. It returns the
// number of blocks held. A Priority above evict.MaxPriority is refused with
// ErrInvalidArgument (in a *SeqError), changing nothing: the sequence is not finished.
func (m *Manager) FinishTurn(seq SeqID, session prefix.SessionID, r prefix.Retention) (int, error) {
	s, err := m.lookup("finish", seq)
	if err != nil {
		return 0, err
	}
	if err := r.Validate(); err != nil {
		return 0, &SeqError{Op: "finish turn", Seq: seq, Err: err}
	}
	if s.state == Running {
		m.commitFull(s)
	}
	held := 0
	if m.caching() && !s.stale {
		// The index's own path, not the sequence's table: after a duplicate the cached copy
		// of a block is the index's, not the sequence's.
		p := prefix.Prompt{Namespace: s.prompt.Namespace, Tokens: s.tokens, MM: s.prompt.MM}
		m.hits, _ = m.index.Peek(m.hits[:0], &p, false)
		held, _ = m.index.HoldSession(session, m.hits, r) // validated above
	}
	m.drop(s)
	m.st.Finished++
	m.check()
	return held, nil
}

// ReleaseSession ends a session's hold (the conversation is over): its blocks go back to
// the default priority at once. It reports whether the session held anything.
func (m *Manager) ReleaseSession(session prefix.SessionID) bool {
	if m.index == nil {
		return false
	}
	_, ok := m.index.ReleaseSession(session)
	return ok
}
