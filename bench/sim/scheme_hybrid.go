package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
)

// Hybrid runs a hybrid model (Scheme.Model, a preset of blocks/sizing marked hybrid)
// through blocktable/hybrid's Manager under one of three memory layouts (Scheme.Layout):
//
//   - LayoutUniform, vLLM's: layers split into KV-cache groups of equal layer count, one
//     page size, attention's block raised until a page holds a Mamba state
//     (sizing.HybridModel.Uniform); one Manager, one pool.
//   - LayoutPerClass: each kind of layer (full, sliding, chunked, state) one group of its
//     own natural page (BlockSize tokens of attention, or a state); kinds of equal page
//     bytes share a pool, and each pool is one Manager with its share of the budget, split
//     ahead of time for max-model-len as sizing.CompareLayouts splits it. A request is
//     admitted into every pool at the longest hit all of them serve (each Manager's fixed
//     point under a common HitLimit, iterated until it stands), or into none.
//   - LayoutCarved (Jenga): the per-class pages carved from one pool: one Manager whose
//     block is a small unit page; a kind whose page is k units is k identical groups
//     (equal specs are looked up together), so its page takes k blocks.
//
// The byte budget is Capacity tokens of the model's attention layers (Capacity x the
// bytes a token takes in every attention layer, its KV in Scheme.KVCacheDType): the
// budget the sizing flags give a dense model of the same attention. State layers keep
// the model's data type. Usage is in those token-equivalents. State layers cache
// their state every StateBlock tokens under the per-class and carved layouts (0: the
// uniform layout's block, so that every layout has the same hit unit); the Manager
// allocates a state block per StateBlock tokens of a prompt at admission and releases all
// but the last as the sequence advances (vLLM's "all" cache mode; Scheme.MambaMode align,
// vLLM's "align" mode, keeps only the running and the last state), so a small StateBlock
// costs memory at admission. The Manager's free queue is vLLM's LRU: Eviction must be lru.
// With prefix sharing it can have lower tiers, sized in bytes (Tiers.HostBytes and
// DiskBytes), which each pool shares by its part of the device budget
// (scheme_hybrid_tiers.go).
// Without PrefixSharing requests never read the cache (hybrid.Request.SkipCacheRead).
const Hybrid = "hybrid"

// The layouts of the hybrid scheme (Scheme.Layout).
const (
	LayoutUniform  = "uniform"
	LayoutPerClass = "per-class"
	LayoutCarved   = "carved"
)

// HybridLayouts are the layouts of the hybrid scheme, in the order of the comparison.
var HybridLayouts = []string{LayoutUniform, LayoutPerClass, LayoutCarved}

func init() {
	registerScheme(schemeDef{name: Hybrid, blocks: true, validate: validateHybrid,
		build: func(c *Config, s *Scheme, seqs []seq) (allocator, error) { return newHybridAlloc(c, *s, seqs, false) }})
}

// HybridModel returns the hybrid preset name as the layout comparison describes it: bf16
// KV, the state in the model's own data type. A Scheme's KVCacheDType resizes the KV.
func HybridModel(name string) (sizing.HybridModel, error) {
	m, err := sizing.ModelPreset(name)
	if err != nil {
		return sizing.HybridModel{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	h, err := m.Hybrid(sizing.BF16)
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	kinds := map[sizing.HybridKind]bool{}
	for _, l := range h.Layers {
		kinds[l.Kind] = true
	}
	if len(kinds) < 2 {
		return h, fmt.Errorf("%w: %s has one kind of layer; the hybrid scheme runs hybrid models (%s)", ErrInvalidConfig, name, strings.Join(hybridNames(), ", "))
	}
	return h, nil
}

func hybridNames() []string {
	var n []string
	for _, h := range sizing.HybridPresets() {
		n = append(n, h.Name)
	}
	return n
}

func validateHybrid(s *Scheme, c *Config) error {
	if s.Model == "" {
		return fmt.Errorf("%w: the hybrid scheme needs a model (%s)", ErrInvalidConfig, strings.Join(hybridNames(), ", "))
	}
	if _, err := HybridModel(s.Model); err != nil {
		return err
	}
	switch s.Layout {
	case LayoutUniform, LayoutPerClass, LayoutCarved:
	default:
		return fmt.Errorf("%w: hybrid layout %q (%s)", ErrInvalidConfig, s.Layout, strings.Join(HybridLayouts, ", "))
	}
	if s.EvictionName() != "lru" && s.EvictionName() != "none" {
		return fmt.Errorf("%w: the hybrid Manager's free queue is vLLM's LRU; eviction %q is not available", ErrInvalidConfig, s.Eviction)
	}
	if s.Watermark != 0 {
		return fmt.Errorf("%w: the hybrid scheme has no watermark", ErrInvalidConfig)
	}
	if s.MambaMode != "" && s.MambaMode != hybrid.MambaAll && s.MambaMode != hybrid.MambaAlign {
		return fmt.Errorf("%w: Mamba cache mode %q (all, align)", ErrInvalidConfig, s.MambaMode)
	}
	if s.StateBlock < 0 || s.StateBlock > c.MaxModelLen {
		return fmt.Errorf("%w: state block %d outside [0, max-model-len %d]", ErrInvalidConfig, s.StateBlock, c.MaxModelLen)
	}
	if _, err := newHybridAlloc(c, *s, nil, true); err != nil { // the pools' sizes, their tiers'
		return err
	}
	return nil
}

// hybridPool is one Manager and what each of its groups stands for.
type hybridPool struct {
	m         *hybrid.Manager
	unitBytes int64 // bytes of one block of the pool
	// kinds[i] is the model layer kind of the Manager's group i; kindSet the distinct ones.
	kinds, kindSet []int
	cost           hybrid.AdmitCost // need's scratch
	// hostBlocks and diskBlocks are the pool's lower tiers (its share of Tiers' bytes in
	// its blocks); res is its last admission's (AdmitTiered).
	hostBlocks, diskBlocks int
	res                    hybrid.AdmitResult
}

// hybridAlloc is the hybrid scheme's allocator.
type hybridAlloc struct {
	model    sizing.HybridModel
	pools    []hybridPool
	seqs     []seq
	seed     uint64
	sharing  bool
	capacity int   // token-equivalents
	unit     int64 // bytes of one token-equivalent
	budget   int64 // bytes

	// Per layer kind: its blocks' size in tokens, its spec (for what it releases) and the
	// bytes one of its blocks takes over all its groups.
	kindBlock []int
	kindSpec  []hybrid.Spec
	kindBytes []int64
	names     []string

	running   map[int]*seq
	perHolder []int64
	prompt    []int32
	one       [1]int32
	pre       []blocktable.Preempted

	// readmitted counts the prompt tokens of readmissions after preemption, which every
	// pool must have counted as Resumed (check).
	readmitted uint64

	// align is set in Mamba align mode, whose prefills are split on block boundaries of
	// lcm tokens, the LCM of every kind's block (scheme_hybrid_admit.go).
	align bool
	lcm   int

	// tiers are the lower tiers (none when not enabled), clock their copies' timing over
	// every pool (tierlinks.go); tierTokens counts, per tier, the prompt tokens of first
	// admissions found there (TierResult.HitTokens), firstPrompt those admissions' prompt
	// tokens.
	tiers       Tiers
	clock       tierClock
	tierTokens  [prefix.MaxTiers]uint64
	firstPrompt uint64
	// stalls counts grows that stalled in the first pool, and in a later one (whose
	// earlier pools kept the token).
	stalls [2]uint64
}

// HybridTokenBytes is the bytes a token takes in every attention layer of the hybrid
// preset model on one GPU of tp (tp 1 or 0, the whole model), its KV cache in data type d
// (Scheme.KVCacheDType; 0 means bf16): the hybrid scheme's token-equivalent, in which it
// sizes its pools and their shares of the lower tiers.
func HybridTokenBytes(model string, d sizing.DType, tp int) (int64, error) {
	h, err := hybridModelOnGPU(model, d, 0, tp) // the run data type sizes only the state
	if err != nil {
		return 0, err
	}
	return attnTokenBytes(h), nil
}

// hybridModelOnGPU is HybridModel on one GPU of tp with its attention's KV cache in d (0:
// bf16) and its state in the data type it runs in, run (Scheme.ModelDType; 0: vLLM's
// --dtype auto; sizing.ModelSpec.HybridOnGPU): the layers both the scheme and
// HybridTokenBytes size.
func hybridModelOnGPU(name string, d, run sizing.DType, tp int) (sizing.HybridModel, error) {
	if _, err := HybridModel(name); err != nil {
		return sizing.HybridModel{}, err
	}
	if d == 0 {
		d = sizing.BF16
	}
	if !d.Valid() {
		return sizing.HybridModel{}, fmt.Errorf("%w: KV cache data type %d", ErrInvalidConfig, d)
	}
	m, _ := sizing.ModelPreset(name) // HybridModel found it
	m, err := m.WithRunDType(run)
	if err != nil {
		return sizing.HybridModel{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	h, err := m.HybridOnGPU(d, max(tp, 1))
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return h, nil
}

func attnTokenBytes(h sizing.HybridModel) int64 {
	var b int64
	for _, l := range h.Layers {
		b += int64(l.Layers) * l.TokenBytes
	}
	return b
}

// newHybridAlloc builds the scheme's pools; with dry set it only sizes them, building no
// Manager, so that Validate refuses what build would (the pools' tiers over MaxTierBlocks)
// before any memory is taken.
func newHybridAlloc(cfg *Config, s Scheme, seqs []seq, dry bool) (*hybridAlloc, error) {
	h, err := hybridModelOnGPU(s.Model, s.KVCacheDType, s.ModelDType, cfg.gpus())
	if err != nil {
		return nil, err
	}
	a := &hybridAlloc{model: h, seqs: seqs, seed: cfg.Seed, sharing: s.PrefixSharing, capacity: cfg.Capacity,
		unit: attnTokenBytes(h), running: map[int]*seq{}, tiers: s.Tiers}
	a.budget = int64(cfg.Capacity) * a.unit
	preempt, err := NewPreemptionPolicy(s.Preemption)
	if err != nil {
		return nil, err
	}
	u := h.Uniform()
	mode := s.MambaMode
	if mode == "" {
		mode = hybrid.MambaAll
	}
	stateBlock := s.StateBlock
	if stateBlock == 0 {
		stateBlock = u.BlockTokens
	}
	for _, l := range h.Layers {
		a.names = append(a.names, string(l.Kind))
		a.align = a.align || (l.Kind == sizing.KindState && mode == hybrid.MambaAlign)
	}
	spec := func(l sizing.HybridLayers, block int, bytes int64) hybrid.Spec {
		switch l.Kind {
		case sizing.KindSliding:
			return hybrid.SlidingWindow{Block: block, Window: l.Span, Bytes: bytes}
		case sizing.KindChunked:
			return hybrid.ChunkedLocal{Block: block, Chunk: l.Span, Bytes: bytes}
		case sizing.KindState:
			return hybrid.Mamba{Block: block, Bytes: bytes, Mode: mode}
		}
		return hybrid.FullAttention{Block: block, Bytes: bytes}
	}
	var tierBlocks int64 // the pools' host and disk blocks so far
	build := func(groups []hybrid.Spec, kinds []int, unitBytes, budget int64) error {
		n := budget / unitBytes
		if n < 2 || n > 1<<30 {
			return fmt.Errorf("%w: %s %s: a pool of %d blocks of %d bytes", ErrInvalidConfig, s.Model, s.Layout, n, unitBytes)
		}
		checkPoolGroups(s, len(groups))
		hc := hybrid.Config{Groups: groups, NumBlocks: int(n), Preemption: preempt}
		var host, disk int
		if s.Tiers.enabled() {
			// The pool's share of the host and the disk is its share of the device budget,
			// in blocks of its pages' per-GPU bytes, each taking TensorParallel of them
			// (TierBlocks, as the paged rows). Capped before the conversion: a share past
			// int64 would convert to a negative size; 2^62 bytes is over the limit anyway.
			share := func(b int64) int64 {
				f := float64(b) * float64(budget) / float64(a.budget)
				if f >= 1<<62 {
					return 1 << 62
				}
				return int64(f)
			}
			sizes := func() string {
				return fmt.Sprintf("%s %s: a host of %d bytes and a disk of %d (HostBytes, DiskBytes; --host-ram, --disk)", s.Model, s.Layout, s.Tiers.HostBytes, s.Tiers.DiskBytes)
			}
			var err error
			if host, err = TierBlocks(share(s.Tiers.HostBytes), unitBytes, cfg.gpus()); err != nil {
				return fmt.Errorf("%s: the pool's share of the host: %w", sizes(), err)
			}
			if disk, err = TierBlocks(share(s.Tiers.DiskBytes), unitBytes, cfg.gpus()); err != nil {
				return fmt.Errorf("%s: the pool's share of the disk: %w", sizes(), err)
			}
			if host == 0 || (s.Tiers.DiskBytes > 0 && disk == 0) {
				return fmt.Errorf("%w: %s give a pool of %d-byte blocks on each of %d GPUs, %.1f%% of the device budget, %d host and %d disk blocks; every pool needs one",
					ErrInvalidConfig, sizes(), unitBytes, cfg.gpus(), 100*float64(budget)/float64(a.budget), host, disk)
			}
			if tierBlocks += int64(host) + int64(disk); tierBlocks > MaxTierBlocks {
				return tooManyTierBlocks(tierBlocks, sizes()+" over the pools")
			}
			tc := tierConfig(host, disk, unitBytes)
			hc.Tiers = &tc
		}
		if dry {
			a.pools = append(a.pools, hybridPool{unitBytes: unitBytes, kinds: kinds, hostBlocks: host, diskBlocks: disk})
			return nil
		}
		m, err := hybrid.New(hc)
		if err != nil {
			return err
		}
		var set []int
		for _, k := range kinds {
			if len(set) == 0 || set[len(set)-1] != k {
				set = append(set, k)
			}
		}
		a.pools = append(a.pools, hybridPool{m: m, unitBytes: unitBytes, kinds: kinds, kindSet: set, hostBlocks: host, diskBlocks: disk})
		return nil
	}
	switch s.Layout {
	case LayoutUniform:
		block := int64(u.GroupLayers) * u.PageBytes
		var groups []hybrid.Spec
		var kinds []int
		for i, l := range h.Layers {
			sp := spec(l, u.BlockTokens, block)
			n := (l.Layers + u.GroupLayers - 1) / u.GroupLayers
			for range n {
				groups, kinds = append(groups, sp), append(kinds, i)
			}
			a.kindBlock = append(a.kindBlock, u.BlockTokens)
			a.kindSpec = append(a.kindSpec, sp)
			a.kindBytes = append(a.kindBytes, int64(n)*block)
		}
		if err := build(groups, kinds, block, a.budget); err != nil {
			return nil, err
		}
	default:
		pages := make([]int64, len(h.Layers))
		for i, l := range h.Layers {
			block := s.BlockSize
			pages[i] = int64(l.Layers) * int64(block) * l.TokenBytes
			if l.Kind == sizing.KindState {
				block, pages[i] = stateBlock, int64(l.Layers)*l.StateBytes
			}
			a.kindBlock = append(a.kindBlock, block)
			a.kindSpec = append(a.kindSpec, spec(l, block, pages[i]))
			a.kindBytes = append(a.kindBytes, pages[i])
		}
		if s.Layout == LayoutCarved {
			unit, mult := carveUnit(pages)
			var groups []hybrid.Spec
			var kinds []int
			for i := range h.Layers {
				for range mult[i] {
					groups, kinds = append(groups, a.kindSpec[i]), append(kinds, i)
				}
				a.kindBytes[i] = int64(mult[i]) * unit
			}
			if err := build(groups, kinds, unit, a.budget); err != nil {
				return nil, err
			}
			break
		}
		// One pool per page size, its share of the budget what the kinds in it need for a
		// max-model-len request (sizing.CompareLayouts' split).
		rows := h.Layers
		need := make([]int64, len(rows))
		var total int64
		for i, l := range rows {
			need[i] = heldAt(l, a.kindSpec[i], a.kindBlock[i], cfg.MaxModelLen) * pages[i]
			if l.Kind == sizing.KindState {
				// A prompt takes a state block per StateBlock tokens at admission in all
				// mode; align holds a running block and, for a step, the one before.
				need[i] = int64(ceilDiv(cfg.MaxModelLen, a.kindBlock[i])) * pages[i]
				if mode == hybrid.MambaAlign {
					need[i] = 2 * pages[i]
				}
			}
			total += need[i]
		}
		done := make([]bool, len(rows))
		for i := range rows {
			if done[i] {
				continue
			}
			var groups []hybrid.Spec
			var kinds []int
			var share int64
			for j := i; j < len(rows); j++ {
				if pages[j] == pages[i] && !done[j] {
					done[j] = true
					groups, kinds = append(groups, a.kindSpec[j]), append(kinds, j)
					share += need[j]
				}
			}
			if err := build(groups, kinds, pages[i], int64(float64(a.budget)*float64(share)/float64(total))); err != nil {
				return nil, err
			}
		}
	}
	if dry {
		return a, nil
	}
	a.lcm = 1
	for _, b := range a.kindBlock {
		a.lcm = a.lcm / gcd(a.lcm, b) * b
	}
	if s.Tiers.enabled() {
		ms := make([]transferer, len(a.pools))
		for i := range a.pools {
			ms[i] = a.pools[i].m
		}
		a.clock = newTierClock(s.Tiers, cfg.StepDuration, ms...)
	}
	return a, nil
}

func gcd(x, y int) int {
	for y != 0 {
		x, y = y, x%y
	}
	return x
}

// maxPoolGroups is the most KV-cache groups one pool takes: hybrid.New's limit (a
// group is stored in a byte, prefix.MaxGroups).
const maxPoolGroups = prefix.MaxGroups

// checkPoolGroups panics when a pool would take more than maxPoolGroups groups. No input
// reaches that, so it is an invariant, not bad input: the carved pool's groups are capped
// by carveUnit; a pool per page size takes at most one group per layer kind (a handful);
// and the uniform layout's groups, ceil(layers / GroupLayers) a kind, depend only on the
// embedded presets' layer counts (8 in one pool at most), whatever the data type, block size or
// tensor-parallel size. TestPoolGroupsOfEveryPreset checks every preset in every layout.
func checkPoolGroups(s Scheme, groups int) {
	if groups > maxPoolGroups {
		panic(fmt.Sprintf("sim: %s %s: a pool of %d KV-cache groups, above the hybrid Manager's %d", s.Model, s.Layout, groups, maxPoolGroups))
	}
}

// carveUnit picks the small page that large pages are carved into; mult is each page in
// units (rounded up), one KV-cache group per unit of the one carved pool, so their total
// stays within maxPoolGroups. The unit is the largest page dividing every kind's page
// within 1% that keeps the total within it, trying the smallest page divided by 1 to
// 256. When the smallest page itself as the unit takes too many groups (Qwen3-Next's
// state in bf16 beside its attention in fp4: 359), the unit is the smallest one above
// it that fits, and the smaller pages take one unit each.
func carveUnit(pages []int64) (unit int64, mult []int) {
	smallest, largest := pages[0], pages[0]
	var sum int64
	for _, p := range pages {
		smallest, largest = min(smallest, p), max(largest, p)
		sum += p
	}
	mult = make([]int, len(pages))
	carve := func(u int64) (groups int, carved int64) {
		for i, p := range pages {
			mult[i] = int((p + u - 1) / u)
			groups += mult[i]
			carved += int64(mult[i]) * u
		}
		return groups, carved
	}
	if groups, _ := carve(smallest); groups > maxPoolGroups {
		// Groups fall as the unit grows, to one a page at the largest page.
		lo, hi := smallest+1, largest
		for lo < hi {
			mid := lo + (hi-lo)/2
			if g, _ := carve(mid); g <= maxPoolGroups {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		carve(lo)
		return lo, mult
	}
	for d := int64(1); ; d++ {
		u := (smallest + d - 1) / d
		groups, carved := carve(u)
		if groups > maxPoolGroups { // d > 1: the last unit fitted
			carve(unit)
			return unit, mult
		}
		unit = u
		if float64(carved) <= 1.01*float64(sum) || d == 256 {
			return unit, mult
		}
	}
}

// heldAt is the blocks of bs tokens a kind holds for a sequence of n computed tokens.
func heldAt(l sizing.HybridLayers, sp hybrid.Spec, bs, n int) int64 {
	if n <= 0 {
		return 0
	}
	all := (n + bs - 1) / bs
	if l.Kind == sizing.KindState {
		return 1
	}
	return int64(all - sp.Skipped(n-1)/bs)
}

func (a *hybridAlloc) request(s *seq, n int) *hybrid.Request {
	if cap(a.prompt) < n {
		a.prompt = make([]int32, n, 2*n)
	}
	a.prompt = a.prompt[:n]
	for i := range a.prompt {
		a.prompt[i] = Token(a.seed, s.req, i)
	}
	// A readmission after preemption is Resumed: the Manager counts its re-hits apart, and
	// so does the scheduler (Result.ResumedHitRate).
	return &hybrid.Request{Prompt: a.prompt, MaxTokens: s.req.KVLen(), SkipCacheRead: !a.sharing, Resumed: s.preempted}
}

func (a *hybridAlloc) admit(s *seq, budget int) (prefill, hit int, ok bool, err error) {
	n := s.req.Input + s.generated
	req := a.request(s, n)
	req.HitLimit, hit = a.commonHit(req)
	req.SkipCacheRead = !a.sharing || (len(a.pools) > 1 && hit == 0)
	if n-hit > budget {
		return 0, 0, false, nil
	}
	if ok, err := a.admitPools(s, req, hit); !ok || err != nil {
		return 0, 0, false, err
	}
	s.stored = n
	a.running[s.req.ID] = s
	if s.preempted {
		a.readmitted += uint64(n)
	}
	if a.tiers.enabled() {
		if err := a.loaded(s, hit); err != nil {
			return 0, 0, false, err
		}
	}
	return n - hit, hit, true, nil
}

// commonHit is the hit every pool serves for req, with the cap (Request.HitLimit) that
// fixes it: one pool's own hit, or for several a common cap lowered until every
// Manager's fixed point under it is the cap itself.
func (a *hybridAlloc) commonHit(req *hybrid.Request) (limit, hit int) {
	switch {
	case !a.sharing:
		return 0, 0
	case len(a.pools) == 1:
		return 0, a.pools[0].match(req, a.tiers.enabled())
	}
	h := len(req.Prompt) - 1
	for h > 0 {
		low := h
		for i := range a.pools {
			req.HitLimit = h
			low = min(low, a.pools[i].match(req, a.tiers.enabled()))
		}
		if low == h {
			break
		}
		h = low
	}
	return h, h
}

// match is the hit p serves for req: its device hit, and with lower tiers the tokens
// past it that an admission would load (hybrid.Manager.MatchTiers), which are not
// computed either.
func (p *hybridPool) match(req *hybrid.Request, tiers bool) int {
	if tiers {
		hit, load, _ := p.m.MatchTiers(req) // refuses only a nil request
		return hit + load
	}
	hit, _ := p.m.MatchRequest(req) // refuses only a nil request
	return hit
}

// poolStats is every pool's Stats (tests compare them).
func (a *hybridAlloc) poolStats() []hybrid.Stats {
	var st []hybrid.Stats
	for _, p := range a.pools {
		st = append(st, p.m.Stats())
	}
	return st
}

func (a *hybridAlloc) grow(s *seq, victims []*seq) ([]*seq, error) {
	id := blocktable.SeqID(s.req.ID)
	a.one[0] = Token(a.seed, s.req, s.stored)
	// A stall (below) leaves the pools before s.grown holding the token already.
	for i := s.grown; i < len(a.pools); {
		err := a.pools[i].m.Append(id, a.one[:])
		if err == nil {
			i++
			continue
		}
		if !errors.Is(err, blocks.ErrOutOfBlocks) {
			return victims, err
		}
		// Preempt in the pool that is short; the victims leave every pool. Pools before
		// i already hold s's new token: a victim other than s is dropped everywhere, and
		// s, if it is the victim, too.
		if a.pre, err = a.pools[i].m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Recompute}, a.pre[:0]); err != nil {
			if errors.Is(err, blocks.ErrOutOfBlocks) && a.clock.copying() {
				// Every block of the pool is held or pinned by a copy in flight: s
				// stalls until a copy ends and frees one (tierlinks.go).
				s.stalled, s.grown = true, i
				a.stalls[min(i, 1)]++
				return victims, nil
			}
			return victims, fmt.Errorf("request %d cannot grow: %w", s.req.ID, err)
		}
		for _, v := range a.pre {
			for j, q := range a.pools {
				if j == i {
					continue
				}
				if _, err := q.m.PreemptSeq(v.Seq, blocktable.Recompute); err != nil {
					return victims, err
				}
			}
			vs := &a.seqs[v.Seq]
			delete(a.running, vs.req.ID)
			a.clock.drop(vs)
			vs.preempted, vs.grown = true, 0
			victims = append(victims, vs)
		}
		if s.preempted {
			return victims, a.clock.transfer()
		}
	}
	s.stored++
	s.stalled, s.grown = false, 0
	// A block that filled was committed: its write-through copies start.
	return victims, a.clock.transfer()
}

func (a *hybridAlloc) finish(s *seq) error {
	for _, p := range a.pools {
		if err := p.m.Finish(blocktable.SeqID(s.req.ID)); err != nil {
			return err
		}
	}
	delete(a.running, s.req.ID)
	a.clock.drop(s)
	return a.clock.transfer()
}

// usage is in token-equivalents of the byte budget: held is what the pools' blocks in
// use take, free what their free queues hold (cached blocks nobody holds included; the
// Manager does not count them apart, so Cached is 0), external the budget no whole block
// covers.
func (a *hybridAlloc) usage(*seq) Usage {
	var held, free int64
	for _, p := range a.pools {
		st := p.m.Stats()
		held += int64(st.Capacity-st.Free) * p.unitBytes
		free += int64(st.Free) * p.unitBytes
	}
	u := Usage{Tokens: held / a.unit, Free: free / a.unit}
	u.External = int64(a.capacity) - u.Tokens - u.Free
	return u
}

// groupBytes appends, per layer kind, the bytes of the blocks in use that its groups
// take. A pool of one kind is exact; a pool of several (uniform, carved) splits its blocks
// in use among its kinds in proportion to what the running requests' tables hold of each,
// a block shared by several requests counted for each (the Manager does not count blocks
// in use per group).
func (a *hybridAlloc) groupBytes(dst []int64) []int64 {
	dst = dst[:0]
	for range a.kindBytes {
		dst = append(dst, 0)
	}
	if cap(a.perHolder) < len(dst) {
		a.perHolder = make([]int64, len(dst))
	}
	per := a.perHolder[:len(dst)]
	clear(per)
	for _, s := range a.running {
		for i, l := range a.model.Layers {
			per[i] += heldAt(l, a.kindSpec[i], a.kindBlock[i], s.stored) * a.kindBytes[i]
		}
	}
	for _, p := range a.pools {
		st := p.m.Stats()
		inUse := int64(st.Capacity-st.Free) * p.unitBytes
		var sum int64
		for _, k := range p.kindSet {
			sum += per[k]
		}
		if sum == 0 {
			continue
		}
		for _, k := range p.kindSet {
			dst[k] += int64(float64(inUse) * float64(per[k]) / float64(sum))
		}
	}
	return dst
}

func (a *hybridAlloc) groupNames() []string { return a.names }

func (a *hybridAlloc) budgetBytes() int64 { return a.budget }

func (a *hybridAlloc) check(deep bool) error {
	for _, p := range a.pools {
		st := p.m.Stats()
		if st.Running != len(a.running) {
			return fmt.Errorf("a pool runs %d sequences, the simulator %d", st.Running, len(a.running))
		}
		if st.ResumedPromptTokens != a.readmitted {
			return fmt.Errorf("a pool counts %d resumed prompt tokens, the simulator readmitted %d", st.ResumedPromptTokens, a.readmitted)
		}
		if deep {
			if err := p.m.CheckInvariants(); err != nil {
				return err
			}
		}
	}
	if deep {
		// Every pool holds a running request's tokens; a stalled grow's pools before
		// s.grown hold its next one too.
		for id, s := range a.running {
			for i, p := range a.pools {
				info, err := p.m.Seq(blocktable.SeqID(id))
				want := s.stored
				if s.stalled && i < s.grown {
					want++
				}
				if err != nil || info.Tokens != want {
					return fmt.Errorf("request %d: pool %d holds %d tokens (%v), the simulator %d", id, i, info.Tokens, err, want)
				}
			}
		}
	}
	return nil
}
