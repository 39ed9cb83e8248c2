package redisindex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config configures an Index. The zero value of each bound gives its default.
type Config struct {
	// BlockSize is the tokens per request key (llm-d's blockSizeTokens; 16 when zero).
	BlockSize int
	// Seed is the request-key seed, llm-d's hashSeed ("" by default). Request keys are
	// the router's own and never meet the servers' block hashes, so it need not be
	// vLLM's PYTHONHASHSEED; it must be what every router sharing the Redis uses.
	Seed string
	// Model is the base model's name: it seeds the request keys of blocks computed
	// without a LoRA adapter (an adapter's blocks are keyed under its name).
	Model string
	// Timeout bounds each call to Redis when the caller's context has no earlier
	// deadline (2 s when zero).
	Timeout time.Duration
	// MaxBatchBlocks bounds the blocks one batch may store or remove (65,536 when zero).
	MaxBatchBlocks int
	// MaxLookupBlocks bounds the blocks of one lookup (16,384 when zero): a longer
	// prompt's lookup covers its first MaxLookupBlocks blocks.
	MaxLookupBlocks int
	// MaxEntriesPerBlock bounds the entries read back per block (4,096 when zero);
	// the rest are ignored.
	MaxEntriesPerBlock int
}

func (c *Config) defaults() error {
	if c.BlockSize == 0 {
		c.BlockSize = 16
	}
	if c.BlockSize < 0 || c.BlockSize > MaxBlockSize {
		return fmt.Errorf("%w: %d", ErrBlockSize, c.BlockSize)
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.MaxBatchBlocks <= 0 {
		c.MaxBatchBlocks = 1 << 16
	}
	if c.MaxLookupBlocks <= 0 {
		c.MaxLookupBlocks = 1 << 14
	}
	if c.MaxEntriesPerBlock <= 0 {
		c.MaxEntriesPerBlock = 4096
	}
	return nil
}

// Index is the cluster index kept in Redis (or Valkey) in llm-d's layout. It is safe for
// concurrent use; any number of Index values, in any number of router replicas, may share
// one Redis with each other and with llm-d's indexer.
type Index struct {
	rdb redis.UniversalClient
	cfg Config

	mu    sync.Mutex // guards keys and the liveness table
	keys  *KeyHasher
	seen  map[string]time.Time
	runID string
	stats Stats
}

// Stats counts what an Index did.
type Stats struct {
	// Batches, Events count what Apply applied.
	Batches, Events uint64
	// Stored, Removed count blocks (engine keys) stored and removed.
	Stored, Removed uint64
	// Orphans counts BlockStored events whose parent's engine key Redis does not know:
	// skipped, as llm-d skips them, since no lookup could reach them.
	Orphans uint64
	// Cleared counts servers cleared (AllBlocksCleared, or the liveness rule).
	Cleared uint64
	// Restarts counts Redis restarts that CheckRestart saw.
	Restarts uint64
}

// New returns an Index over the Redis that rdb talks to, after checking it answers.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Index, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	kh, err := NewKeyHasher(cfg.BlockSize, cfg.Seed)
	if err != nil {
		return nil, err
	}
	x := &Index{rdb: rdb, cfg: cfg, keys: kh, seen: make(map[string]time.Time)}
	id, err := x.serverRunID(ctx)
	if err != nil {
		return nil, err
	}
	x.runID = id
	if err := loadScripts(ctx, rdb); err != nil {
		return nil, err
	}
	return x, nil
}

// BlockSize returns the tokens per request key.
func (x *Index) BlockSize() int { return x.cfg.BlockSize }

// Stats returns the counters.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stats
}

func (x *Index) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= x.cfg.Timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, x.cfg.Timeout)
}

func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// execErr is the error of a pipeline's Exec (cmds, err) that the caller must return:
// ErrUnavailable for a failure to talk to Redis at all, or for the first command Redis
// answered with a transient state (transientStates: LOADING while it loads its dataset
// after a restart, BUSY while a script runs past busy-reply-threshold, TRYAGAIN,
// CLUSTERDOWN and MASTERDOWN while a cluster or a replica recovers), which the same call
// will get past later; and ErrRefused naming the first command Redis answered with any
// other error (OOM at maxmemory, READONLY on a replica, NOPERM under an ACL, a write onto
// a key of another type), which retrying does not mend. Either names the command, and
// either would otherwise read as an empty result. Some replies are no failure: redis.Nil
// (nothing there), a prune script's NOSCRIPT, which exec reruns with EVAL, and WRONGTYPE
// on a read, which is a key under the layout's names that another application holds: not
// an entry, so skipped as lookups skip fields that are not entries (a Clear or a Lookup
// over a shared database must not fail for good on someone else's key).
func execErr(cmds []redis.Cmder, err error) error {
	var rerr redis.Error
	if err == nil {
		return nil
	}
	if !errors.As(err, &rerr) {
		return lastReplyErr(cmds, err)
	}
	for _, c := range cmds {
		if err := cmdErr(c); err != nil {
			return err
		}
	}
	return nil
}

// lastReplyErr is execErr's error for a pipeline whose Exec failed with err, which is no
// reply of Redis (a lost connection, the call's deadline): the reply of Redis the commands
// still hold from an earlier attempt, if the first command that failed holds one, else
// ErrUnavailable. Replies that are no failure (redis.Nil, NOSCRIPT) are passed over, as
// execErr passes them. go-redis sends a pipeline whose first reply is READONLY (or LOADING,
// TRYAGAIN, ...) again after a backoff; when the deadline (Config.Timeout) ends that
// backoff, Exec returns the deadline's error, but it stamps that error only on commands
// without one, so each keeps the reply it last had. That reply is what a router must act
// on: a replica's READONLY is ErrReadOnly, not a blip to retry.
func lastReplyErr(cmds []redis.Cmder, err error) error {
	var rerr redis.Error
	for _, c := range cmds {
		ce := c.Err()
		if ce == nil {
			continue
		}
		if !errors.As(ce, &rerr) {
			break // this attempt's own failure: no reply to prefer
		}
		if e := cmdErr(c); e != nil {
			return e
		}
	}
	return unavailable(err)
}

// cmdErr is ErrRefused naming c and its key, if Redis answered c with an error that is a
// failure (see execErr): ErrReadOnly for READONLY and ErrOutOfMemory for OOM, both kinds
// of ErrRefused; ErrUnavailable naming them if the error is a transient state, or if
// Redis never answered.
func cmdErr(c redis.Cmder) error {
	err := c.Err()
	if err == nil || errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "NOSCRIPT") {
		return nil
	}
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		switch c.Name() {
		case "hkeys", "zrange", "zrevrange": // the layout's reads
			return nil
		}
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return unavailable(err)
	}
	name := c.Name()
	if args := c.Args(); len(args) > 1 {
		switch strings.ToLower(name) {
		case "evalsha", "eval":
			if len(args) > 3 {
				name = fmt.Sprintf("%s (%v)", name, args[3]) // the script's first key
			}
		default:
			name = fmt.Sprintf("%s %v", name, args[1])
		}
	}
	kind := ErrRefused
	switch {
	case transient(err):
		kind = ErrUnavailable
	case redis.HasErrorPrefix(err, "READONLY"):
		kind = ErrReadOnly
	case redis.HasErrorPrefix(err, "OOM"):
		kind = ErrOutOfMemory
	}
	return fmt.Errorf("%w: %s: %w", kind, name, err)
}

// transientStates are the error codes of a Redis that will take the same command later:
// LOADING (its dataset is loading, after a restart), BUSY (a script or function runs past
// busy-reply-threshold), TRYAGAIN (a multi-key command during a slot migration),
// CLUSTERDOWN (a cluster without its quorum or a slot's master) and MASTERDOWN (a replica
// that lost its master, under replica-serve-stale-data no). go-redis retries all of them
// but BUSY itself (Options.MaxRetries; v9's shouldRetry); what is left after its retries,
// and every BUSY, is ErrUnavailable. READONLY stays a
// refusal (ErrReadOnly): a replica's, where a router pointed at one would retry for ever.
var transientStates = [...]string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"}

// transient reports whether err, a reply error, is one of transientStates: its code is
// the first word, so BUSYKEY and BUSYGROUP are not BUSY.
func transient(err error) bool {
	for _, s := range transientStates {
		if redis.HasErrorPrefix(err, s+" ") {
			return true
		}
	}
	return false
}

// RequestKeyString is a request key as llm-d names its hash: the decimal number.
func RequestKeyString(k uint64) string { return strconv.FormatUint(k, 10) }

// EngineKeyString is the name of the sorted set mapping an engine key (a server's own
// block hash, in its 64-bit form) to request keys: "engine:" and the decimal number.
func EngineKeyString(k uint64) string { return "engine:" + strconv.FormatUint(k, 10) }

func checkEntries(entries []Entry) error {
	for _, e := range entries {
		if e.Server == "" || len(e.Server) > MaxServerName || e.Group < 0 {
			return fmt.Errorf("%w: entry %q", ErrInvalid, e.String())
		}
	}
	return nil
}

// Add stores entries under every request key and, when engineKeys is not nil, maps the
// engine keys to the request keys as llm-d does: with n the longer of the two lists, pair
// i (i < n) maps engineKeys[i*len(engineKeys)/n] to requestKeys[i*len(requestKeys)/n] with
// score i, which covers one engine block per request block, several per request block and
// one per several.
func (x *Index) Add(ctx context.Context, engineKeys, requestKeys []uint64, entries []Entry) error {
	if len(requestKeys) == 0 || len(entries) == 0 {
		return fmt.Errorf("%w: no keys or entries to add", ErrInvalid)
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	if len(requestKeys)+len(engineKeys) > 2*x.cfg.MaxBatchBlocks {
		return fmt.Errorf("%w: %d keys", ErrTooLarge, len(requestKeys)+len(engineKeys))
	}
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	pipe := x.rdb.Pipeline()
	queueAdd(ctx, pipe, engineKeys, requestKeys, fields(entries))
	return execErr(pipe.Exec(ctx))
}

func fields(entries []Entry) []any {
	f := make([]any, 0, 2*len(entries))
	for _, e := range entries {
		f = append(f, e.Field(), "")
	}
	return f
}

// queueAdd queues llm-d's Add: ZADD engine:<e> i <r> per pair, then HSET of every entry
// field (empty value) per request key.
func queueAdd(ctx context.Context, pipe redis.Pipeliner, engineKeys, requestKeys []uint64, fieldValues []any) {
	if len(engineKeys) > 0 { // nil (or empty): no engine mapping, as for speculative entries
		n := max(len(engineKeys), len(requestKeys))
		for i := range n {
			ek := engineKeys[i*len(engineKeys)/n]
			rk := requestKeys[i*len(requestKeys)/n]
			pipe.ZAdd(ctx, EngineKeyString(ek), redis.Z{Score: float64(i), Member: RequestKeyString(rk)})
		}
	}
	for _, rk := range requestKeys {
		pipe.HSet(ctx, RequestKeyString(rk), fieldValues...)
	}
}

// RequestKey returns the request key an engine key maps to (the highest-scored, as
// llm-d's GetRequestKey); ok is false when Redis has no mapping for it.
func (x *Index) RequestKey(ctx context.Context, engineKey uint64) (key uint64, ok bool, err error) {
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	cmd := x.rdb.ZRevRange(ctx, EngineKeyString(engineKey), 0, 0)
	if err := cmdErr(cmd); err != nil {
		return 0, false, err
	}
	return firstKey(cmd.Val())
}

func firstKey(vals []string) (uint64, bool, error) {
	if len(vals) == 0 {
		return 0, false, nil
	}
	k, err := strconv.ParseUint(vals[0], 10, 64)
	if err != nil {
		return 0, false, nil // not a request key: no usable mapping
	}
	return k, true, nil
}

// Evict removes entries from the blocks each engine key maps to, deletes the blocks'
// hashes that are left empty and the engine key's set once all its blocks are empty (the
// two prune scripts). An engine key Redis does not know is skipped. It takes two round
// trips however many keys it evicts.
func (x *Index) Evict(ctx context.Context, engineKeys []uint64, entries []Entry) error {
	if len(entries) == 0 {
		return fmt.Errorf("%w: no entries to evict", ErrInvalid)
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	if len(engineKeys) > x.cfg.MaxBatchBlocks {
		return fmt.Errorf("%w: %d keys", ErrTooLarge, len(engineKeys))
	}
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	pipe := x.rdb.Pipeline()
	if err := x.queueEvict(ctx, pipe, engineKeys, fieldNames(entries)); err != nil {
		return err
	}
	return x.exec(ctx, pipe)
}

func fieldNames(entries []Entry) []string {
	f := make([]string, len(entries))
	for i, e := range entries {
		f[i] = e.Field()
	}
	return f
}

// queueEvict executes whatever pipe holds together with the ZRANGE of every engine key,
// then queues the HDELs and prune scripts on pipe for the caller to execute.
func (x *Index) queueEvict(ctx context.Context, pipe redis.Pipeliner, engineKeys []uint64, names []string) error {
	ranges := make([]*redis.StringSliceCmd, len(engineKeys))
	for i, ek := range engineKeys {
		ranges[i] = pipe.ZRange(ctx, EngineKeyString(ek), 0, -1)
	}
	if err := x.exec(ctx, pipe); err != nil {
		return err
	}
	for i, ek := range engineKeys {
		rks := ranges[i].Val()
		if len(rks) == 0 {
			continue
		}
		keys := make([]string, 0, 1+len(rks))
		keys = append(keys, EngineKeyString(ek))
		for _, rk := range rks {
			if _, err := strconv.ParseUint(rk, 10, 64); err != nil {
				continue // not a request key (llm-d would fail the eviction): leave it
			}
			pipe.HDel(ctx, rk, names...)
			queuePrune(ctx, pipe, pruneRequestScript, []string{rk})
			keys = append(keys, rk)
		}
		queuePrune(ctx, pipe, pruneEngineScript, keys)
	}
	return nil
}

// Clear removes every entry of server, on every tier and group, from every block's hash
// and deletes the hashes left empty, as llm-d's Clear does for AllBlocksCleared: a SCAN of
// the keyspace (engine: sets hold no entries and are skipped). It is O(keys), meant for
// rare events: a cache reset, a server that left the fleet.
func (x *Index) Clear(ctx context.Context, server string) error {
	if server == "" || len(server) > MaxServerName {
		return fmt.Errorf("%w: server %q", ErrInvalid, server)
	}
	// A whole-keyspace scan takes longer than one call: the deadline applies per page.
	var cursor uint64
	for {
		cctx, cancel := x.ctx(ctx)
		err := x.clearPage(cctx, server, &cursor)
		cancel()
		if err != nil {
			return err
		}
		if cursor == 0 {
			break
		}
	}
	x.mu.Lock()
	x.stats.Cleared++
	x.mu.Unlock()
	return nil
}

func (x *Index) clearPage(ctx context.Context, server string, cursor *uint64) error {
	scan := x.rdb.Scan(ctx, *cursor, "*", 1024)
	if err := cmdErr(scan); err != nil {
		return err
	}
	keys, next := scan.Val()
	pipe := x.rdb.Pipeline()
	var hkeys []*redis.StringSliceCmd
	var names []string
	for _, k := range keys {
		if strings.HasPrefix(k, "engine:") {
			continue
		}
		if _, err := strconv.ParseUint(k, 10, 64); err != nil {
			continue // not a block of this layout
		}
		names = append(names, k)
		hkeys = append(hkeys, pipe.HKeys(ctx, k))
	}
	if len(names) > 0 {
		if err := execErr(pipe.Exec(ctx)); err != nil {
			return err
		}
		for i, cmd := range hkeys {
			var stale []string
			for _, f := range cmd.Val() {
				if e, ok := ParseField(f); ok && e.Server == server {
					stale = append(stale, f)
				}
			}
			if len(stale) > 0 {
				pipe.HDel(ctx, names[i], stale...)
				queuePrune(ctx, pipe, pruneRequestScript, []string{names[i]})
			}
		}
		if err := x.exec(ctx, pipe); err != nil {
			return err
		}
	}
	*cursor = next
	return nil
}
