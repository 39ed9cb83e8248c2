package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
)

func init() {
	register(command{name: "fleet-sim", summary: "route a workload over N simulated servers: hit rate, imbalance, preemptions, throughput per policy", run: runFleetSim})
}

const fleetSimIntro = `usage: kvpage fleet-sim [flags]

Simulates a fleet: --servers servers, each its own kvpage Manager with prefix sharing
over the KV memory the planner gives --model on --gpu, its weights in --dtype and its
KV cache in --kv-cache-dtype (or --kv-budget-tokens), behind
one router. Each request is routed when it arrives by each --policies policy, with the
router's cluster index as the servers' KV events (vLLM's msgpack, decoded and applied)
have told it, --event-delay steps late. Arrivals are Poisson at --rate-per-server x
servers requests per second; the workload has --requests-per-server x servers requests.
Policies: round-robin, least-loaded (the router's outstanding requests per server),
prefix (longest cached prefix, least loaded among equals), prefix-load
(score = w x cached/prompt blocks - (1 - w) x load/max load, w = --weight).

For every workload, server count and policy it prints the fleet prefix-hit rate (server
side), the hit the router expected, the load imbalance (max / mean outstanding requests,
averaged over busy steps), preemptions, and requests completed per step while requests
arrive; --charts DIR writes fleet-WORKLOAD.png (1,800 px wide) per workload.

The conversation workload keeps --open-per-server x servers conversations open (6 per
server: 48 at 8 servers, the eviction benchmark's trace), so that a larger fleet gets
proportionally more concurrent work: a conversation's next turn waits for the previous
one, so at most that many requests are ever outstanding. --open-per-server 0 keeps the
trace's fixed 48 at every size.

`

func runFleetSim(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("fleet-sim", fleetSimIntro)
	workloads := f.fs.String("workload", "sysprompt,conversation", "comma-separated built-in workloads")
	servers := f.fs.String("servers", "8,16", "comma-separated fleet sizes")
	policies := f.fs.String("policies", strings.Join(sim.FleetPolicies(), ","), "comma-separated routing policies")
	perServer := f.fs.Int("requests-per-server", 200, "requests per server")
	rate := f.fs.Float64("rate-per-server", 16, "Poisson arrivals per second per server")
	delay := f.fs.Int("event-delay", 0, "steps between a server's events and the router applying them")
	weight := f.fs.Float64("weight", 0.5, "prefix-load's prefix weight w, in [0, 1]")
	model := f.fs.String("model", "llama-3-8b", "model preset (the planner sizes each server's KV memory)")
	gpu := f.fs.String("gpu", "rtx-4090", "GPU preset, one per server")
	dtype := f.fs.String("dtype", "auto", "data type the model runs in, as vLLM's --dtype: "+strings.Join(sizing.ModelDTypeNames(), ", ")+"; sizes the weights and --kv-cache-dtype auto")
	kvDType := f.fs.String("kv-cache-dtype", "auto", "KV cache data type, as plan's: auto (the checkpoint's, else the model's), "+strings.Join(sizing.DTypeNames(), ", ")+" (fp8 = fp8_e4m3, fp4 = nvfp4); sizes each server's KV budget")
	budget := f.fs.Int("kv-budget-tokens", 0, "KV budget per server in tokens, instead of --model and --gpu")
	blockSize := f.fs.Int("block-size", 16, "tokens per block")
	charts := f.fs.String("charts", "", "directory to write the charts into")
	seed := f.fs.Uint64("seed", 42, "workload and arrival seed")
	openPer := f.fs.Int("open-per-server", defaultOpenPerServer, "conversation workload: open conversations per server (0: a fixed 48)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	wls, err := splitFleetList(*workloads, func(s string) (string, error) { _, err := sim.LookupWorkload(s); return s, err })
	if err != nil {
		return badFlag("--workload: %w", err)
	}
	ns, err := splitFleetList(*servers, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxFleetServers {
			return 0, fmt.Errorf("%q is not a fleet size from 1 to %d", s, maxFleetServers)
		}
		return n, nil
	})
	if err != nil {
		return badFlag("--servers: %w", err)
	}
	pols, err := splitFleetList(*policies, func(s string) (string, error) {
		for _, p := range sim.FleetPolicies() {
			if p == s {
				return s, nil
			}
		}
		return "", fmt.Errorf("unknown policy %q (%s)", s, strings.Join(sim.FleetPolicies(), ", "))
	})
	if err != nil {
		return badFlag("--policies: %w", err)
	}
	switch {
	case *perServer < 1 || *perServer > 100000:
		return badFlag("--requests-per-server must be between 1 and 100,000, got %d", *perServer)
	case !(*rate > 0) || *rate > 1e6:
		return badFlag("--rate-per-server must be above 0, got %v", *rate)
	case *delay < 0 || *delay > 1<<20:
		return badFlag("--event-delay must be between 0 and 2^20 steps, got %d", *delay)
	case !(*weight >= 0 && *weight <= 1):
		return badFlag("--weight must be in [0, 1], got %v", *weight)
	case *blockSize < 1 || *blockSize > 65536:
		return badFlag("--block-size must be between 1 and 65536 tokens, got %d", *blockSize)
	case *budget < 0:
		return badFlag("--kv-budget-tokens must be positive, got %d", *budget)
	case *openPer < 0 || *openPer > maxOpenPerServer:
		return badFlag("--open-per-server must be between 0 and %d, got %d", maxOpenPerServer, *openPer)
	}

	runDType, err := sizing.ParseModelDType(*dtype)
	if err != nil {
		return badFlag("--dtype: %w", err)
	}
	// The spelling is checked even when --kv-budget-tokens leaves nothing to size, as
	// plan's and sim's are.
	if _, err := sizing.ResolveCacheDType(*kvDType, sizing.ModelSpec{}); err != nil {
		return badFlag("--kv-cache-dtype: %w", err)
	}
	if *charts != "" {
		if err := os.MkdirAll(*charts, 0o755); err != nil {
			return err
		}
	}
	for wi, wname := range wls {
		w, _ := sim.LookupWorkload(wname)
		capacity := *budget
		memory := fmt.Sprintf("%d tokens per server (--kv-budget-tokens)", capacity)
		if capacity == 0 {
			if capacity, err = planBudget(*model, *gpu, runDType, *kvDType, w.MaxModelLen); err != nil {
				return err
			}
			memory = fmt.Sprintf("%s on %s: %d tokens per server (the planner, max-model-len %d)", *model, *gpu, capacity, w.MaxModelLen)
			if runDType != 0 {
				memory += ", --dtype " + *dtype
			}
			if !strings.EqualFold(strings.TrimSpace(*kvDType), "auto") {
				memory += ", --kv-cache-dtype " + *kvDType
			}
		}
		if wi > 0 {
			fmt.Fprintln(stdout)
		}
		if wname == "conversation" {
			memory += openConversationsNote(*openPer)
		}
		fmt.Fprintf(stdout, "%s: %s\n", wname, memory)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tservers\tpolicy\thit rate\trouted hit\timbalance\tpreemptions\tcompleted/step\tsteps\t")
		var results []*sim.FleetResult
		for _, n := range ns {
			wn := w
			if wname == "conversation" && *openPer > 0 {
				if wn, err = sim.ConversationWorkload(*openPer * n); err != nil {
					return err
				}
			}
			tr := wn.Generate(n**perServer, *seed)
			sim.WithPoissonArrivals(tr, *rate*float64(n), *seed)
			reqs := sim.Prepare(tr, w.MaxModelLen).Requests
			cfg := sim.DefaultConfig(capacity)
			cfg.MaxModelLen = w.MaxModelLen
			cfg.MaxNumBatchedTokens = max(cfg.MaxNumBatchedTokens, w.MaxModelLen)
			cfg.Seed = *seed
			for _, pol := range pols {
				r, err := sim.SimulateFleet(reqs, sim.FleetConfig{
					Servers: n, Server: cfg, Policy: pol, Weight: *weight, EventDelay: *delay,
					Scheme: sim.Scheme{Name: sim.Paged, BlockSize: *blockSize, PrefixSharing: true},
				})
				if err != nil {
					return err
				}
				results = append(results, r)
				fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\t%.1f%%\t%.2f\t%d\t%.3f\t%d\t\n", wname, n, pol, 100*r.HitRate, 100*r.RoutedHitRate, r.Imbalance, r.Preemptions, r.CompletedPerStep, r.Steps)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if *charts != "" {
			path := filepath.Join(*charts, "fleet-"+wname+".png")
			if err := sim.WriteFleetChart(path, wname, results); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "wrote %s\n", path)
		}
	}
	return nil
}

// defaultOpenPerServer is --open-per-server's default: 8 servers then have the 48 open
// conversations of the eviction benchmark's trace (bench.ConvOpen).
const defaultOpenPerServer = 6

// maxFleetServers bounds --servers.
const maxFleetServers = 4096

// maxOpenPerServer bounds --open-per-server so that the largest fleet stays within
// sim.MaxOpenConversations.
const maxOpenPerServer = sim.MaxOpenConversations / maxFleetServers

// openConversationsNote says how many conversations the fleet keeps open.
func openConversationsNote(perServer int) string {
	if perServer == 0 {
		return "; 48 open conversations at every fleet size"
	}
	if perServer == 1 {
		return "; 1 open conversation per server"
	}
	return fmt.Sprintf("; %d open conversations per server", perServer)
}

// planBudget is one server's KV budget in tokens from the planner, the model run in
// run (vLLM's --dtype; 0 for auto) and its KV cache in kv (--kv-cache-dtype, resolved as
// plan resolves it: auto is the checkpoint's declared KV data type, else the model's).
func planBudget(model, gpu string, run sizing.DType, kv string, maxModelLen int) (int, error) {
	m, err := sizing.ModelPreset(model)
	if err != nil {
		return 0, badFlag("--model: %w", err)
	}
	if m, err = m.WithRunDType(run); err != nil {
		return 0, badFlag("--dtype: %w", err)
	}
	g, err := sizing.GPUPreset(gpu)
	if err != nil {
		return 0, badFlag("--gpu: %w", err)
	}
	if m, err = m.OnGPU(g); err != nil {
		return 0, badFlag("--dtype on --gpu %s: %w", gpu, err)
	}
	d, err := sizing.ResolveCacheDType(kv, m)
	if err != nil {
		return 0, badFlag("--kv-cache-dtype: %w", err)
	}
	p, err := sizing.NewPlan(sizing.PlanConfig{Model: m, GPU: g, MaxModelLen: maxModelLen, CacheDType: d})
	if err != nil {
		return 0, err
	}
	return sim.TokenBudget(p)
}

func splitFleetList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}
