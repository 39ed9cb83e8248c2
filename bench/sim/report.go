package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Row is one scheme's result as the JSON and CSV outputs spell it. The four shares of
// capacity (token_utilization, reserved_fraction, internal_fragmentation,
// external_fragmentation) and free_fraction add up to 1.
type Row struct {
	// Name is the scheme's registered name: orca-max, orca-pow2, orca-oracle or paged.
	Name          string `json:"name"`
	Label         string `json:"label"`
	BlockSize     int    `json:"block_size"`
	PrefixSharing bool   `json:"prefix_sharing"`
	// Eviction is the prefix cache's policy for paged rows ("none" without prefix
	// sharing); "" for contiguous rows.
	Eviction   string  `json:"eviction"`
	Preemption string  `json:"preemption"`
	Watermark  float64 `json:"watermark"`

	TokenUtilization      float64 `json:"token_utilization"`
	ReservedFraction      float64 `json:"reserved_fraction"`
	InternalFragmentation float64 `json:"internal_fragmentation"`
	ExternalFragmentation float64 `json:"external_fragmentation"`
	FreeFraction          float64 `json:"free_fraction"`
	CachedFraction        float64 `json:"cached_fraction"`

	MeanRunning       float64 `json:"mean_running"`
	PeakRunning       int     `json:"peak_running"`
	CompletedPerKStep float64 `json:"completed_per_kstep"`
	Preemptions       int     `json:"preemptions"`
	PrefixHitRate     float64 `json:"prefix_hit_rate"`

	SaturatedSteps   int `json:"saturated_steps"`
	WaitingSteps     int `json:"waiting_steps"`
	TotalSteps       int `json:"total_steps"`
	Completed        int `json:"completed"`
	TotalPreemptions int `json:"total_preemptions"`
	Requests         int `json:"requests"`
	CapacityTokens   int `json:"capacity_tokens"`

	// Model, Layout, StateBlock and Groups are the hybrid scheme's (Scheme, Result.Groups).
	// ResumedHitRate and ResumedPromptTokens are a preempting scheme's (Result's:
	// readmissions' re-hits, counted apart from PrefixHitRate).
	Model               string       `json:"model,omitempty"`
	Layout              string       `json:"layout,omitempty"`
	StateBlock          int          `json:"state_block,omitempty"`
	Groups              []GroupShare `json:"groups,omitempty"`
	ResumedHitRate      float64      `json:"resumed_hit_rate,omitempty"`
	ResumedPromptTokens int64        `json:"resumed_prompt_tokens,omitempty"`
	// Tiers are the lower tiers' figures (Result.Tiers), the device first.
	Tiers []TierResult `json:"tiers,omitempty"`

	// ShortPhase marks a saturated phase too short to trust (Result.ShortPhase); Warning
	// then says so in words.
	ShortPhase bool   `json:"short_phase"`
	Warning    string `json:"warning,omitempty"`
}

// ShortPhaseWarning is the warning of a row whose saturated phase is too short.
func ShortPhaseWarning(r *Result) string {
	if !r.ShortPhase {
		return ""
	}
	return fmt.Sprintf("saturated phase of %d steps, under %d request lifetimes (mean output %.0f tokens): the figures are mostly the ramp-up; "+
		"give more requests or less memory", r.SaturatedSteps, ShortPhaseLifetimes, r.MeanOutput)
}

// RowOf flattens a Result.
func RowOf(r *Result) Row {
	s := r.Scheme
	row := Row{
		Name: s.Name, Label: s.Label(), BlockSize: s.BlockSize, PrefixSharing: s.PrefixSharing,
		Eviction: s.EvictionName(), Watermark: s.Watermark,
		TokenUtilization: r.Shares.Tokens, ReservedFraction: r.Shares.Reserved,
		InternalFragmentation: r.Shares.Internal, ExternalFragmentation: r.Shares.External,
		FreeFraction: r.Shares.Free, CachedFraction: r.Shares.Cached,
		MeanRunning: r.MeanRunning, PeakRunning: r.PeakRunning, CompletedPerKStep: r.CompletedPerKStep,
		Preemptions: r.Preemptions, PrefixHitRate: r.PrefixHitRate,
		SaturatedSteps: r.SaturatedSteps, WaitingSteps: r.WaitingSteps, TotalSteps: r.TotalSteps,
		Completed: r.Completed, TotalPreemptions: r.TotalPreemptions, Requests: r.Requests, CapacityTokens: r.Capacity,
		ShortPhase: r.ShortPhase, Warning: ShortPhaseWarning(r),
		Model: s.Model, Layout: s.Layout, StateBlock: s.StateBlock, Groups: r.Groups, Tiers: r.Tiers,
		ResumedHitRate: r.ResumedHitRate, ResumedPromptTokens: r.ResumedPromptTokens,
	}
	if s.allocatesBlocks() {
		row.Preemption = s.Preemption
		if row.Preemption == "" {
			row.Preemption = "fcfs"
		}
	}
	return row
}

// Report is the whole run as --json writes it.
type Report struct {
	Seed    uint64 `json:"seed"`
	Version string `json:"version"`
	// Flags holds every flag of the run with its value, defaults included.
	Flags map[string]string `json:"flags"`
	// Source says where the requests came from (a workload or a trace file).
	Source string `json:"source"`
	// Memory says where the KV budget came from.
	Memory         string `json:"memory"`
	CapacityTokens int    `json:"capacity_tokens"`
	// Requests is how many requests ran; Rejected and Capped what max-model-len changed;
	// Skipped the source records that could not be requests, by reason.
	Requests int            `json:"requests"`
	Rejected int            `json:"rejected"`
	Capped   int            `json:"capped"`
	Skipped  map[string]int `json:"skipped,omitempty"`
	// Phase explains which steps the figures average over.
	Phase   string `json:"phase"`
	Schemes []Row  `json:"schemes"`
	// Warnings repeats every row's warning, labelled, so that none goes unseen.
	Warnings []string `json:"warnings,omitempty"`
}

// PhaseNote explains the measured phase; every output repeats it.
const PhaseNote = "shares of KV memory are time-averaged over the saturated phase: from step 0 until the " +
	"waiting queue first empties after the last arrival (the drain at the end is left out); running, " +
	"completions, preemptions and hit rate are over the same steps"

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// csvHeader matches Row's JSON names.
var csvHeader = []string{
	"name", "label", "block_size", "prefix_sharing", "eviction", "preemption", "watermark",
	"token_utilization", "reserved_fraction", "internal_fragmentation", "external_fragmentation",
	"free_fraction", "cached_fraction", "mean_running", "peak_running", "completed_per_kstep",
	"preemptions", "prefix_hit_rate", "saturated_steps", "waiting_steps", "total_steps", "completed",
	"total_preemptions", "requests", "capacity_tokens", "short_phase", "resumed_hit_rate", "resumed_prompt_tokens",
}

// WriteCSV writes one header row and one row per result, columns named as in the JSON.
// resumed_hit_rate and resumed_prompt_tokens are readmissions' re-hits, counted apart from
// prefix_hit_rate, for a scheme that preempts (Result.ResumedApart; empty for the others).
// When some result is the hybrid scheme's, the columns model, layout and state_block
// follow, then one group_NAME_share column per KV-cache group (Result.Groups: the part of
// the budget that group's blocks in use take), over the union of the rows' groups in the
// order they first appear; a row without a group leaves its cell empty. A kind that
// appears twice in a model is NAME2 the second time.
func WriteCSV(w io.Writer, results []*Result) error {
	cw := csv.NewWriter(w)
	groups, col := csvGroups(results)
	header := csvHeader
	if groups != nil {
		header = append(append(header[:len(header):len(header)], "model", "layout", "state_block"), groups...)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	d := strconv.Itoa
	for _, r := range results {
		x := RowOf(r)
		rec := []string{
			x.Name, x.Label, d(x.BlockSize), strconv.FormatBool(x.PrefixSharing), x.Eviction, x.Preemption, f(x.Watermark),
			f(x.TokenUtilization), f(x.ReservedFraction), f(x.InternalFragmentation), f(x.ExternalFragmentation),
			f(x.FreeFraction), f(x.CachedFraction), f(x.MeanRunning), d(x.PeakRunning), f(x.CompletedPerKStep),
			d(x.Preemptions), f(x.PrefixHitRate), d(x.SaturatedSteps), d(x.WaitingSteps), d(x.TotalSteps), d(x.Completed),
			d(x.TotalPreemptions), d(x.Requests), d(x.CapacityTokens), strconv.FormatBool(x.ShortPhase), "", "",
		}
		if r.ResumedApart {
			rec[len(csvHeader)-2], rec[len(csvHeader)-1] = f(x.ResumedHitRate), strconv.FormatInt(x.ResumedPromptTokens, 10)
		}
		if groups != nil {
			state := ""
			if x.Model != "" {
				state = d(x.StateBlock)
			}
			rec = append(rec, x.Model, x.Layout, state)
			cells := make([]string, len(groups))
			for i, name := range groupKeys(r.Groups) {
				cells[col[name]] = f(r.Groups[i].Share)
			}
			rec = append(rec, cells...)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvGroups returns the group columns of WriteCSV (nil when no result has groups) and the
// index of each group's column among them.
func csvGroups(results []*Result) ([]string, map[string]int) {
	var cols []string
	col := map[string]int{}
	for _, r := range results {
		for _, k := range groupKeys(r.Groups) {
			if _, ok := col[k]; !ok {
				col[k] = len(cols)
				cols = append(cols, k)
			}
		}
	}
	for i, k := range cols {
		cols[i] = "group_" + k + "_share"
	}
	return cols, col
}

// groupKeys names a result's groups for the CSV: the kind, and a count from 2 for a kind
// seen before in the same result.
func groupKeys(gs []GroupShare) []string {
	var keys []string
	seen := map[string]int{}
	for _, g := range gs {
		seen[g.Name]++
		k := g.Name
		if n := seen[g.Name]; n > 1 {
			k += strconv.Itoa(n)
		}
		keys = append(keys, k)
	}
	return keys
}

// WriteTable writes an aligned table, one row per result: the shares of KV memory as
// percentages of capacity, then the batch and throughput figures, then the length of the
// saturated phase in steps. A phase too short to trust (Result.ShortPhase) is marked "!"
// and explained in a line below the table.
func WriteTable(w io.Writer, results []*Result) error {
	width := 22
	for _, r := range results {
		width = max(width, len(r.Scheme.Label()))
	}
	head := "%-" + strconv.Itoa(width) + "s %7s %8s %8s %8s %6s %8s %8s %10s %8s %8s %9s\n"
	row := "%-" + strconv.Itoa(width) + "s %6.1f%% %7.1f%% %7.1f%% %7.1f%% %5.1f%% %8.1f %8d %10.1f %8d %8s %9d%s\n"
	if _, err := fmt.Fprintf(w, head, "scheme", "tokens", "reserved", "internal", "external", "free",
		"mean run", "peak run", "done/kstep", "preempt", "hit rate", "sat steps"); err != nil {
		return err
	}
	short := 0
	for _, r := range results {
		if r.ShortPhase {
			short++
		}
	}
	for _, r := range results {
		mark := ""
		switch {
		case r.ShortPhase:
			mark = " !"
		case short > 0:
			mark = "  " // keeps the rows aligned
		}
		hit := "-"
		if r.Scheme.PrefixSharing {
			hit = fmt.Sprintf("%.1f%%", 100*r.PrefixHitRate)
		}
		s := r.Shares
		if _, err := fmt.Fprintf(w, row, r.Scheme.Label(), 100*s.Tokens, 100*s.Reserved, 100*s.Internal, 100*s.External, 100*s.Free,
			r.MeanRunning, r.PeakRunning, r.CompletedPerKStep, r.Preemptions, hit, r.SaturatedSteps, mark); err != nil {
			return err
		}
	}
	if err := writeResumed(w, results, width); err != nil {
		return err
	}
	if err := writeGroups(w, results, width); err != nil {
		return err
	}
	if err := writeTiers(w, results, width); err != nil {
		return err
	}
	if short > 0 {
		_, err := fmt.Fprintf(w, "! saturated phase shorter than %d request lifetimes (%.0f steps: %d x the mean output of %.1f tokens): "+
			"these figures are mostly the ramp-up at the start, not a loaded cache; give more requests (--num-prompts) or less memory.\n",
			ShortPhaseLifetimes, ShortPhaseLifetimes*results[0].MeanOutput, ShortPhaseLifetimes, results[0].MeanOutput)
		return err
	}
	return nil
}

// writeResumed writes, for the rows that count readmissions apart (Result.ResumedApart:
// the paged and hybrid schemes) with prefix sharing and readmissions, what the readmitted requests re-hit.
func writeResumed(w io.Writer, results []*Result, width int) error {
	first := true
	for _, r := range results {
		if !r.ResumedApart || !r.Scheme.PrefixSharing || r.ResumedPromptTokens == 0 {
			continue
		}
		if first {
			if _, err := fmt.Fprintf(w, "\nReadmissions after preemption, counted apart from the hit rate (their re-hits are mostly their own blocks):\n"); err != nil {
				return err
			}
			first = false
		}
		if _, err := fmt.Fprintf(w, "%-*s  re-hit %5.1f%% of %d prompt tokens\n", width, r.Scheme.Label(), 100*r.ResumedHitRate, r.ResumedPromptTokens); err != nil {
			return err
		}
	}
	return nil
}

// writeGroups writes, for the hybrid rows, each KV-cache group's share of the budget.
func writeGroups(w io.Writer, results []*Result, width int) error {
	first := true
	for _, r := range results {
		if len(r.Groups) == 0 {
			continue
		}
		if first {
			if _, err := fmt.Fprintf(w, "\nKV-cache groups of %s, share of the KV budget their blocks in use take (adds up to tokens):\n", r.Scheme.Model); err != nil {
				return err
			}
			first = false
		}
		line := fmt.Sprintf("%-*s", width, r.Scheme.Label())
		for _, g := range r.Groups {
			line += fmt.Sprintf("  %s %5.1f%%", g.Name, 100*g.Share)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
