package redisindex

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/kvpage/kvpage/prefix"
)

// Lookup returns the entries of each request key in order, up to the first key no server
// holds (the prefix chain breaks there, as in llm-d's Lookup): one pipelined round trip of
// HKEYS. Fields that are not entries are skipped. When servers is not empty only their
// entries count.
func (x *Index) Lookup(ctx context.Context, requestKeys []uint64, servers []string) ([][]Entry, error) {
	if len(requestKeys) > x.cfg.MaxLookupBlocks {
		requestKeys = requestKeys[:x.cfg.MaxLookupBlocks]
	}
	if len(requestKeys) == 0 {
		return nil, nil
	}
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	pipe := x.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(requestKeys))
	for i, k := range requestKeys {
		cmds[i] = pipe.HKeys(ctx, RequestKeyString(k))
	}
	if err := execErr(pipe.Exec(ctx)); err != nil {
		return nil, err
	}
	out := make([][]Entry, 0, len(requestKeys))
	for _, cmd := range cmds {
		var es []Entry
		for i, f := range cmd.Val() {
			if i == x.cfg.MaxEntriesPerBlock {
				break
			}
			e, ok := ParseField(f)
			if ok && (len(servers) == 0 || slices.Contains(servers, e.Server)) {
				es = append(es, e)
			}
		}
		if len(es) == 0 {
			break
		}
		out = append(out, es)
	}
	return out, nil
}

// Hit is one server's answer to Match.
type Hit struct {
	Server string
	// Blocks is the number of the prompt's leading request blocks the server holds on
	// any tier.
	Blocks int
	// GPUBlocks is the number of leading blocks it holds on the "gpu" tier.
	GPUBlocks int
}

// MatchTokens appends to dst the hit of every server holding at least the prompt's first
// block, the best first (most blocks, then name), and returns dst. It hashes a text
// prompt's tokens into request keys under model ("" for the index's Model) and looks them
// up a stage at a time (see lookupStaged): one round trip for a prompt of up to 256
// blocks, and no more hashing or lookups past the stage where the chain breaks.
func (x *Index) MatchTokens(ctx context.Context, dst []Hit, model string, tokens []int32) ([]Hit, error) {
	if model == "" {
		model = x.cfg.Model
	}
	per, err := x.lookupStaged(ctx, model, &prefix.Prompt{Tokens: tokens})
	if err != nil {
		return dst, err
	}
	return appendHits(dst, per), nil
}

// firstStage is the blocks of a prompt lookup's first round trip; each further one covers
// four times as many as the one before.
const firstStage = 256

// lookupStaged returns the entries of p's leading blocks as Lookup does over all of
// PromptKeys, but hashes and looks up the keys a stage at a time: firstStage blocks, then
// four times as many each time, the next stage only when every block of the one before
// is held. The layout keeps no chain a lookup could follow without asking Redis: where
// the prompt's chain breaks (its first block no server holds) is known only from Redis's
// answers, so a lookup cannot stop hashing exactly there, as the in-memory ClusterIndex
// does, without a round trip per block. Stages bound the waste instead: a prompt whose
// hit ends early costs at most one stage of hashing and HKEYS past it (a 16,384-block
// miss 256 of each, not 16,384), and a whole hit at most 4 round trips instead of 1 up to
// the default MaxLookupBlocks (256, 1,024, 4,096, then the rest).
func (x *Index) lookupStaged(ctx context.Context, model string, p *prefix.Prompt) ([][]Entry, error) {
	n := x.lookupBlocks(p)
	var keys []uint64
	var per [][]Entry
	for from, stage := 0, firstStage; from < n; from, stage = from+stage, 4*stage {
		to := min(n, from+stage)
		var parent uint64
		if from > 0 {
			parent = keys[from-1]
		}
		x.mu.Lock()
		keys = x.appendKeys(keys, model, p, from, to, parent)
		x.mu.Unlock()
		got, err := x.Lookup(ctx, keys[from:to], nil)
		if err != nil {
			return nil, err
		}
		per = append(per, got...)
		if len(got) < to-from {
			break // the chain breaks in this stage: no block after it can be hit
		}
	}
	return per, nil
}

// appendHits turns the entries of each leading block into per-server hits: a server's hit
// is the number of leading blocks it holds, without a gap.
func appendHits(dst []Hit, per [][]Entry) []Hit {
	from := len(dst)
	at := make(map[string]int) // server -> index in dst
	for b, es := range per {
		for _, e := range es {
			i, ok := at[e.Server]
			if !ok {
				if b > 0 {
					continue // missed an earlier block: not a prefix hit
				}
				i = len(dst)
				at[e.Server] = i
				dst = append(dst, Hit{Server: e.Server})
			}
			h := &dst[i]
			if h.Blocks == b {
				h.Blocks = b + 1
			}
			if e.Tier == DefaultTier && h.GPUBlocks == b {
				h.GPUBlocks = b + 1
			}
		}
	}
	slices.SortFunc(dst[from:], func(a, b Hit) int {
		if a.Blocks != b.Blocks {
			return b.Blocks - a.Blocks
		}
		return strings.Compare(a.Server, b.Server)
	})
	return dst
}

// String formats a hit for logs.
func (h Hit) String() string { return fmt.Sprintf("%s:%d(gpu %d)", h.Server, h.Blocks, h.GPUBlocks) }
