package redisindex

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// ApplyContext applies one batch of server's events as llm-d's event pool does, so that the
// keys it writes are the keys llm-d's indexer would have written for the same batch:
//
//   - BlockStored: the entry {server, medium in lower case or "gpu", the event's group
//     when it has one} is added under the
//     request keys of the event's tokens, chained from the request key the parent's engine
//     key maps to (or from the model's root; the model is the event's LoRA name when it has
//     one), and the event's engine keys are mapped to them. An event whose parent Redis does
//     not know is skipped and counted in Stats.Orphans. An event without tokens moves blocks
//     to another tier: the entry is added under the request keys its engine keys map to.
//   - BlockRemoved: the entry (of the event's tier and group) is evicted from every
//     request key each engine key maps to, and the emptied keys pruned.
//   - AllBlocksCleared: Clear(server).
//
// Writes are queued in one pipeline that is sent whenever the next event needs to read
// Redis (the read rides in the same round trip, after the writes), so a batch costs one
// round trip plus one per event with a parent or removals. A batch storing or removing
// more than MaxBatchBlocks blocks is refused with ErrTooLarge before anything is written.
// On ErrUnavailable or ErrRefused part of the batch may be applied: apply it again (every
// write is idempotent).
func (x *Index) ApplyContext(ctx context.Context, server string, b *kvevents.Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalid)
	}
	if server == "" || len(server) > MaxServerName {
		return fmt.Errorf("%w: server %q", ErrInvalid, server)
	}
	blocks := 0
	for i := range b.Events {
		e := &b.Events[i]
		blocks += len(e.Hashes)
		if e.BlockSize > 0 {
			blocks += len(e.Tokens) / x.cfg.BlockSize
		}
	}
	if blocks > x.cfg.MaxBatchBlocks {
		return fmt.Errorf("%w: batch of %d blocks", ErrTooLarge, blocks)
	}
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	a := applier{x: x, ctx: ctx, server: server, pipe: x.rdb.Pipeline()}
	for i := range b.Events {
		e := &b.Events[i]
		var err error
		switch e.Kind {
		case kvevents.KindBlockStored:
			err = a.stored(e)
		case kvevents.KindBlockRemoved:
			err = a.removed(e)
		case kvevents.KindAllBlocksCleared:
			if err = a.flush(); err == nil {
				err = x.Clear(ctx, server)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := a.flush(); err != nil {
		return err
	}
	x.mu.Lock()
	x.stats.Batches++
	x.stats.Events += uint64(len(b.Events))
	x.stats.Stored += a.nStored
	x.stats.Removed += a.nRemoved
	x.stats.Orphans += a.orphans
	x.mu.Unlock()
	return nil
}

// Apply is ApplyContext without a caller's context (the Config.Timeout deadline still
// applies): kvevents.Applier, for the transports' subscribers.
func (x *Index) Apply(server string, b *kvevents.Batch) error {
	return x.ApplyContext(context.Background(), server, b)
}

type applier struct {
	x      *Index
	ctx    context.Context
	server string
	pipe   redis.Pipeliner

	nStored, nRemoved, orphans uint64
	engine, request            []uint64
	mm                         [][]string
}

func (a *applier) flush() error { return a.x.exec(a.ctx, a.pipe) }

func (a *applier) entry(e *kvevents.Event) Entry {
	tier := DefaultTier
	if e.HasMedium && e.Medium != "" {
		tier = strings.ToLower(e.Medium)
	}
	// llm-d's pool: the event's group_idx, when it has one, marks the entry (HasGroup,
	// GroupIdx), so a hybrid server's groups are separate fields and a sliding-window
	// group's removal leaves the full-attention group's entry in place.
	return Entry{Server: a.server, Tier: tier, HasGroup: e.HasGroup, Group: e.Group}
}

// resolve sends the queued writes with a ZREVRANGE of each engine key and returns the
// request key each maps to (ok false where none).
func (a *applier) resolve(engineKeys []uint64) ([]uint64, []bool, error) {
	cmds := make([]*redis.StringSliceCmd, len(engineKeys))
	for i, ek := range engineKeys {
		cmds[i] = a.pipe.ZRevRange(a.ctx, EngineKeyString(ek), 0, 0)
	}
	if err := a.flush(); err != nil {
		return nil, nil, err
	}
	keys, ok := make([]uint64, len(engineKeys)), make([]bool, len(engineKeys))
	for i, c := range cmds {
		keys[i], ok[i], _ = firstKey(c.Val())
	}
	return keys, ok, nil
}

func (a *applier) stored(e *kvevents.Event) error {
	x := a.x
	en := a.entry(e)
	f := []any{en.Field(), ""}
	a.engine = a.engine[:0]
	for _, h := range e.Hashes {
		a.engine = append(a.engine, h.Uint64())
	}
	if len(e.Tokens) < x.cfg.BlockSize {
		if len(e.Tokens) != 0 || len(a.engine) == 0 {
			return nil // a partial block: no request key, as in llm-d
		}
		keys, ok, err := a.resolve(a.engine)
		if err != nil {
			return err
		}
		a.request = a.request[:0]
		for i, k := range keys {
			if ok[i] && !containsKey(a.request, k) {
				a.request = append(a.request, k)
			}
		}
		if len(a.request) > 0 {
			queueAdd(a.ctx, a.pipe, nil, a.request, f)
		}
		return nil
	}
	model := x.cfg.Model
	if e.HasLoRAName && e.LoRAName != "" {
		model = e.LoRAName
	}
	var parent uint64
	if e.HasParent && e.Parent.Uint64() != 0 { // llm-d reads parent 0 as none
		keys, ok, err := a.resolve([]uint64{e.Parent.Uint64()})
		if err != nil {
			return err
		}
		if !ok[0] {
			a.orphans++
			return nil
		}
		parent = keys[0]
	}
	n := len(e.Tokens) / x.cfg.BlockSize
	mm := a.extraFeatures(e, n)
	x.mu.Lock()
	if parent == 0 {
		parent = x.keys.Root(model)
	}
	a.request = a.request[:0]
	for i := range n {
		var ids []string
		if mm != nil {
			ids = mm[i]
		}
		parent = x.keys.Block(parent, e.Tokens[i*x.cfg.BlockSize:(i+1)*x.cfg.BlockSize], ids)
		a.request = append(a.request, parent)
	}
	x.mu.Unlock()
	queueAdd(a.ctx, a.pipe, a.engine, a.request, f)
	a.nStored += uint64(len(a.engine))
	return nil
}

func containsKey(ks []uint64, k uint64) bool {
	for _, v := range ks {
		if v == k {
			return true
		}
	}
	return false
}

// extraFeatures returns each of the n request blocks' multimodal identifiers (nil when
// the event carries none), realigned from the engine's blocks as llm-d realigns them: an
// engine block's identifiers go to every request block it covers, and a request block
// covering several engine blocks gets all of theirs in order. Identifiers are strings,
// or the first element of an [identifier, offset] pair; other keys (LoRA, salt) do not
// enter llm-d's request keys.
func (a *applier) extraFeatures(e *kvevents.Event, n int) [][]string {
	if e.ExtraKeys == nil || n == 0 {
		return nil
	}
	eng := len(e.ExtraKeys)
	per := func(i int) []string {
		var ids []string
		for _, k := range e.ExtraKeys[i] {
			switch v := k.(type) {
			case string:
				ids = append(ids, v)
			case []any:
				if len(v) >= 1 {
					if s, ok := v[0].(string); ok {
						ids = append(ids, s)
					}
				}
			}
		}
		return ids
	}
	a.mm = a.mm[:0]
	for range n {
		a.mm = append(a.mm, nil)
	}
	switch {
	case eng == 0:
	case eng <= n:
		for i := range n {
			a.mm[i] = per(i * eng / n)
		}
	default:
		for i := range eng {
			c := i * n / eng
			a.mm[c] = append(a.mm[c], per(i)...)
		}
	}
	return a.mm
}

func (a *applier) removed(e *kvevents.Event) error {
	if len(e.Hashes) == 0 {
		return nil
	}
	a.engine = a.engine[:0]
	for _, h := range e.Hashes {
		a.engine = append(a.engine, h.Uint64())
	}
	if err := a.x.queueEvict(a.ctx, a.pipe, a.engine, []string{a.entry(e).Field()}); err != nil {
		return err
	}
	a.nRemoved += uint64(len(a.engine))
	return nil
}
