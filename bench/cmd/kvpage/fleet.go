package main

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kvpage/kvpage/blocks/sizing"
)

func init() {
	register(command{name: "fleet", summary: "GPUs needed for N concurrent conversations at an average context", run: runFleet})
}

const fleetHelp = `usage: kvpage fleet (--model NAME | --config config.json --params N) --gpu NAME --concurrent N --avg-context N [flags]

Sizes a fleet: peak concurrent conversations x average context gives the KV cache needed;
each replica (--tensor-parallel-size GPUs, or the size needing fewest GPUs when not given)
holds as many average requests as its KV cache budget allows; the replicas give the GPUs.
Sensitivity tables show the same fleet at 4K, 8K, 32K and 128K tokens of context and
with an fp16 or fp8 cache. Sizes parse as vLLM parses them: 8k = 8,000, 8K = 8,192.
Exit status: 0 when the fleet fits, 1 when one replica cannot hold one average request,
2 for a bad flag.

`

// sensitivityContexts are the contexts of the context sensitivity table.
var sensitivityContexts = []int64{4 << 10, 8 << 10, 32 << 10, 128 << 10}

// sensitivityDTypes are the cache types of the dtype sensitivity table.
var sensitivityDTypes = []sizing.DType{sizing.FP16, sizing.FP8E4M3}

func runFleet(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), fleetHelp); fs.PrintDefaults() }
	var f sizingFlags
	f.register(fs, 0)
	var concurrent, avg sizeValue
	fs.Var(&concurrent, "concurrent", "peak concurrent conversations, such as 10000 or 10k")
	fs.Var(&avg, "avg-context", "average tokens per conversation (prompt + output so far), such as 8k or 8K")
	if !f.parse(fs, args) {
		return errUsage
	}
	in, err := f.resolve(fs)
	if err == nil {
		err = checkFleetFlags(&f, &concurrent, &avg)
	}
	if err != nil {
		return report("fleet", err, stderr)
	}
	fc := sizing.FleetConfig{Plan: in.cfg, Concurrent: concurrent.n, AvgContext: avg.n}
	fl, err := sizing.PlanFleet(fc)
	if err != nil {
		return report("fleet", err, stderr)
	}
	var byContext, byDType []fleetRow
	for _, ctx := range sensitivityContexts {
		c := fc
		c.AvgContext = ctx
		r, err := fleetRowFor(c, fmt.Sprintf("%dK", ctx>>10))
		if err != nil {
			return report("fleet", err, stderr)
		}
		byContext = append(byContext, r)
	}
	for _, d := range sensitivityDTypes {
		c := fc
		c.Plan.CacheDType = d
		r, err := fleetRowFor(c, d.String())
		if err != nil {
			return report("fleet", err, stderr)
		}
		byDType = append(byDType, r)
	}
	if f.json {
		err = writeJSON(stdout, fleetToJSON(fl, in.assumptions, byContext, byDType))
	} else {
		err = writeFleetTable(stdout, fl, in.assumptions, byContext, byDType)
	}
	if err != nil {
		return err
	}
	return fl.Err()
}

func checkFleetFlags(f *sizingFlags, concurrent, avg *sizeValue) error {
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
	BytesPerAvgRequest  int64      `json:"bytes_per_avg_request"`
	CacheBytes          int64      `json:"cache_bytes"`
	RequestsPerReplica  int64      `json:"requests_per_replica"`
	Replicas            int64      `json:"replicas"`
	GPUsNeeded          *int64     `json:"gpus_needed"`
	ByContext           []fleetRow `json:"sensitivity_context"`
	ByDType             []fleetRow `json:"sensitivity_kv_cache_dtype"`
}

func fleetToJSON(f sizing.Fleet, extra []string, byContext, byDType []fleetRow) fleetJSON {
	j := fleetJSON{
		planJSON:   planToJSON(f.Replica, fleetAssumptions(f, extra)),
		Concurrent: f.Concurrent, AvgContext: f.AvgContext, TensorParallelChose: f.ChosenTP,
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

func fleetAssumptions(f sizing.Fleet, extra []string) []string {
	a := append([]string{}, extra...)
	if f.ChosenTP {
		a = append(a, fmt.Sprintf("tensor parallel size %d chosen: the size (1, 2, 4, ..., 64) that needs the fewest GPUs", f.Replica.Config.TensorParallel))
	}
	return append(a, "requests are sized at the average context: paged KV cache holds what each request has, not its maximum")
}

func writeFleetTable(w io.Writer, f sizing.Fleet, extra []string, byContext, byDType []fleetRow) error {
	c := f.Replica.Config
	tp := int64(c.TensorParallel)
	fmt.Fprintf(w, "kvpage fleet: %s conversations x %s tokens on average, %s on %s, KV cache %s\n\n",
		commas(f.Concurrent), commas(f.AvgContext), c.Model.Name, c.GPU.Name, c.CacheDType)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(a, b, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", a, b, note) }
	perReq := f.BytesPerRequest * tp
	row("KV cache per request", human(float64(perReq)), fmt.Sprintf("%s tokens, across the %d GPUs of a replica", commas(f.AvgContext), tp))
	row("KV cache needed", human(float64(f.CacheBytes)), commas(f.Concurrent)+" x "+human(float64(perReq)))
	tpNote := "--tensor-parallel-size"
	if f.ChosenTP {
		tpNote = "chosen: fewest GPUs"
	}
	row("tensor parallel size", fmt.Sprint(tp), tpNote)
	row("KV cache budget, per GPU", human(float64(max(f.Replica.KVBudget, 0))), "after weights and overhead")
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
	fmt.Fprintf(w, "\nsensitivity to the average context (KV cache %s):\n", c.CacheDType)
	writeRows(w, "context", byContext)
	fmt.Fprintf(w, "\nsensitivity to the KV cache dtype (context %s):\n", commas(f.AvgContext))
	writeRows(w, "dtype", byDType)
	return writeAssumptions(w, assumptions(f.Replica, fleetAssumptions(f, extra)))
}

func writeRows(w io.Writer, label string, rows []fleetRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  %s\tKV/token\tKV/request\tKV needed\tTP\tper replica\tGPUs\t\n", label)
	for _, r := range rows {
		gpus := "does not fit"
		if r.GPUsNeeded != nil {
			gpus = commas(*r.GPUsNeeded)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Label, exactBytes(sizing.Bits(r.BytesPerToken)),
			human(float64(r.BytesPerRequest)), human(float64(r.CacheBytes)), r.TensorParallelSize, commas(r.PerReplica), gpus)
	}
	tw.Flush()
}
