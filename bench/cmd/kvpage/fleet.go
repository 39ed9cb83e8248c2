package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kvpage/kvpage/blocks/sizing"
)

func init() {
	register(command{name: "fleet", summary: "GPUs needed for N concurrent conversations at an average context", run: runFleet})
}

const fleetHelp = `usage: kvpage fleet (--model NAME | --config config.json --params N | --kv-bytes-per-token SIZE --weights SIZE)
                    (--gpu NAME | --gpu-memory SIZE) --concurrent N --avg-context N [flags]

Sizes a fleet: peak concurrent conversations x average context gives the KV cache needed;
each replica (--tensor-parallel-size GPUs; when not given, the smallest size that fits,
unless a larger one needs a fifth fewer GPUs) holds as many average requests as its KV
cache budget allows; the replicas give the GPUs. With --max-model-len, a replica must also
hold one request of that length, and the average cannot exceed it. Sensitivity tables show
the same fleet at 4k, 8k, 32k and 128k tokens of context (thousands, as vLLM's 8k) and, for
a model, with its own 16-bit cache and an fp8 one.

` + sizeSyntax + `
A textbook example (10,000 conversations of 8k tokens, 0.05 MB a token, on 80 GB cards
with 14 GB of weights and 5 GB of overhead):
  kvpage fleet --gpu-memory 80GB --gpu-memory-utilization 1 --weights 14GB --overhead 5GB \
      --kv-bytes-per-token 0.05MB --concurrent 10k --avg-context 8k

Exit status: 0 when the fleet fits, 1 when one replica cannot hold one average request,
2 for bad input.

`

// sensitivityContexts are the contexts of the context sensitivity table, in vLLM's
// thousands (8k = 8,000), as the headline's --avg-context 8k reads.
var sensitivityContexts = []int64{4_000, 8_000, 32_000, 128_000}

func runFleet(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("fleet", fleetHelp)
	var f sizingFlags
	f.register(fs, sizingDefaults{
		maxNumSeqsHelp:  "cap on concurrent requests per replica, as vLLM's --max-num-seqs (0: no cap)",
		maxModelLenHelp: "longest context of one request, such as 32k or 32K: a replica must hold one, and --avg-context may not exceed it (default: only the average request must fit)"})
	var concurrent, avg sizeValue
	fs.fs.Var(&concurrent, "concurrent", "peak concurrent conversations, such as 10000 or 10k")
	fs.fs.Var(&avg, "avg-context", "average tokens per conversation (prompt + output so far), such as 8k (8,000) or 8K (8,192)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if err := checkFleetFlags(&f, &concurrent, &avg); err != nil {
		return err
	}
	in, err := f.resolve()
	if err != nil {
		return err
	}
	fc := sizing.FleetConfig{Plan: in.cfg, Concurrent: concurrent.n, AvgContext: avg.n}
	fl, err := sizing.PlanFleet(fc)
	if err != nil {
		return err
	}
	var byContext, byDType []fleetRow
	for _, ctx := range sensitivityContexts {
		c := fc
		c.AvgContext = ctx
		label := fmt.Sprintf("%dk", ctx/1000)
		if m := c.Plan.MaxModelLen; m > 0 && ctx > int64(m) {
			byContext = append(byContext, fleetRow{Label: label, Context: ctx, AboveMaxModelLen: true})
			continue
		}
		if c.Plan.TensorParallel == 0 {
			c.Plan.TensorParallel = fl.Replica.Config.TensorParallel // one size for the whole table
		}
		r, err := fleetRowFor(c, label)
		if err != nil {
			return err
		}
		byContext = append(byContext, r)
	}
	if !in.bytesOnly {
		own := in.cfg.Model.AutoCacheDType()
		for _, d := range []sizing.DType{own, sizing.FP8E4M3} {
			if d == 0 || (d == sizing.FP8E4M3 && own == d) {
				continue
			}
			c := fc
			c.Plan.CacheDType = d
			c.Plan.TensorParallel = fl.Replica.Config.TensorParallel
			label := d.String()
			if d == own {
				label += " (auto)"
			}
			r, err := fleetRowFor(c, label)
			if err != nil {
				return err
			}
			byDType = append(byDType, r)
		}
	}
	lenGiven := f.maxModelLen.set
	if f.json {
		err = writeJSON(stdout, fleetToJSON(fl, in.assumptions, byContext, byDType, lenGiven))
	} else {
		err = writeFleetTable(stdout, fl, in.assumptions, byContext, byDType, lenGiven)
	}
	if err != nil {
		return err
	}
	return fl.Err()
}

func checkFleetFlags(f *sizingFlags, concurrent, avg *sizeValue) error {
	if err := checkMaxModelLen(&f.maxModelLen); err != nil {
		return err
	}
	switch {
	case !concurrent.set:
		return badFlag("--concurrent is required: peak concurrent conversations")
	case concurrent.n <= 0:
		return badFlag("--concurrent must be positive, got %d", concurrent.n)
	case !avg.set:
		return badFlag("--avg-context is required: average tokens per conversation")
	case avg.n <= 0 || avg.n > sizing.MaxTokens:
		return badFlag("--avg-context must be between 1 and %d tokens, got %d", sizing.MaxTokens, avg.n)
	case f.maxModelLen.auto:
		return badFlag("--max-model-len auto has no meaning for a fleet: give a number or leave it out")
	case f.maxModelLen.set && avg.n > f.maxModelLen.n:
		return badFlag("--avg-context %s is longer than --max-model-len %s", commas(avg.n), commas(f.maxModelLen.n))
	}
	return nil
}

// fleetRow is one line of a sensitivity table.
type fleetRow struct {
	Label              string    `json:"-"`
	Context            int64     `json:"context"`
	KVCacheDType       string    `json:"kv_cache_dtype"`
	BytesPerToken      jsonBytes `json:"bytes_per_token"`
	BytesPerRequest    int64     `json:"bytes_per_request"`
	CacheBytes         int64     `json:"cache_bytes"`
	TensorParallelSize int       `json:"tensor_parallel_size"`
	PerReplica         int64     `json:"requests_per_replica"`
	Replicas           int64     `json:"replicas"`
	GPUsNeeded         *int64    `json:"gpus_needed"` // null when a replica cannot hold one request
	Fits               bool      `json:"fits"`
	// AboveMaxModelLen marks a context longer than --max-model-len: not planned.
	AboveMaxModelLen bool `json:"above_max_model_len,omitempty"`
}

func fleetRowFor(c sizing.FleetConfig, label string) (fleetRow, error) {
	f, err := sizing.PlanFleet(c)
	if err != nil {
		return fleetRow{}, err
	}
	r := fleetRow{
		Label: label, Context: f.AvgContext, KVCacheDType: f.Replica.Config.CacheDType.String(),
		BytesPerToken:      jsonBytes(f.Replica.BytesPerToken),
		BytesPerRequest:    f.BytesPerRequest * int64(f.Replica.Config.TensorParallel),
		CacheBytes:         f.CacheBytes,
		TensorParallelSize: f.Replica.Config.TensorParallel,
		PerReplica:         f.PerReplica, Replicas: f.Replicas, Fits: f.Fits(),
	}
	if f.Fits() {
		g := f.GPUs
		r.GPUsNeeded = &g
	}
	return r, nil
}

// fleetJSON is `kvpage fleet --json`: the replica's plan fields, then the fleet's.
type fleetJSON struct {
	planJSON
	Concurrent          int64      `json:"concurrent"`
	AvgContext          int64      `json:"avg_context"`
	TensorParallelChose bool       `json:"tensor_parallel_size_chosen"`
	FewestGPUsTP        int        `json:"fewest_gpus_tensor_parallel_size,omitempty"`
	FewestGPUs          int64      `json:"fewest_gpus,omitempty"`
	MaxModelLenGiven    bool       `json:"max_model_len_given"`
	BytesPerAvgRequest  int64      `json:"bytes_per_avg_request"`
	CacheBytes          int64      `json:"cache_bytes"`
	RequestsPerReplica  int64      `json:"requests_per_replica"`
	Replicas            int64      `json:"replicas"`
	GPUsNeeded          *int64     `json:"gpus_needed"`
	ByContext           []fleetRow `json:"sensitivity_context"`
	ByDType             []fleetRow `json:"sensitivity_kv_cache_dtype"`
}

func fleetToJSON(f sizing.Fleet, extra []string, byContext, byDType []fleetRow, lenGiven bool) fleetJSON {
	j := fleetJSON{
		planJSON:   planToJSON(f.Replica, fleetAssumptions(f, extra, lenGiven), nil),
		Concurrent: f.Concurrent, AvgContext: f.AvgContext, TensorParallelChose: f.ChosenTP,
		FewestGPUsTP: f.FewestGPUsTP, FewestGPUs: f.FewestGPUs, MaxModelLenGiven: lenGiven,
		BytesPerAvgRequest: f.BytesPerRequest * int64(f.Replica.Config.TensorParallel),
		CacheBytes:         f.CacheBytes, RequestsPerReplica: f.PerReplica, Replicas: f.Replicas,
		ByContext: byContext, ByDType: byDType,
	}
	if f.Fits() {
		g := f.GPUs
		j.GPUsNeeded = &g
	}
	j.Fits = f.Fits()
	if err := f.Err(); err != nil {
		j.Message = err.Error()
	}
	return j
}

func fleetAssumptions(f sizing.Fleet, extra []string, lenGiven bool) []string {
	a := append([]string{}, extra...)
	if f.ChosenTP {
		s := fmt.Sprintf("tensor parallel size %d chosen: the smallest of 1, 2, 4, ..., 64 that fits, unless a larger one needs %.0f%% fewer GPUs (tensor parallelism costs throughput per GPU)",
			f.Replica.Config.TensorParallel, 100*sizing.TPSaving)
		if f.FewestGPUsTP != 0 && f.FewestGPUsTP != f.Replica.Config.TensorParallel {
			s += fmt.Sprintf("; size %d would need %s GPUs", f.FewestGPUsTP, commas(f.FewestGPUs))
		}
		a = append(a, s)
	}
	if lenGiven {
		a = append(a, fmt.Sprintf("--max-model-len %s: a replica holds one request of that length, and longer contexts are not planned", commas(int64(f.Replica.Config.MaxModelLen))))
	} else {
		a = append(a, "no --max-model-len: a replica need only hold an average request")
	}
	return append(a, "requests are sized at the average context: paged KV cache holds what each request has, not its maximum")
}

func writeFleetTable(w io.Writer, f sizing.Fleet, extra []string, byContext, byDType []fleetRow, lenGiven bool) error {
	c := f.Replica.Config
	tp := int64(c.TensorParallel)
	if strings.HasSuffix(c.Model.Name, " per token") {
		fmt.Fprintf(w, "kvpage fleet: %s conversations x %s tokens on average, KV cache %s on %s",
			commas(f.Concurrent), commas(f.AvgContext), cacheLabel(c)[3:], c.GPU.Name)
	} else {
		fmt.Fprintf(w, "kvpage fleet: %s conversations x %s tokens on average, %s on %s, KV cache %s",
			commas(f.Concurrent), commas(f.AvgContext), c.Model.Name, c.GPU.Name, cacheLabel(c))
	}
	if lenGiven {
		fmt.Fprintf(w, ", max-model-len %s", commas(int64(c.MaxModelLen)))
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(a, b, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", a, b, note) }
	perReq := f.BytesPerRequest * tp
	row("KV cache per request", bothUnits(perReq), fmt.Sprintf("%s tokens, across %s of a replica", commas(f.AvgContext), theGPUs(int(tp))))
	row("KV cache needed", bothUnits(f.CacheBytes), commas(f.Concurrent)+" x "+bothUnits(perReq))
	tpNote := "--tensor-parallel-size"
	if f.ChosenTP {
		tpNote = "chosen: the smallest that fits"
		if f.FewestGPUsTP != 0 && f.FewestGPUsTP != c.TensorParallel {
			tpNote = fmt.Sprintf("chosen; %d would need %s GPUs, %.0f%% fewer, under the %.0f%% that pays for tensor parallelism",
				f.FewestGPUsTP, commas(f.FewestGPUs), 100*(1-float64(f.FewestGPUs)/float64(f.GPUs)), 100*sizing.TPSaving)
		} else if c.TensorParallel > 1 {
			tpNote = "chosen: fewest GPUs"
		}
	}
	row("tensor parallel size", fmt.Sprint(tp), tpNote)
	row("KV cache budget, per GPU", bothUnits(max(f.Replica.KVBudget, 0)), "after weights and overhead")
	row("KV cache budget, per replica", bothUnits(max(f.Replica.KVBudget, 0)*tp), "across "+theGPUs(int(tp)))
	row("requests per replica", commas(f.PerReplica), "")
	if f.Fits() {
		row("replicas", commas(f.Replicas), "")
		row("GPUs needed", commas(f.GPUs), fmt.Sprintf("%s x %d", commas(f.Replicas), tp))
	} else {
		row("GPUs needed", "-", "a replica cannot hold one average request: see stderr")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsensitivity to the average context (k = 1,000 tokens; KV cache %s, tensor parallel size %d):\n", cacheLabel(c), tp)
	writeRows(w, "context", byContext)
	if len(byDType) > 0 {
		fmt.Fprintf(w, "\nsensitivity to the KV cache dtype (context %s):\n", commas(f.AvgContext))
		writeRows(w, "dtype", byDType)
	}
	return writeAssumptions(w, assumptions(f.Replica, fleetAssumptions(f, extra, lenGiven)))
}

func writeRows(w io.Writer, label string, rows []fleetRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  %s\tKV/token\tKV/request\tKV needed\tTP\tper replica\tGPUs\t\n", label)
	for _, r := range rows {
		if r.AboveMaxModelLen {
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t-\tabove --max-model-len\t\n", r.Label)
			continue
		}
		gpus := "does not fit"
		if r.GPUsNeeded != nil {
			gpus = commas(*r.GPUsNeeded)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Label, exactBytes(sizing.Bits(r.BytesPerToken)),
			human(float64(r.BytesPerRequest)), human(float64(r.CacheBytes)), r.TensorParallelSize, commas(r.PerReplica), gpus)
	}
	tw.Flush()
}
