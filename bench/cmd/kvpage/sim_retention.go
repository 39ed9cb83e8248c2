package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
)

// The retention replays of issue 18 (bench/sim/retention.go) as sim workloads: they run
// at the level of the cache (each request admitted, given its reply and finished at once,
// one at a time), not under the step scheduler, so they print their own table.
const (
	workloadAgentic   = "agentic"
	workloadTwoTenant = "two-tenant"
)

// retentionModes are the rows of the agentic replay beside the plain eviction policies.
var retentionModes = []string{"session", "pinned", "session+pinned"}

const retentionHelp = `
Retention replays (--workload agentic, --workload two-tenant): cache-level replays of
issue 18 (bench/sim's package doc, "Retention replays", defines them exactly). Each request
is admitted, given its reply and finished at once, one at a time, through one
blocktable.Manager, so only what the cache keeps differs between rows; they print their own
table (--json: one object), not the scheduler's. Flags they read: --num-prompts (agentic:
sessions, default 300; two-tenant: events, default 20,000), --seed, --block-size,
--kv-budget-tokens (the cache; default 98,304 tokens for agentic, 32,768 for two-tenant),
--eviction (agentic: one row per policy, default lru,s3fifo; two-tenant: one pair of rows
per policy, default lru), --retention (agentic rows with session holds or pinned system
prompts: session, pinned, session+pinned, or none), --session-ttl (events a session hold
lasts, default 150), --flood-quota (blocks the flooding tenant may cache in the quota row,
default 1,024; 0 runs the no-quota row only), --json, --json-file.
`

// retentionFlags are the replay-only flags.
type retentionFlags struct {
	retention  string
	sessionTTL int
	floodQuota int
}

func (f *retentionFlags) register(set *flagSet) {
	fs := set.fs
	fs.StringVar(&f.retention, "retention", strings.Join(retentionModes, ","), "--workload agentic: retention rows, comma-separated: "+strings.Join(retentionModes, ", ")+" (none for none)")
	fs.IntVar(&f.sessionTTL, "session-ttl", sim.DefaultAgentic.SessionTTL, "--workload agentic: events a session's hold lasts after each turn")
	fs.IntVar(&f.floodQuota, "flood-quota", sim.DefaultFlood.FloodQuota, "--workload two-tenant: blocks the flooding tenant may cache in the quota rows (0: no quota rows)")
}

func isReplayWorkload(w string) bool { return w == workloadAgentic || w == workloadTwoTenant }

// replayFlags are the flags a retention replay reads; any other given is an error, since
// it would have no effect.
var replayFlags = []string{"workload", "num-prompts", "seed", "block-size", "kv-budget-tokens", "eviction", "retention",
	"session-ttl", "flood-quota", "json", "json-file", "no-progress", "no-charts"}

// replayReport is the --json output of a retention replay.
type replayReport struct {
	Workload string           `json:"workload"`
	Seed     uint64           `json:"seed"`
	Params   any              `json:"params"`
	Agentic  []agenticRowJSON `json:"agentic,omitempty"`
	Flood    []floodRowJSON   `json:"two_tenant,omitempty"`
}

type agenticRowJSON struct {
	Scheme           string  `json:"scheme"`
	Policy           string  `json:"policy"`
	Sessions         bool    `json:"session_holds"`
	PinPrompts       bool    `json:"pinned_prompts"`
	HitRate          float64 `json:"hit_rate"`
	Recomputed       int64   `json:"recomputed_tokens"`
	ShortSurvival    float64 `json:"short_pause_survival"`
	LongSurvival     float64 `json:"long_pause_survival"`
	Evictions        uint64  `json:"evictions"`
	Turns            int64   `json:"turns"`
	PromptTokens     int64   `json:"prompt_tokens"`
	HitTokens        int64   `json:"hit_tokens"`
	BackgroundTokens int64   `json:"background_tokens"`
	BackgroundHits   int64   `json:"background_hits"`
}

type floodRowJSON struct {
	Policy        string  `json:"policy"`
	Quota         int     `json:"flood_quota_blocks"`
	VictimHitRate float64 `json:"victim_hit_rate"`
	FloodHitRate  float64 `json:"flood_hit_rate"`
	VictimTokens  int64   `json:"victim_tokens"`
	VictimHits    int64   `json:"victim_hits"`
	FloodTokens   int64   `json:"flood_tokens"`
	FloodHits     int64   `json:"flood_hits"`
}

func rate(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// replayParams resolves the flags into the replay's parameters and rows.
func (f *simFlags) replayParams() (ag sim.AgenticParams, agRows []sim.RetentionScheme, fl sim.FloodParams, policies []string, err error) {
	for name := range f.sizing.set {
		if !slices.Contains(replayFlags, name) {
			return ag, nil, fl, nil, badFlag("--%s has no meaning for --workload %s, a cache-level replay (it reads %s)", name, f.workload, "--"+strings.Join(replayFlags[1:], ", --"))
		}
	}
	if f.numPrompts < 0 {
		return ag, nil, fl, nil, badFlag("--num-prompts must not be negative, got %d", f.numPrompts)
	}
	if err := checkBlockSize(f.sizing.blockSize); err != nil {
		return ag, nil, fl, nil, err
	}
	bs := f.sizing.blockSize
	policyDefault := "lru,s3fifo"
	if f.workload == workloadTwoTenant {
		policyDefault = "lru"
	}
	list := f.eviction
	if !f.sizing.set["eviction"] {
		list = policyDefault
	}
	if policies, err = splitList(list, func(s string) (string, error) {
		_, err := evict.ByName(s)
		return s, err
	}); err != nil {
		return ag, nil, fl, nil, badFlag("--eviction: %w", err)
	}
	budget := func(def int) (int, error) {
		tokens := int64(def)
		if f.kvBudget.set {
			tokens = f.kvBudget.n
		}
		if tokens < int64(bs) || tokens/int64(bs) > 1<<24 {
			return 0, badFlag("--kv-budget-tokens %d must hold between 1 and %d blocks of %d tokens", tokens, 1<<24, bs)
		}
		return int(tokens / int64(bs)), nil
	}
	switch f.workload {
	case workloadAgentic:
		ag = sim.DefaultAgentic
		ag.Seed, ag.BlockSize = f.seed, bs
		if f.numPrompts > 0 {
			if f.numPrompts > 1<<20 {
				return ag, nil, fl, nil, badFlag("--num-prompts: at most %d sessions", 1<<20)
			}
			ag.Sessions = f.numPrompts
		}
		if ag.Blocks, err = budget(sim.DefaultAgentic.Blocks * sim.DefaultAgentic.BlockSize); err != nil {
			return ag, nil, fl, nil, err
		}
		if f.retention.sessionTTL < 1 || f.retention.sessionTTL > 1<<30 {
			return ag, nil, fl, nil, badFlag("--session-ttl must be between 1 and %d events, got %d", 1<<30, f.retention.sessionTTL)
		}
		ag.SessionTTL = f.retention.sessionTTL
		modes, err := splitList(f.retention.retention, func(s string) (string, error) {
			if !slices.Contains(retentionModes, s) {
				return "", fmt.Errorf("%q is not a retention mode (%s, none)", s, strings.Join(retentionModes, ", "))
			}
			return s, nil
		})
		if err != nil {
			return ag, nil, fl, nil, badFlag("--retention: %w", err)
		}
		for _, p := range policies {
			agRows = append(agRows, sim.RetentionScheme{Name: p, Policy: p})
		}
		for _, m := range modes {
			// As sim.AgenticSchemes: session holds need the priority policy; pinned
			// prompts run under lru.
			r := sim.RetentionScheme{Name: m, Policy: "lru", PinPrompts: strings.Contains(m, "pinned")}
			if strings.HasPrefix(m, "session") {
				r.Policy, r.Sessions = "priority", true
			}
			agRows = append(agRows, r)
		}
		if len(agRows) == 0 {
			return ag, nil, fl, nil, badFlag("no row to run: give --eviction or --retention")
		}
	case workloadTwoTenant:
		fl = sim.DefaultFlood
		fl.Seed, fl.BlockSize = f.seed, bs
		if f.numPrompts > 0 {
			if f.numPrompts > 1<<24 {
				return ag, nil, fl, nil, badFlag("--num-prompts: at most %d events", 1<<24)
			}
			fl.Events = f.numPrompts
		}
		if fl.Blocks, err = budget(sim.DefaultFlood.Blocks * sim.DefaultFlood.BlockSize); err != nil {
			return ag, nil, fl, nil, err
		}
		if f.retention.floodQuota < 0 || f.retention.floodQuota > fl.Blocks {
			return ag, nil, fl, nil, badFlag("--flood-quota must be between 0 and the cache's %d blocks, got %d", fl.Blocks, f.retention.floodQuota)
		}
		fl.FloodQuota = f.retention.floodQuota
		if len(policies) == 0 {
			return ag, nil, fl, nil, badFlag("--eviction: no policy to run")
		}
	}
	return ag, agRows, fl, policies, nil
}

// runReplay runs a retention replay and prints its table or JSON.
func (f *simFlags) runReplay(stdout io.Writer) error {
	ag, agRows, fl, policies, err := f.replayParams()
	if err != nil {
		return err
	}
	var fh io.WriteCloser
	if f.jsonPath != "" {
		file, err := os.Create(f.jsonPath)
		if err != nil {
			return badFlag("--json-file: %w", err)
		}
		fh = file
		defer file.Close()
	}
	rep := &replayReport{Workload: f.workload, Seed: f.seed}
	tooSmall := func(err error) error {
		if errors.Is(err, blocks.ErrOutOfBlocks) || errors.Is(err, blocktable.ErrTooLarge) {
			return badFlag("--kv-budget-tokens: the cache cannot hold one request of the replay: %w", err)
		}
		return err
	}
	switch f.workload {
	case workloadAgentic:
		rep.Params = ag
		for _, sc := range agRows {
			r, err := sim.ReplayAgentic(ag, sc)
			if err != nil {
				return tooSmall(err)
			}
			rep.Agentic = append(rep.Agentic, agenticRowJSON{Scheme: sc.Name, Policy: sc.Policy, Sessions: sc.Sessions, PinPrompts: sc.PinPrompts,
				HitRate: r.HitRate(), Recomputed: r.Recomputed, ShortSurvival: r.ShortSurvival(), LongSurvival: r.LongSurvival(),
				Evictions: r.Evictions, Turns: r.Turns, PromptTokens: r.PromptTokens, HitTokens: r.HitTokens,
				BackgroundTokens: r.BackgroundTokens, BackgroundHits: r.BackgroundHits})
		}
	case workloadTwoTenant:
		rep.Params = fl
		for _, pol := range policies {
			p := fl
			p.Policy = pol
			quotas := []bool{false}
			if fl.FloodQuota > 0 {
				quotas = append(quotas, true)
			}
			for _, q := range quotas {
				r, err := sim.ReplayFlood(p, q)
				if err != nil {
					return tooSmall(err)
				}
				row := floodRowJSON{Policy: pol, VictimHitRate: r.VictimHitRate(), FloodHitRate: rate(r.FloodHits, r.FloodTokens),
					VictimTokens: r.VictimTokens, VictimHits: r.VictimHits, FloodTokens: r.FloodTokens, FloodHits: r.FloodHits}
				if q {
					row.Quota = fl.FloodQuota
				}
				rep.Flood = append(rep.Flood, row)
			}
		}
	}
	if fh != nil {
		if err := writeJSON(fh, rep); err != nil {
			return err
		}
	}
	if f.sizing.json {
		return writeJSON(stdout, rep)
	}
	return writeReplayTable(stdout, rep)
}

func writeReplayTable(w io.Writer, rep *replayReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	switch rep.Workload {
	case workloadAgentic:
		p := rep.Params.(sim.AgenticParams)
		fmt.Fprintf(w, "kvpage sim: agentic replay, %s sessions (%d open), %d system prompts of %s tokens, cache %s blocks of %d, seed %d\n",
			commas(int64(p.Sessions)), p.Concurrent, p.SystemPrompts, commas(int64(p.SystemTokens)), commas(int64(p.Blocks)), p.BlockSize, p.Seed)
		fmt.Fprintf(w, "pauses: short %d-%d events, long %d-%d (%d%%); session holds %d events; cache-level (bench/sim's doc, \"Retention replays\")\n\n",
			p.ShortPauseMin, p.ShortPauseMax, p.LongPauseMin, p.LongPauseMax, p.LongPausePercent, p.SessionTTL)
		fmt.Fprintln(tw, "scheme\tpolicy\tagents' hit rate\trecomputed tokens\tsurvived short pause\tsurvived long pause\tevictions\t")
		for _, r := range rep.Agentic {
			fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\t%.1f%%\t%.1f%%\t%s\t\n", r.Scheme, r.Policy, 100*r.HitRate, commas(r.Recomputed),
				100*r.ShortSurvival, 100*r.LongSurvival, commas(int64(r.Evictions)))
		}
	case workloadTwoTenant:
		p := rep.Params.(sim.FloodParams)
		fmt.Fprintf(w, "kvpage sim: two-tenant replay, %s events, victim %d documents of %s tokens (%d%% of events), flood %d prompts of %d-%d tokens an event, cache %s blocks of %d, seed %d\n\n",
			commas(int64(p.Events)), p.Documents, commas(int64(p.DocumentTokens)), p.VictimPercent, p.FloodPerEvent, p.FloodMin, p.FloodMax,
			commas(int64(p.Blocks)), p.BlockSize, p.Seed)
		fmt.Fprintln(tw, "policy\tflood quota\tvictim's hit rate\tflood's hit rate\t")
		for _, r := range rep.Flood {
			q := "none"
			if r.Quota > 0 {
				q = commas(int64(r.Quota)) + " blocks"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.1f%%\t\n", r.Policy, q, 100*r.VictimHitRate, 100*r.FloodHitRate)
		}
	}
	return tw.Flush()
}
