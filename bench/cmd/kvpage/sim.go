package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
)

func init() {
	register(command{name: "sim", summary: "fragmentation simulator: contiguous reservation (Orca) against paged blocks", run: runSim})
	defaultCommand = "sim"
}

// Defaults of the default comparison.
const (
	defaultSimModel    = "llama-3-8b"
	defaultSimGPU      = "h100-80gb"
	defaultSimRequests = 10000
	defaultBlockSweep  = "1,8,16,32,64,128,256"
	defaultOutDir      = "kvpage-out"
)

func simHelp() string {
	var b strings.Builder
	b.WriteString(`usage: kvpage [sim] [flags]

Runs the same requests through every allocation scheme under one iteration-level scheduler
(continuous batching, FCFS admission, one decode token per running request per step,
--max-num-seqs and --max-num-batched-tokens caps, recompute preemption) and reports how the
KV memory was used. With no flags it runs the default comparison: 10,000 ShareGPT-like
requests, a Llama-3-8B-sized model on an 80 GB H100 (vLLM's sizing: 0.9 of the GPU minus
weights and runtime overhead), every scheme, paging at block sizes 1 to 256 with and without
prefix sharing; it prints the table and writes charts into ./kvpage-out/.

Schemes: orca-max reserves --max-model-len tokens per request; orca-pow2 the next power of
two of its true length (its final number of token states: prompt + output - 1), at most
--max-model-len; orca-oracle exactly the true length. All three carve one arena by first
fit. paged is this library's blocktable.Manager (blocks on demand, prefix index, preemption).
hybrid (not in the default comparison) runs a hybrid --model preset (gpt-oss, Gemma 3, Llama
4 Scout, Qwen3-Next, Jamba) through blocktable/hybrid's Manager once per --hybrid-layouts
layout, its budget --kv-budget-tokens tokens of the model's attention layers (their KV in
--kv-cache-dtype, as the paged rows'; Mamba / linear-attention state in the model's data type,
--dtype, as vLLM's mamba_cache_dtype auto), and adds each KV-cache group's share of the budget below
the table.

Columns (shares of the KV budget, time-averaged over the saturated phase: from step 0 until
the waiting queue first empties after the last arrival):
  tokens    slots holding a running request's token state (a shared block counts once)
  reserved  slots reserved that the request will fill later (contiguous schemes)
  internal  contiguous: reservation beyond the true length; paged: empty tails of last blocks
  external  contiguous: free holes smaller than the next waiting request's reservation;
            paged: the budget left over by whole blocks, plus the null block
  free      the rest (for paged with prefix sharing, cached blocks nobody holds are free)
  mean run, peak run: running requests; done/kstep: completions per 1,000 steps;
  preempt: preemptions; hit rate: prefix-hit tokens / prompt tokens of first admissions
  (tokens loaded from --host-ram or --disk included); readmissions after preemption are
  counted apart, in the re-hit lines under the table.

Built-in workloads (--workload; LN(mean m, sigma s) is lognormal with mu = ln m - s^2/2,
rounded, at least 1; draws come from bench.SplitMix64 seeded with --seed):
`)
	for _, w := range sim.Workloads {
		fmt.Fprintf(&b, "  %-12s (max-model-len %d) %s\n", w.Name, w.MaxModelLen, w.Doc)
	}
	b.WriteString(`
Trace files (--trace): CSV with a header (arrival, input_len, output_len, prefix_group,
prefix_len; the Azure LLM inference trace's TIMESTAMP, ContextTokens, GeneratedTokens are
read as such), JSONL with the same keys, or a ShareGPT JSON array (first turn = prompt,
second = reply, lengths from a turn's "tokens" field or ceil(characters / 4); conversations
without both are counted and reported). A malformed row stops the run with its line number.
Requests whose prompt leaves no room for one output token within --max-model-len are
rejected, longer outputs are capped; both are counted in the output.

A scheme whose saturated phase is shorter than two request lifetimes (the mean output
length, in steps) is marked "!" in the table and short_phase in the JSON: its figures are
mostly the ramp-up at the start. Give more requests or less memory.

The KV budget: --kv-budget-tokens, or the sizing flags as plan reads them (--model or
--kv-bytes-per-token, --gpu or --gpu-memory, ...): one GPU's KV bytes / bytes per token.
` + sizeSyntax + `
--json prints the results as JSON on stdout instead of the table; --json-file and --csv
write files (hybrid rows add model, layout, state_block and a group_KIND_share column per
KV-cache group). Progress goes to stderr (--no-progress to silence it).
` + retentionHelp + `
`)
	return b.String()
}

type simFlags struct {
	sizing sizingFlags // memory from a model and a GPU, as plan reads it

	workload, trace, traceFormat string
	traceMaxLine                 int
	numPrompts                   int
	requestRate, stepDuration    float64
	seed                         uint64
	kvBudget                     sizeValue
	maxNumBatchedTokens          int
	schemes, blockSweep, sharing string
	enablePrefixCaching          bool
	noEnablePrefixCaching        bool
	eviction, preemption         string
	watermark                    float64
	hybridLayouts                string
	stateBlock                   int
	mambaMode                    string
	retention                    retentionFlags
	hostRAM, diskSize            bytesValue
	hostGBps, diskGBps           float64
	jsonPath, csvPath, outDir    string
	noCharts, noProgress         bool
}

// evictionExample is a run whose hit rates differ by policy (TestSimEvictionPoliciesDiffer
// checks a smaller one).
const evictionExample = "--workload conversation --eviction lru,fifo,s3fifo --kv-budget-tokens 64k --schemes paged " +
	"--enable-prefix-caching --block-size-sweep ''"

func workloadNames() string {
	names := make([]string, len(sim.Workloads))
	for i, w := range sim.Workloads {
		names[i] = w.Name
	}
	return strings.Join(names, ", ")
}

func (f *simFlags) register(set *flagSet) {
	fs := set.fs
	f.sizing.register(set, sizingDefaults{tp: 1, model: defaultSimModel, gpu: defaultSimGPU, maxNumSeqs: sim.DefaultMaxNumSeqs,
		maxNumSeqsHelp:  "cap on running requests; the default lets memory, not this cap, bound the batch (vLLM's default on an 80 GB GPU is 1024)",
		maxModelLenHelp: "longest prompt + output of a request, and orca-max's reservation (default: the workload's, 2048 for ShareGPT-like as in the paper; 2048 for a trace)"})
	fs.StringVar(&f.workload, "workload", "sharegpt", "built-in workload: "+workloadNames()+" (see above); or a retention replay: agentic, two-tenant")
	f.retention.register(set)
	fs.StringVar(&f.trace, "trace", "", "read requests from this trace file instead of --workload")
	fs.StringVar(&f.traceFormat, "trace-format", "auto", "trace format: auto (from the extension: .csv, .jsonl, .json), csv, azure, jsonl, sharegpt")
	fs.IntVar(&f.traceMaxLine, "trace-max-line-bytes", sim.DefaultMaxLineBytes, "longest trace record read: a CSV or JSONL line, or one ShareGPT conversation; a longer one is an error")
	fs.IntVar(&f.numPrompts, "num-prompts", 0, "number of requests (default: 10,000 for a workload, the whole trace for a file; a trace is cut to its first N)")
	fs.Float64Var(&f.requestRate, "request-rate", math.Inf(1), "requests per second as a Poisson process (seeded); inf puts every arrival at time 0 and, for a trace, replaces its own arrival times when given")
	fs.Float64Var(&f.stepDuration, "step-duration", sim.DefaultStepDuration, "seconds one scheduler step stands for: a request arriving at t s joins the queue at step floor(t / step-duration)")
	fs.Uint64Var(&f.seed, "seed", 42, "seed of the workload generator, the arrivals and the synthetic token ids")

	fs.Var(&f.kvBudget, "kv-budget-tokens", "KV budget in tokens, such as 448k; overrides the model and GPU")
	fs.IntVar(&f.maxNumBatchedTokens, "max-num-batched-tokens", 0, "cap on tokens computed per step, decodes and prefills together (default: max(8192, max-model-len + max-num-seqs))")

	fs.StringVar(&f.schemes, "schemes", strings.Join(defaultSchemes(), ","), "schemes to run, comma-separated: "+strings.Join(sim.SchemeNames(), ", ")+
		" (hybrid runs --model, a hybrid preset, through blocktable/hybrid under each --hybrid-layouts layout)")
	fs.StringVar(&f.hybridLayouts, "hybrid-layouts", strings.Join(sim.HybridLayouts, ","), "memory layouts the hybrid scheme runs, comma-separated: "+
		"uniform (vLLM's one page size), per-class (one pool per page size, split for max-model-len), carved (Jenga: large pages carved into each kind's pages)")
	fs.StringVar(&f.mambaMode, "mamba-cache-mode", "all", "hybrid scheme: vLLM's Mamba cache mode, all (a state block per block of prompt at admission) or align (a running state block and the last one)")
	fs.IntVar(&f.stateBlock, "state-block", 0, "hybrid scheme, per-class and carved layouts: tokens between cached Mamba / linear-attention states (0: the uniform layout's block, the same hit unit)")
	fs.StringVar(&f.blockSweep, "block-size-sweep", defaultBlockSweep, "more paged block sizes, run in the first --prefix-sharing mode, for the utilisation-vs-block-size chart (\"\" for none)")
	fs.StringVar(&f.sharing, "prefix-sharing", "off,on", "paged runs without (off) and with (on) prefix sharing, comma-separated; the first mode also runs over --block-size-sweep")
	fs.BoolVar(&f.enablePrefixCaching, "enable-prefix-caching", false, "vLLM's flag: paged runs with prefix sharing only (--prefix-sharing on)")
	fs.BoolVar(&f.noEnablePrefixCaching, "no-enable-prefix-caching", false, "vLLM's flag: paged runs without prefix sharing only (--prefix-sharing off)")
	fs.StringVar(&f.eviction, "eviction", "lru", "prefix-cache eviction policies to compare, comma-separated: "+strings.Join(evict.Names(), ", ")+
		"; each runs at --block-size with prefix sharing. A policy only picks which cached block goes when the KV budget "+
		"forces an eviction, so policies differ only when the budget is too small to keep what later requests would hit: "+
		"without shared prefixes (sharegpt, alpaca) or with a few hot system prompts (sysprompt) every policy reads "+
		"(almost) the same hit rate. Multi-turn chat separates them, e.g. "+evictionExample)
	fs.StringVar(&f.preemption, "preemption", "fcfs", "which running request to preempt when memory runs out: "+strings.Join(evict.PreemptionNames(), ", "))
	fs.Float64Var(&f.watermark, "watermark", 0, "fraction of blocks paged admission keeps free (vLLM's watermark), in [0, 1)")
	fs.Var(&f.hostRAM, "host-ram", "host memory for a KV tier below the GPU, such as 256GiB: prefix-sharing paged and hybrid runs demote evicted blocks to it and load hits back "+
		"(0 or unset: none; with --tensor-parallel-size N the GPUs share it, a block taking every GPU's shard). A hybrid run splits it across its layout's pools in proportion to each pool's share of the device budget (per-class: one pool per page size, "+
		"split for max-model-len; uniform and carved: one pool takes it all), in blocks of each pool's page bytes (each GPU's shard, a block taking every GPU's). "+
		"The tiers together hold at most 16,777,216 blocks (sim.MaxTierBlocks)")
	fs.Var(&f.diskSize, "disk", "disk space for a KV tier below the host, such as 2TB (needs --host-ram; a hybrid run splits it as --host-ram)")
	fs.Float64Var(&f.hostGBps, "host-gbps", 25, "host-to-GPU bandwidth in GB/s: the host link's copies run one after another on the step clock (--step-duration), and a request waits for its load before decoding; 0 is unlimited (PCIe 5 x16 is about 50, PCIe 4 about 25)")
	fs.Float64Var(&f.diskGBps, "disk-gbps", 5, "disk bandwidth in GB/s, to the GPU and from the host, timed as --host-gbps; 0 is unlimited (an NVMe drive is 3-14)")

	fs.StringVar(&f.jsonPath, "json-file", "", "also write the results as JSON to this file (--json prints them on stdout instead of the table)")
	fs.StringVar(&f.csvPath, "csv", "", "also write the results as CSV to this file")
	fs.StringVar(&f.outDir, "out-dir", defaultOutDir, "directory for the charts (PNG and SVG)")
	fs.BoolVar(&f.noCharts, "no-charts", false, "do not write charts")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress on stderr")
}

func runSim(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim", simHelp())
	var f simFlags
	f.register(fs)
	if err := fs.parse(args, stdout); err != nil {
		if ue, ok := err.(*usageError); ok && strings.HasPrefix(ue.msg, "unexpected argument") && fs.fs.Lookup("json") != nil {
			ue.msg += " (--json takes no value: it prints JSON on stdout; --json-file FILE writes a file)"
		}
		return err
	}
	return f.run(fs, stdout, stderr)
}

// simRun is what the flags resolve to.
type simRun struct {
	source   string
	trace    *sim.Trace
	prepared *sim.Prepared
	cfg      sim.Config
	memory   string
	// memoryShort is the budget in a few words, for the charts' titles.
	memoryShort string
	schemes     []sim.Scheme
	// outputs opened before the simulation, so that a bad path fails at once
	jsonFile, csvFile *os.File
}

func (f *simFlags) run(fs *flagSet, stdout, stderr io.Writer) error {
	if isReplayWorkload(f.workload) {
		return f.runReplay(stdout)
	}
	r, err := f.resolve()
	if err != nil {
		return err
	}
	if err := f.openOutputs(r); err != nil {
		return err
	}
	defer r.closeOutputs()
	total := int64(len(r.prepared.Requests) * len(r.schemes))
	prog := newProgress(stderr, !f.noProgress, total, len(r.schemes), runtime.GOMAXPROCS(0))
	results, err := sim.CompareProgress(r.prepared.Requests, r.cfg, r.schemes, prog.update)
	prog.stop()
	if err != nil {
		return err
	}
	// With --json, stdout holds the JSON alone; the notes go to stderr.
	notes := stdout
	if f.sizing.json {
		notes = stderr
		if err := sim.WriteJSON(stdout, f.report(fs, r, results)); err != nil {
			return err
		}
	} else {
		f.printHeader(stdout, r)
		if err := sim.WriteTable(stdout, results); err != nil {
			return err
		}
	}
	if r.jsonFile != nil {
		if err := finishFile(r.jsonFile, func(w io.Writer) error { return sim.WriteJSON(w, f.report(fs, r, results)) }); err != nil {
			return err
		}
		fmt.Fprintf(notes, "JSON: %s\n", f.jsonPath)
	}
	if r.csvFile != nil {
		if err := finishFile(r.csvFile, func(w io.Writer) error { return sim.WriteCSV(w, results) }); err != nil {
			return err
		}
		fmt.Fprintf(notes, "CSV: %s\n", f.csvPath)
	}
	if !f.noCharts {
		files, err := sim.WriteCharts(f.outDir, r.source+"; "+r.memoryShort, results)
		if err != nil {
			return fmt.Errorf("--out-dir: %w", err)
		}
		fmt.Fprintf(notes, "charts: %s\n", strings.Join(files, ", "))
	}
	return nil
}

// openOutputs creates the output files and the chart directory before anything runs, so
// that a path that cannot be written fails in a moment, not after the simulation.
func (f *simFlags) openOutputs(r *simRun) error {
	var err error
	if f.jsonPath != "" {
		if r.jsonFile, err = os.Create(f.jsonPath); err != nil {
			return badFlag("--json-file: %w", err)
		}
	}
	if f.csvPath != "" {
		if r.csvFile, err = os.Create(f.csvPath); err != nil {
			r.closeOutputs()
			return badFlag("--csv: %w", err)
		}
	}
	if !f.noCharts {
		if err := os.MkdirAll(f.outDir, 0o755); err != nil {
			r.closeOutputs()
			return badFlag("--out-dir: %w", err)
		}
		probe, err := os.CreateTemp(f.outDir, ".kvpage-probe-*")
		if err != nil {
			r.closeOutputs()
			return badFlag("--out-dir: %s is not writable: %w", f.outDir, err)
		}
		probe.Close()
		os.Remove(probe.Name())
	}
	return nil
}

func (r *simRun) closeOutputs() {
	for _, fh := range []*os.File{r.jsonFile, r.csvFile} {
		if fh != nil {
			fh.Close()
		}
	}
}

func (f *simFlags) resolve() (*simRun, error) {
	r := &simRun{}
	maxLen := sim.DefaultMaxModelLen
	if err := f.sizing.checkRanges(); err != nil {
		return nil, err
	}
	if f.numPrompts < 0 {
		return nil, badFlag("--num-prompts must not be negative, got %d", f.numPrompts)
	}
	if err := checkFloat("step-duration", f.stepDuration, 0, 3600, true, " s"); err != nil {
		return nil, err
	}
	if err := checkFloat("watermark", f.watermark, 0, 0.99, false, ""); err != nil {
		return nil, err
	}
	// Checked whether or not --host-ram or a hybrid scheme reads them: a NaN is refused,
	// never silently ignored.
	if err := checkLinkGBps("host-gbps", f.hostGBps); err != nil {
		return nil, err
	}
	if err := checkLinkGBps("disk-gbps", f.diskGBps); err != nil {
		return nil, err
	}
	if f.mambaMode != hybrid.MambaAll && f.mambaMode != hybrid.MambaAlign {
		return nil, badFlag("--mamba-cache-mode %q: want %s or %s", f.mambaMode, hybrid.MambaAll, hybrid.MambaAlign)
	}
	if err := checkMaxModelLen(&f.sizing.maxModelLen); err != nil {
		return nil, err
	}
	if f.sizing.maxModelLen.auto {
		return nil, badFlag("--max-model-len auto has no meaning for sim: give a number or leave it out")
	}
	if f.trace != "" {
		if f.traceMaxLine < 1 {
			return nil, badFlag("--trace-max-line-bytes must be positive, got %d", f.traceMaxLine)
		}
		t, err := readTrace(f.trace, f.traceFormat, sim.Limits{MaxLineBytes: f.traceMaxLine})
		if err != nil {
			return nil, err
		}
		if f.numPrompts > 0 && f.numPrompts < len(t.Requests) {
			t.Requests = t.Requests[:f.numPrompts]
		}
		r.trace, r.source = t, f.trace
	} else {
		w, err := sim.LookupWorkload(f.workload)
		if err != nil {
			return nil, badFlag("--workload: %w", err)
		}
		n := f.numPrompts
		if n == 0 {
			n = defaultSimRequests
		}
		r.trace, r.source, maxLen = w.Generate(n, f.seed), w.Name, w.MaxModelLen
	}
	if f.sizing.set["request-rate"] {
		if !(f.requestRate > 0) {
			return nil, badFlag("--request-rate must be positive (inf for all at once), got %g", f.requestRate)
		}
		sim.WithPoissonArrivals(r.trace, f.requestRate, f.seed)
		r.source += fmt.Sprintf(" at %g req/s", f.requestRate)
	}
	if f.sizing.maxModelLen.set {
		maxLen = int(f.sizing.maxModelLen.n)
	}
	capacity, err := f.budget(r, maxLen)
	if err != nil {
		return nil, err
	}
	r.cfg = sim.DefaultConfig(capacity)
	r.cfg.MaxModelLen, r.cfg.MaxNumSeqs, r.cfg.StepDuration, r.cfg.Seed = maxLen, f.sizing.maxNumSeqs, f.stepDuration, f.seed
	r.cfg.MaxNumBatchedTokens, r.cfg.TensorParallel = f.maxNumBatchedTokens, f.sizing.tp
	if r.cfg.MaxNumBatchedTokens == 0 {
		r.cfg.MaxNumBatchedTokens = max(sim.DefaultMaxNumBatchedTokens, maxLen+f.sizing.maxNumSeqs)
	}
	if err := r.cfg.Validate(); err != nil {
		return nil, err
	}
	r.prepared = sim.Prepare(r.trace, maxLen)
	if len(r.prepared.Requests) == 0 {
		return nil, badFlag("no request fits --max-model-len %d (%d rejected)", maxLen, r.prepared.Rejected)
	}
	if r.schemes, err = f.schemeList(); err != nil {
		return nil, err
	}
	if err := f.applyTiers(r, maxLen); err != nil {
		return nil, err
	}
	return r, nil
}

// minLinkGBps is the slowest tier link --host-gbps and --disk-gbps take (a hard disk's
// 0.1 GB/s). Slower, a block's copy spans so many steps that the run crawls for hours
// (1e-6) or its end step overflows an int (1e-300) and the figures are nonsense.
const minLinkGBps = 0.1

// checkLinkGBps refuses a link bandwidth other than 0 (unlimited) or one in
// [minLinkGBps, 10000] GB/s.
func checkLinkGBps(name string, v float64) error {
	if v == 0 || (v >= minLinkGBps && v <= 1e4) {
		return nil
	}
	return badFlag("--%s %s is out of range: want 0 (unlimited) or a number in [%v, 10000] GB/s", name, strconv.FormatFloat(v, 'g', -1, 64), minLinkGBps)
}

// applyTiers gives the prefix-sharing paged runs the --host-ram and --disk tiers, sized
// in blocks by the model's KV bytes per token (the model's and GPU's, even with
// --kv-budget-tokens).
func (f *simFlags) applyTiers(r *simRun, maxLen int) error {
	if !f.hostRAM.set || f.hostRAM.n == 0 {
		if f.diskSize.set && f.diskSize.n > 0 {
			return badFlag("--disk needs --host-ram: the disk tier lies below the host's")
		}
		return nil
	}
	in, err := f.kvSizing(maxLen)
	if err != nil {
		return err
	}
	p, err := sizing.NewPlan(in.cfg)
	if err != nil {
		return err
	}
	bpt := p.BytesPerTokenPerGPU.Bytes()
	tp := int64(max(p.Config.TensorParallel, 1))
	any, pagedTiers := false, false
	var hybridBytes []string // the hybrid rows' own bytes per token, one per model
	for i := range r.schemes {
		s := &r.schemes[i]
		if s.Name == sim.Hybrid && s.PrefixSharing {
			// In bytes: the scheme splits them across its layout's pools (sim.Tiers).
			s.Tiers = sim.Tiers{HostBytes: f.hostRAM.n, HostGBps: f.hostGBps, DiskGBps: f.diskGBps}
			if f.diskSize.set {
				s.Tiers.DiskBytes = f.diskSize.n
			}
			if err := s.Validate(&r.cfg); err != nil {
				return fmt.Errorf("--host-ram: %w", err) // sim.ErrInvalidConfig: bad input
			}
			// Validate has just sized the same layers (the model, KVCacheDType, and r.cfg's
			// TensorParallel, which is tp), so an error here is a bug, not bad input.
			b, err := sim.HybridTokenBytes(s.Model, s.KVCacheDType, int(tp))
			if err != nil {
				panic(fmt.Sprintf("kvpage: %s sized by Scheme.Validate but not by HybridTokenBytes: %v", s.Model, err))
			}
			h := fmt.Sprintf("%d bytes per token of %s's attention layers", b, s.Model)
			if tp > 1 {
				h = fmt.Sprintf("%d bytes per token per GPU of %s's attention layers", b, s.Model)
			}
			if !slices.Contains(hybridBytes, h) {
				hybridBytes = append(hybridBytes, h)
			}
			any = true
			continue
		}
		if s.Name != sim.Paged || !s.PrefixSharing {
			continue
		}
		// The run is one GPU of tp; every GPU's pool offloads its own shard of each block,
		// so a block takes tp x bb of the host (and disk), as kvpage plan counts it.
		bb := int64(math.Ceil(bpt * float64(s.BlockSize)))
		s.Tiers = sim.Tiers{HostGBps: f.hostGBps, DiskGBps: f.diskGBps, BlockBytes: bb}
		if s.Tiers.HostBlocks, err = sim.TierBlocks(f.hostRAM.n, bb, int(tp)); err != nil {
			return fmt.Errorf("--host-ram: %w", err) // sim.ErrInvalidConfig: bad input
		}
		if f.diskSize.set {
			if s.Tiers.DiskBlocks, err = sim.TierBlocks(f.diskSize.n, bb, int(tp)); err != nil {
				return fmt.Errorf("--disk: %w", err)
			}
		}
		if s.Tiers.HostBlocks == 0 {
			return badFlag("--host-ram %s holds no block of %s bytes", commas(f.hostRAM.n), commas(bb))
		}
		if err := s.Validate(&r.cfg); err != nil {
			return fmt.Errorf("--host-ram, --disk: %w", err)
		}
		any, pagedTiers = true, true
	}
	if !any {
		return badFlag("--host-ram needs a paged or hybrid run with prefix sharing (--schemes paged or hybrid, --prefix-sharing on)")
	}
	r.memory += fmt.Sprintf("; lower tiers: host %s (%s GB/s)", human(float64(f.hostRAM.n)), strconv.FormatFloat(f.hostGBps, 'f', -1, 64))
	if f.diskSize.set && f.diskSize.n > 0 {
		r.memory += fmt.Sprintf(", disk %s (%s GB/s)", human(float64(f.diskSize.n)), strconv.FormatFloat(f.diskGBps, 'f', -1, 64))
	}
	if pagedTiers {
		r.memory += fmt.Sprintf(", %s bytes per token of %s", strconv.FormatFloat(bpt, 'f', -1, 64), p.Config.Model.Name)
		if tp > 1 {
			r.memory += fmt.Sprintf(" per GPU, the tiers shared by the %d GPUs' shards", tp)
		}
	}
	if len(hybridBytes) > 0 {
		// The hybrid scheme sizes its pools and their tier shares in its own unit: its
		// attention layers' bytes per token (per GPU, --kv-cache-dtype as the paged rows),
		// not the sizing plan's bytes per token, which counts every layer.
		r.memory += "; hybrid runs split host and disk across their pools as the device budget, in blocks of " + strings.Join(hybridBytes, ", ")
	}
	return nil
}

func readTrace(path, format string, lim sim.Limits) (*sim.Trace, error) {
	var (
		ft  sim.Format
		err error
	)
	if format == "" || format == "auto" {
		ft, err = sim.DetectFormat(path)
	} else {
		ft, err = sim.ParseFormat(format)
	}
	if err != nil {
		return nil, badFlag("--trace-format: %w", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, badFlag("--trace: %w", err)
	}
	defer fh.Close()
	t, err := sim.ParseTraceLimited(fh, ft, lim)
	if err != nil {
		return nil, fmt.Errorf("--trace %s: %w", path, err)
	}
	return t, nil
}

// budget returns the KV budget in tokens and records in r where it came from.
func (f *simFlags) budget(r *simRun, maxLen int) (int, error) {
	if f.kvBudget.set {
		if f.kvBudget.n <= 0 || f.kvBudget.n > 1<<31-1 {
			return 0, badFlag("--kv-budget-tokens must be between 1 and 2^31-1, got %d", f.kvBudget.n)
		}
		r.memory = fmt.Sprintf("%s tokens (--kv-budget-tokens)", commas(f.kvBudget.n))
		r.memoryShort = fmt.Sprintf("KV budget %s tokens", commas(f.kvBudget.n))
		return int(f.kvBudget.n), nil
	}
	in, err := f.kvSizing(maxLen)
	if err != nil {
		return 0, err
	}
	p, err := sizing.NewPlan(in.cfg)
	if err != nil {
		return 0, err
	}
	tokens, err := sim.TokenBudget(p)
	if err != nil {
		return 0, err
	}
	bpt := p.BytesPerTokenPerGPU.Bytes()
	c := p.Config
	r.memory = fmt.Sprintf("%s tokens = %s KV bytes / %s bytes per token: %s%s (%s KV cache) on %s, %s x %.2f - %s weights - %s overhead",
		commas(int64(tokens)), commas(p.KVBudget), strconv.FormatFloat(bpt, 'f', -1, 64), c.Model.Name, runLabel(c), cacheLabel(c),
		c.GPU.Name, human(float64(p.GPUMemory)), c.GPUMemoryUtilization, sizing.GiB(p.WeightsPerGPU), sizing.GiB(c.RuntimeOverhead))
	if c.TensorParallel > 1 {
		r.memory += fmt.Sprintf(", one GPU of %d", c.TensorParallel)
	}
	r.memoryShort = fmt.Sprintf("%s%s on %s (%s), KV budget %s tokens", c.Model.Name, runLabel(c), c.GPU.Name, cacheLabel(c), commas(int64(tokens)))
	return tokens, nil
}

// runLabel names the data type the model runs in (--dtype, or vLLM's auto reading of the
// checkpoint) after its name in the budget line, " in fp32", when it is not bf16: the
// default's, which the default output has never named. The weights the budget subtracts
// are sized in it, so two runs that differ only in it read differently.
func runLabel(c sizing.PlanConfig) string {
	if d := c.Model.ServingDType(); d != sizing.BF16 {
		return " in " + d.String()
	}
	return ""
}

// kvSizing is what the sizing flags resolve to for a run of at most maxLen tokens: the
// plan the paged rows' tokens are sized by (budget, applyTiers), and the KV cache data
// type the hybrid rows' attention pages are sized in (schemeList), so that both kinds of
// row hold KV in the same --kv-cache-dtype.
func (f *simFlags) kvSizing(maxLen int) (sizingInput, error) {
	in, err := f.sizing.resolve()
	if err != nil {
		return in, err
	}
	in.cfg.MaxModelLen = maxLen
	return in, nil
}

// defaultSchemes are the schemes of the default comparison: every registered one but
// hybrid, which needs a hybrid model.
func defaultSchemes() []string {
	return slices.DeleteFunc(sim.SchemeNames(), func(n string) bool { return n == sim.Hybrid })
}

func hybridPresetNames() []string {
	var n []string
	for _, h := range sizing.HybridPresets() {
		n = append(n, h.Name)
	}
	return n
}

// schemeList builds the runs: the contiguous schemes, then the paged runs: the first
// --prefix-sharing mode (with the first eviction policy) at --block-size and over the
// sweep, every other combination of sharing mode and eviction policy at --block-size.
func (f *simFlags) schemeList() ([]sim.Scheme, error) {
	kinds, err := splitList(f.schemes, sim.ParseSchemeName)
	if err != nil {
		return nil, badFlag("--schemes: %w", err)
	}
	sweep, err := splitList(f.blockSweep, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxBlockSize {
			return 0, fmt.Errorf("%q is not a block size between 1 and %d tokens", s, maxBlockSize)
		}
		return n, nil
	})
	if err != nil {
		return nil, badFlag("--block-size-sweep: %w", err)
	}
	blockSize := f.sizing.blockSize
	sizes := append([]int{blockSize}, sweep...)
	sort.Ints(sizes)
	sizes = slices.Compact(sizes)
	mode := f.sharing
	switch {
	case f.enablePrefixCaching && f.noEnablePrefixCaching:
		return nil, badFlag("give --enable-prefix-caching or --no-enable-prefix-caching, not both")
	case (f.enablePrefixCaching || f.noEnablePrefixCaching) && f.sizing.set["prefix-sharing"]:
		return nil, badFlag("give --prefix-sharing or vLLM's --enable-prefix-caching / --no-enable-prefix-caching, not both")
	case f.enablePrefixCaching:
		mode = "on"
	case f.noEnablePrefixCaching:
		mode = "off"
	}
	sharing, err := splitList(mode, func(s string) (bool, error) {
		switch s {
		case "off", "false", "no":
			return false, nil
		case "on", "true", "yes":
			return true, nil
		}
		return false, fmt.Errorf("%q is not on or off", s)
	})
	if err != nil {
		return nil, badFlag("--prefix-sharing: %w", err)
	}
	policies, err := splitList(f.eviction, func(s string) (string, error) {
		_, err := evict.ByName(s)
		return s, err
	})
	if err != nil {
		return nil, badFlag("--eviction: %w", err)
	}
	if _, err := evict.PreemptionByName(f.preemption); err != nil {
		return nil, badFlag("--preemption: %w", err)
	}
	layouts, err := splitList(f.hybridLayouts, func(s string) (string, error) {
		if !slices.Contains(sim.HybridLayouts, s) {
			return "", fmt.Errorf("%q is not a layout (%s)", s, strings.Join(sim.HybridLayouts, ", "))
		}
		return s, nil
	})
	if err != nil {
		return nil, badFlag("--hybrid-layouts: %w", err)
	}
	if f.stateBlock < 0 {
		return nil, badFlag("--state-block must not be negative, got %d", f.stateBlock)
	}
	// Every row's label names the KV cache data type and the model's data type (--dtype,
	// resolved as vLLM's auto) the sizing flags resolve to (Scheme.KVCacheDType,
	// ModelDType): the hybrid rows size their pages and state in them, and the others'
	// tokens are sized in the one and the weights they leave room for in the other. None
	// when they give none (--kv-bytes-per-token), or cannot resolve one while the rows
	// take bare --kv-budget-tokens (the hybrid rows then refuse below).
	var kv, run sizing.DType
	if in, err := f.kvSizing(0); err == nil && !in.bytesOnly {
		kv, run = in.cfg.CacheDType, in.cfg.Model.ServingDType()
	}
	var out []sim.Scheme
	for _, k := range kinds {
		if k == sim.Hybrid {
			m, err := sizing.ModelPreset(f.sizing.model)
			if err != nil {
				return nil, badFlag("--schemes hybrid runs a hybrid model preset: give --model (%s)", strings.Join(hybridPresetNames(), ", "))
			}
			if _, err := sim.HybridModel(m.Name); err != nil {
				return nil, badFlag("--schemes hybrid: --model %s: %w", f.sizing.model, err)
			}
			in, err := f.kvSizing(0)
			if err != nil {
				return nil, err
			}
			if in.bytesOnly {
				return nil, badFlag("--schemes hybrid sizes --model's layers in --kv-cache-dtype; --kv-bytes-per-token gives neither")
			}
			for _, share := range sharing {
				for _, l := range layouts {
					s := sim.Scheme{Name: sim.Hybrid, Model: m.Name, Layout: l, BlockSize: blockSize,
						PrefixSharing: share, Preemption: f.preemption, StateBlock: f.stateBlock, KVCacheDType: in.cfg.CacheDType,
						ModelDType: in.cfg.Model.ServingDType()}
					if f.mambaMode != "all" {
						s.MambaMode = f.mambaMode
					}
					out = append(out, s)
				}
			}
			continue
		}
		if k != sim.Paged {
			out = append(out, sim.Scheme{Name: k, KVCacheDType: kv, ModelDType: run})
			continue
		}
		for i, share := range sharing {
			base := sim.Scheme{Name: sim.Paged, PrefixSharing: share, Preemption: f.preemption, Watermark: f.watermark, KVCacheDType: kv, ModelDType: run}
			evictions := []string{""}
			if share {
				evictions = policies
			}
			for j, pol := range evictions {
				s := base
				s.Eviction = pol
				if i > 0 || j > 0 {
					s.BlockSize = blockSize
					out = append(out, s)
					continue
				}
				for _, b := range sizes {
					s.BlockSize = b
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, badFlag("no scheme to run")
	}
	return out, nil
}

// splitList parses a comma-separated list, dropping duplicates and empty items.
func splitList[T comparable](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" || item == "none" {
			continue
		}
		v, err := parse(item)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (f *simFlags) printHeader(w io.Writer, r *simRun) {
	p := r.prepared
	fmt.Fprintf(w, "kvpage sim: %s from %s (seed %d)", plural(len(p.Requests), "request", "requests"), r.source, f.seed)
	var notes []string
	if p.Rejected > 0 {
		notes = append(notes, fmt.Sprintf("%s rejected: prompt leaves no room within max-model-len", commas(int64(p.Rejected))))
	}
	if p.Capped > 0 {
		notes = append(notes, fmt.Sprintf("%s capped at max-model-len", plural(p.Capped, "output", "outputs")))
	}
	for _, reason := range sortedKeys(r.trace.Skipped) {
		notes = append(notes, fmt.Sprintf("%s skipped: %s", commas(int64(r.trace.Skipped[reason])), reason))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "; %s", strings.Join(notes, "; "))
	}
	fmt.Fprintf(w, "\nKV budget: %s\n", r.memory)
	c := r.cfg
	fmt.Fprintf(w, "scheduler: max-model-len %d, max-num-seqs %d, max-num-batched-tokens %d, FCFS, preemption %s (recompute)\n",
		c.MaxModelLen, c.MaxNumSeqs, c.MaxNumBatchedTokens, f.preemption)
	fmt.Fprintf(w, "Shares of the KV budget; %s.\n\n", sim.PhaseNote)
}

// plural is "1 output" or "2 outputs", with thousands separators.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return commas(int64(n)) + " " + many
}

func (f *simFlags) report(fs *flagSet, r *simRun, results []*sim.Result) *sim.Report {
	flags := map[string]string{}
	fs.fs.VisitAll(func(fl *flag.Flag) {
		if _, alias := fs.aliases[fl.Name]; !alias {
			flags[fl.Name] = fl.Value.String()
		}
	})
	rep := &sim.Report{
		Seed: f.seed, Version: version(), Flags: flags, Source: r.source, Memory: r.memory,
		CapacityTokens: r.cfg.Capacity, Requests: len(r.prepared.Requests), Rejected: r.prepared.Rejected,
		Capped: r.prepared.Capped, Skipped: r.trace.Skipped, Phase: sim.PhaseNote,
	}
	for _, res := range results {
		row := sim.RowOf(res)
		rep.Schemes = append(rep.Schemes, row)
		if row.Warning != "" {
			rep.Warnings = append(rep.Warnings, row.Label+": "+row.Warning)
		}
	}
	return rep
}

// version is the module's version and VCS revision as the build recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			v += " " + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			v += " (modified)"
		}
	}
	return v
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// finishFile writes into a file opened before the run and closes it.
func finishFile(fh *os.File, write func(io.Writer) error) error {
	if err := write(fh); err != nil {
		return fmt.Errorf("writing %s: %w", fh.Name(), err)
	}
	return fh.Close()
}
