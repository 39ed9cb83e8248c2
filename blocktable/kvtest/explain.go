package kvtest

import (
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// Explain says where and why the prefix lookup of req's prompt stops now, as the Manager
// would look it up (the len-1 cap unless Config.FullPromptHit), counting nothing. The
// Env's index keeps an eviction history as large as the pool, so an evicted block is told
// from one never stored. It fails the test without an index.
func (e *Env) Explain(req *blocktable.Request) prefix.Explanation {
	if e.Index == nil {
		e.tb.Helper()
		e.tb.Fatalf("kvtest: Explain needs an index")
	}
	return e.explain(req, false)
}

func (e *Env) explain(req *blocktable.Request, eagle bool) prefix.Explanation {
	var x prefix.Explanation
	p := prefix.Prompt{Namespace: req.Namespace, Tokens: req.Prompt, MM: req.MM}
	e.Index.Explain(nil, &p, prefix.LookupOptions{LeaveOne: !e.cfg.FullPromptHit, EAGLE: eagle}, &x)
	return x
}

// ExpectMiss fails the test unless the lookup of req's prompt stops for reason.
func (e *Env) ExpectMiss(req *blocktable.Request, reason prefix.MissReason) prefix.Explanation {
	e.tb.Helper()
	x := e.Explain(req)
	if x.Reason != reason {
		e.tb.Fatalf("kvtest: lookup stops for %s (%d blocks matched, evicted by %s), want %s", x.Reason, x.MatchedBlocks, x.Evicted, reason)
	}
	return x
}
