package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvpage/kvpage/blocks/sizing"
)

func init() {
	register(command{name: "plan", summary: "size a model's KV cache on a GPU: blocks, concurrency, longest context", run: runPlan})
}

// planHelp is printed above the flags of `kvpage plan --help`.
const planHelp = `usage: kvpage plan (--model NAME | --config config.json --params N | --kv-bytes-per-token SIZE --weights SIZE)
                   (--gpu NAME | --gpu-memory SIZE) [flags]

Sizes the KV cache of one vLLM-style deployment: bytes per token and per block, the blocks
that fit in each GPU after the weights and the runtime overhead (and in all of them), the
requests that fit at --max-model-len, and the longest context for which even one request
fits. Flag names are vLLM's.

` + sizeSyntax + `
A textbook example (an 80 GB card, 14 GB of weights, 5 GB of overhead, 0.05 MB per token):
  kvpage plan --gpu-memory 80GB --gpu-memory-utilization 1 --weights 14GB --overhead 5GB \
      --kv-bytes-per-token 0.05MB --max-model-len 4k

Exit status: 0 when the plan fits, 1 when it does not (the result is still printed, the
reason goes to stderr), 2 for bad input.

`

// sizeSyntax explains the two kinds of sizes; every subcommand's help repeats it.
const sizeSyntax = `Sizes: token counts as vLLM reads them (8k = 8,000; 8K = 8,192; 25.6k = 25,600); byte
sizes with a unit (80GB and 80G = 80 x 10^9 bytes, 80GiB = 80 x 2^30, 0.05MB = 50,000).
`

// sizingFlags are the flags that size a deployment, the same in plan, fleet and sim, named
// as vLLM names them.
type sizingFlags struct {
	model, config, gpu, kvCacheDType   string
	dtype                              string // vLLM's --dtype
	params                             countValue
	weightsGiB, overheadGiB, util      float64
	weights, overhead, gpuMemory       bytesValue
	kvBytesPerToken, kvBytesPerRequest bytesValue
	gpuMemoryMiB                       int64
	tp, blockSize, maxNumSeqs          int
	maxModelLen                        sizeValue
	json                               bool
	set                                map[string]bool // flags given on the command line
}

// sizingDefaults are what a subcommand defaults to.
type sizingDefaults struct {
	tp              int    // 0: the fleet chooses
	model, gpu      string // "" : required
	maxNumSeqs      int
	maxNumSeqsHelp  string
	maxModelLenHelp string
	perRequest      bool // --kv-bytes-per-request has a meaning
	autoLen         bool // --max-model-len auto has a meaning
}

func (f *sizingFlags) register(fs *flagSet, d sizingDefaults) {
	f.set = fs.set
	flags := fs.fs
	flags.StringVar(&f.model, "model", d.model, "model preset: "+strings.Join(sizing.ModelPresetNames(), ", "))
	fs.alias("m", "model")
	flags.StringVar(&f.config, "config", "", "a Hugging Face config.json to size instead of a preset (with --params or --weights)")
	flags.Var(&f.params, "params", "parameter count for --config, such as 8.03b, 70.6B or 70553706496")
	flags.Var(&f.weights, "weights", "size of all the weights, such as 14GB or 14.96GiB, instead of parameters x bytes per weight")
	flags.Float64Var(&f.weightsGiB, "weights-gib", 0, "the same as --weights, in GiB")
	flags.Var(&f.kvBytesPerToken, "kv-bytes-per-token", "KV cache bytes per token of the whole model, such as 0.05MB or 131072, instead of a model's layers (needs --weights)")
	if d.perRequest {
		flags.Var(&f.kvBytesPerRequest, "kv-bytes-per-request", "KV cache bytes one request holds, such as 200MB: concurrency is the KV budget over this, not over --max-model-len tokens")
	}
	flags.StringVar(&f.gpu, "gpu", d.gpu, "GPU preset: "+strings.Join(sizing.GPUPresetNames(), ", "))
	flags.Var(&f.gpuMemory, "gpu-memory", "memory of one GPU, such as 80GB or 80GiB, instead of the preset's")
	flags.Int64Var(&f.gpuMemoryMiB, "gpu-memory-mib", 0, "the same as --gpu-memory, in MiB as nvidia-smi reports it")
	tpHelp := "GPUs the model is split over"
	if d.tp == 0 {
		tpHelp += fmt.Sprintf(" (default: the smallest size that fits, unless a larger one needs %.0f%% fewer GPUs)", 100*sizing.TPSaving)
	}
	flags.IntVar(&f.tp, "tensor-parallel-size", d.tp, tpHelp)
	fs.alias("tp", "tensor-parallel-size")
	f.maxModelLen.allowAuto = d.autoLen
	flags.Var(&f.maxModelLen, "max-model-len", d.maxModelLenHelp)
	fs.alias("context", "max-model-len")
	flags.StringVar(&f.dtype, "dtype", "auto", "data type the model runs in, as vLLM's --dtype: "+strings.Join(sizing.ModelDTypeNames(), ", ")+
		" (auto: torch_dtype, float32 or none run in bfloat16; fp16 below compute capability 8.0, such as --gpu t4 or v100); sizes the weights, the Mamba state and --kv-cache-dtype auto")
	flags.StringVar(&f.kvCacheDType, "kv-cache-dtype", "auto", "KV cache data type: auto (the model's), "+strings.Join(sizing.DTypeNames(), ", ")+" (fp8 = fp8_e4m3, fp4 = nvfp4)")
	flags.IntVar(&f.blockSize, "block-size", sizing.DefaultBlockSize, fmt.Sprintf("tokens per block, 1 to %d", maxBlockSize))
	flags.Float64Var(&f.util, "gpu-memory-utilization", sizing.DefaultGPUMemoryUtilization, "fraction of GPU memory for weights, activations and KV cache, in (0, 1]")
	flags.Var(&f.overhead, "overhead", "memory per GPU that is neither weights nor KV cache (CUDA context, activations, CUDA graphs), such as 5GB (default 2GiB)")
	flags.Float64Var(&f.overheadGiB, "overhead-gib", float64(sizing.DefaultRuntimeOverhead)/(1<<30), "the same as --overhead, in GiB")
	flags.IntVar(&f.maxNumSeqs, "max-num-seqs", d.maxNumSeqs, d.maxNumSeqsHelp)
	flags.BoolVar(&f.json, "json", false, "print one JSON object on stdout instead of the table")
}

// sizingInput is what the shared flags resolve to.
type sizingInput struct {
	cfg         sizing.PlanConfig
	autoLen     bool     // --max-model-len auto
	bytesOnly   bool     // --kv-bytes-per-token: no model, only a figure
	assumptions []string // how defaults were taken, for the output
}

func (f *sizingFlags) resolve() (sizingInput, error) {
	var in sizingInput
	if err := f.checkRanges(); err != nil {
		return in, err
	}
	m, err := f.resolveModel()
	if err != nil {
		return in, err
	}
	g, err := f.resolveGPU()
	if err != nil {
		return in, err
	}
	var d sizing.DType
	if f.kvBytesPerToken.set {
		if f.set["kv-cache-dtype"] {
			return in, badFlag("--kv-cache-dtype has no meaning with --kv-bytes-per-token, which gives the bytes directly")
		}
		if f.set["dtype"] {
			return in, badFlag("--dtype has no meaning with --kv-bytes-per-token, which gives the KV bytes and the weights directly")
		}
		d, in.bytesOnly = sizing.INT8, true
	} else {
		// The GPU decides what --dtype auto runs in below compute capability 8.0, and so
		// what --kv-cache-dtype auto is; vLLM refuses --dtype bfloat16 there.
		if m, err = m.OnGPU(g); err != nil {
			return in, badFlag("--dtype %s on --gpu %s: %w", f.dtype, g.Name, err)
		}
		if d, err = sizing.ResolveCacheDType(f.kvCacheDType, m); err != nil {
			return in, badFlag("--kv-cache-dtype: %w", err)
		}
	}
	overhead := int64(f.overheadGiB * (1 << 30))
	if f.overhead.set {
		overhead = f.overhead.n
	}
	in.cfg = sizing.PlanConfig{
		Model: m, GPU: g, TensorParallel: f.tp, CacheDType: d, BlockSize: f.blockSize,
		GPUMemoryUtilization: f.util, RuntimeOverhead: overhead, MaxNumSeqs: f.maxNumSeqs,
	}
	switch {
	case f.weights.set:
		in.cfg.WeightBytes = f.weights.n
	case f.weightsGiB > 0:
		in.cfg.WeightBytes = int64(f.weightsGiB * (1 << 30))
	}
	if f.maxModelLen.set && !f.maxModelLen.auto {
		in.cfg.MaxModelLen = int(f.maxModelLen.n)
	}
	in.autoLen = f.maxModelLen.auto
	if !in.bytesOnly && strings.EqualFold(strings.TrimSpace(f.kvCacheDType), "auto") {
		in.assumptions = append(in.assumptions, "kv cache dtype "+d.String()+": --kv-cache-dtype auto, "+autoDTypeWhy(m, g))
	}
	return in, nil
}

// autoDTypeWhy says where --kv-cache-dtype auto's data type comes from: the model's
// torch_dtype, or vLLM's --dtype auto reading of it on g (sizing.ModelSpec.ServingDType,
// OnGPU).
func autoDTypeWhy(m sizing.ModelSpec, g sizing.GPU) string {
	switch cc := g.ComputeCapability; {
	case m.KVDType != 0:
		return "the KV cache data type the checkpoint's quantization_config declares"
	case m.RunDType != 0:
		return "the data type the model runs in: --dtype " + m.RunDType.String()
	case cc > 0 && cc < 80:
		return fmt.Sprintf("the data type vLLM runs the model in on %s: compute capability %d.%d runs no bf16, so --dtype auto runs it in %s",
			g.Name, cc/10, cc%10, m.ServingDType())
	case m.DType == 0:
		return "the data type vLLM runs the model in: no torch_dtype, so its default float32, which --dtype auto runs in bf16"
	case m.DType != m.ServingDType():
		return "the data type vLLM runs the model in: torch_dtype " + m.DType.String() + ", which --dtype auto runs in " + m.ServingDType().String()
	}
	return "the model's torch_dtype"
}

// checkRanges checks every number against one range, the same in every subcommand.
func (f *sizingFlags) checkRanges() error {
	both := func(a, b string) error {
		if f.set[a] && f.set[b] {
			return badFlag("give --%s or --%s, not both", a, b)
		}
		return nil
	}
	for _, p := range [][2]string{{"weights", "weights-gib"}, {"overhead", "overhead-gib"}, {"gpu-memory", "gpu-memory-mib"}} {
		if err := both(p[0], p[1]); err != nil {
			return err
		}
	}
	if err := checkMaxModelLen(&f.maxModelLen); err != nil {
		return err
	}
	// The data types' spellings are checked even where no model is sized (sim with
	// --kv-budget-tokens): a bad value is refused, never silently ignored.
	if _, err := sizing.ParseModelDType(f.dtype); err != nil {
		return badFlag("--dtype: %w", err)
	}
	if _, err := sizing.ResolveCacheDType(f.kvCacheDType, sizing.ModelSpec{}); err != nil {
		return badFlag("--kv-cache-dtype: %w", err)
	}
	if err := checkBlockSize(f.blockSize); err != nil {
		return err
	}
	switch {
	case f.tp < 0 || f.tp > 1024 || f.tp == 0 && f.set["tensor-parallel-size"]:
		return badFlag("--tensor-parallel-size must be between 1 and 1024 GPUs, got %d", f.tp)
	case f.maxNumSeqs < 0:
		return badFlag("--max-num-seqs must not be negative, got %d", f.maxNumSeqs)
	case f.gpuMemoryMiB < 0 || f.gpuMemoryMiB > 1<<30:
		return badFlag("--gpu-memory-mib must be between 1 and %s MiB, got %d", commas(1<<30), f.gpuMemoryMiB)
	case f.gpuMemory.set && (f.gpuMemory.n < 1<<20 || f.gpuMemory.n > 1<<50):
		return badFlag("--gpu-memory must be between 1MiB and 1PiB, got %s bytes", commas(f.gpuMemory.n))
	case f.weights.set && f.weights.n <= 0:
		return badFlag("--weights must be positive")
	case f.kvBytesPerRequest.set && f.kvBytesPerRequest.n <= 0:
		return badFlag("--kv-bytes-per-request must be positive")
	}
	if err := checkFloat("gpu-memory-utilization", f.util, 0, 1, true, ""); err != nil {
		return err
	}
	if err := checkFloat("overhead-gib", f.overheadGiB, 0, maxGiB, false, " GiB"); err != nil {
		return err
	}
	return checkFloat("weights-gib", f.weightsGiB, 0, maxGiB, false, " GiB")
}

func (f *sizingFlags) resolveModel() (sizing.ModelSpec, error) {
	model := f.model
	if (f.config != "" || f.kvBytesPerToken.set) && !f.set["model"] {
		model = "" // a subcommand's default model gives way to a config or a figure
	}
	given := 0
	for _, g := range []bool{model != "", f.config != "", f.kvBytesPerToken.set} {
		if g {
			given++
		}
	}
	switch {
	case given > 1:
		return sizing.ModelSpec{}, badFlag("give one of --model, --config and --kv-bytes-per-token")
	case given == 0:
		return sizing.ModelSpec{}, badFlag("--model (one of %s), --config or --kv-bytes-per-token is required", strings.Join(sizing.ModelPresetNames(), ", "))
	}
	var m sizing.ModelSpec
	var err error
	switch {
	case f.kvBytesPerToken.set:
		if m, err = sizing.BytesPerTokenModel(f.kvBytesPerToken.n); err != nil {
			return m, badFlag("--kv-bytes-per-token: %w", err)
		}
		if !f.weights.set && f.weightsGiB == 0 {
			return m, badFlag("--kv-bytes-per-token sizes the cache alone: give the weights with --weights (such as 14GB)")
		}
		m.Name = exactBytes(sizing.Bits(8*f.kvBytesPerToken.n)) + " per token"
		return m, nil
	case model != "":
		if m, err = sizing.ModelPreset(model); err != nil {
			return m, badFlag("--model: %w", err)
		}
	default:
		data, err := readConfigFile(f.config)
		if err != nil {
			return m, badFlag("--config: %w", err)
		}
		if m, err = sizing.ParseHFConfig(data); err != nil {
			return m, badFlag("--config %s: %w", f.config, err)
		}
		m.Name = m.Name + " (" + f.config + ")"
		if !f.params.set && !f.weights.set && f.weightsGiB == 0 {
			return m, badFlag("--config gives no parameter count, so the weights cannot be sized: pass --params (such as 8.03b) or --weights")
		}
	}
	if f.params.set {
		if f.params.n <= 0 {
			return m, badFlag("--params must be positive, got %d", f.params.n)
		}
		m.Params, m.WeightBytes = f.params.n, 0
	}
	return f.applyDType(m)
}

// applyDType runs m in --dtype (vLLM's values only), refused with ErrUnknownDType or
// ErrInvalidArgument in the chain.
func (f *sizingFlags) applyDType(m sizing.ModelSpec) (sizing.ModelSpec, error) {
	d, err := sizing.ParseModelDType(f.dtype)
	if err != nil {
		return m, badFlag("--dtype: %w", err)
	}
	if m, err = m.WithRunDType(d); err != nil {
		return m, badFlag("--dtype %s: %w", f.dtype, err)
	}
	return m, nil
}

func (f *sizingFlags) resolveGPU() (sizing.GPU, error) {
	gpu := f.gpu
	custom := f.gpuMemoryMiB > 0 || f.gpuMemory.set
	if custom && !f.set["gpu"] {
		gpu = "" // a subcommand's default GPU gives way to a size
	}
	var g sizing.GPU
	if gpu == "" {
		if !custom {
			return g, badFlag("--gpu (one of %s) or --gpu-memory is required", strings.Join(sizing.GPUPresetNames(), ", "))
		}
		g.Name = "custom GPU"
	} else {
		var err error
		if g, err = sizing.GPUPreset(gpu); err != nil {
			return g, badFlag("--gpu: %w", err)
		}
	}
	switch {
	case f.gpuMemory.set:
		g.Bytes, g.MemoryMiB, g.Source = f.gpuMemory.n, f.gpuMemory.n>>20, "--gpu-memory"
	case f.gpuMemoryMiB > 0:
		g.Bytes, g.MemoryMiB, g.Source = 0, f.gpuMemoryMiB, "--gpu-memory-mib"
	}
	return g, nil
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plan", planHelp)
	var f sizingFlags
	f.register(fs, sizingDefaults{tp: 1, perRequest: true, autoLen: true,
		maxNumSeqsHelp:  "cap on concurrent requests, as vLLM's --max-num-seqs (0: no cap)",
		maxModelLenHelp: "longest context of a request, such as 32k or 32K; auto = the longest that fits (default: the model's max_position_embeddings)"})
	var hostRAM bytesValue
	fs.fs.Var(&hostRAM, "host-ram", "host memory for a KV tier below the GPUs, such as 512GiB: prints how many blocks (and tokens) of this model it holds")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	in, err := f.resolve()
	if err != nil {
		return err
	}
	p, err := planWithLen(&in)
	if err != nil {
		return err
	}
	over := perRequestOverride(p, &f.kvBytesPerRequest)
	host := hostTierOf(p, &hostRAM)
	if f.json {
		j := planToJSON(p, in.assumptions, over)
		j.HostTier = host
		err = writeJSON(stdout, j)
	} else if err = writePlanTable(stdout, p, in.assumptions, over); err == nil && host != nil {
		err = writeHostTier(stdout, host)
	}
	if err != nil {
		return err
	}
	if over != nil && over.Concurrency > 0 && p.KVBudget > 0 {
		return nil // the request size given fits, whatever max-model-len would need
	}
	return p.Err()
}

// requestOverride is the concurrency --kv-bytes-per-request gives.
type requestOverride struct {
	BytesPerRequest int64 `json:"bytes_per_request"`
	// Concurrency is floor(KV budget of all the GPUs / BytesPerRequest).
	Concurrency int64 `json:"max_concurrency"`
}

func perRequestOverride(p sizing.Plan, v *bytesValue) *requestOverride {
	if !v.set {
		return nil
	}
	total := max(p.KVBudget, 0) * int64(p.Config.TensorParallel)
	return &requestOverride{BytesPerRequest: v.n, Concurrency: total / v.n}
}

// planWithLen plans, resolving --max-model-len auto as vLLM does (the longest context that
// fits, capped at the model's own maximum) and noting where the length came from.
func planWithLen(in *sizingInput) (sizing.Plan, error) {
	cfg := in.cfg
	modelMax := cfg.Model.MaxModelLen
	if in.autoLen {
		if modelMax == 0 {
			modelMax = sizing.MaxTokens
		}
		cfg.MaxModelLen = modelMax
		p, err := sizing.NewPlan(cfg)
		if err != nil || p.MaxContext == 0 {
			return p, err
		}
		cfg.MaxModelLen = int(min(int64(modelMax), p.MaxContext))
		in.assumptions = append(in.assumptions, fmt.Sprintf("max-model-len auto: %s tokens, the longest context that fits (the model allows %s)", commas(int64(cfg.MaxModelLen)), commas(int64(modelMax))))
	} else if cfg.MaxModelLen == 0 && modelMax > 0 {
		in.assumptions = append(in.assumptions, fmt.Sprintf("max-model-len %s: the model's max_position_embeddings, vLLM's default", commas(int64(modelMax))))
	} else if cfg.MaxModelLen == 0 {
		return sizing.Plan{}, badFlag("--max-model-len is required: the config gives no max_position_embeddings")
	}
	return sizing.NewPlan(cfg)
}

// countValue is a flag holding a parameter count: an integer or a decimal number with a
// suffix k, m, b (or g) or t, case ignored: 8.03b is 8,030,000,000.
type countValue struct {
	n   int64
	set bool
}

func (v *countValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *countValue) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1e3
		case 'm':
			mult = 1e6
		case 'b', 'g':
			mult = 1e9
		case 't':
			mult = 1e12
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok || t == "" || strings.ContainsAny(t, "/eE") {
		return fmt.Errorf("not a parameter count (want an integer or a number with a suffix k, m, b or t, such as 8.03b)")
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if r.Sign() <= 0 {
		return fmt.Errorf("must be positive")
	}
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() || n.Int64() > 1<<50 {
		return fmt.Errorf("too large")
	}
	v.n, v.set = n.Int64(), true
	return nil
}

// commas writes n with thousands separators: 131,072.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := 0; i < len(s); i++ {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// theGPUs is "the 1 GPU" or "the 4 GPUs".
func theGPUs(n int) string { return "the " + gpusText(n) }

// bothUnits writes a byte count in decimal and binary units when they differ in what
// they show: "61.00 GB (56.81 GiB)".
func bothUnits(b int64) string {
	if b < 1000 {
		return human(float64(b))
	}
	return fmt.Sprintf("%s (%s)", decimal(float64(b)), human(float64(b)))
}

// decimal writes a byte count in the largest decimal unit that keeps it at least 1.
func decimal(b float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	i := 0
	for math.Abs(b) >= 1000 && i < len(units)-1 {
		b /= 1000
		i++
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}

// human writes a byte count in the largest binary unit that keeps it at least 1.
func human(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', -1, 64) + " B"
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}

// exactBytes writes a Bits value in bytes: "327,680 B", or "1.5 B" when fractional.
func exactBytes(b sizing.Bits) string {
	if n, ok := b.WholeBytes(); ok {
		return commas(n) + " B"
	}
	return strconv.FormatFloat(b.Bytes(), 'f', -1, 64) + " B"
}

// jsonBytes marshals a Bits value as bytes: an integer when whole, a float otherwise.
type jsonBytes sizing.Bits

func (b jsonBytes) MarshalJSON() ([]byte, error) {
	if n, ok := sizing.Bits(b).WholeBytes(); ok {
		return []byte(strconv.FormatInt(n, 10)), nil
	}
	return []byte(strconv.FormatFloat(sizing.Bits(b).Bytes(), 'f', -1, 64)), nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// planJSON is `kvpage plan --json`. Names without _per_gpu are whole-model figures, except
// bytes_per_block and num_blocks, which are per GPU as blocks are.
type planJSON struct {
	Model                 string    `json:"model"`
	GPU                   string    `json:"gpu"`
	GPUMemoryMiB          int64     `json:"gpu_memory_mib"`
	TensorParallelSize    int       `json:"tensor_parallel_size"`
	KVCacheDType          string    `json:"kv_cache_dtype"`
	BlockSize             int       `json:"block_size"`
	GPUMemoryUtilization  float64   `json:"gpu_memory_utilization"`
	MaxModelLen           int       `json:"max_model_len"`
	RuntimeOverheadBytes  int64     `json:"runtime_overhead_bytes_per_gpu"`
	WeightsBytes          int64     `json:"weights_bytes"`
	WeightsBytesPerGPU    int64     `json:"weights_bytes_per_gpu"`
	UsableBytesPerGPU     int64     `json:"usable_bytes_per_gpu"`
	KVCacheBytesPerGPU    int64     `json:"kv_cache_bytes_per_gpu"`
	KVCacheBytes          int64     `json:"kv_cache_bytes"`
	BytesPerToken         jsonBytes `json:"bytes_per_token"`
	BytesPerTokenPerGPU   jsonBytes `json:"bytes_per_token_per_gpu"`
	BytesPerRequest       int64     `json:"bytes_per_request"`
	BytesPerRequestPerGPU int64     `json:"bytes_per_request_per_gpu"`
	BytesPerBlock         int64     `json:"bytes_per_block"`
	NumBlocks             int64     `json:"num_blocks"`
	KVCacheTokens         int64     `json:"kv_cache_tokens"`
	MaxConcurrency        int64     `json:"max_concurrency"`
	ConcurrencyRatio      float64   `json:"concurrency_ratio"`
	LimitedBy             string    `json:"limited_by"`
	MaxContextOneRequest  *int64    `json:"max_context_one_request"`
	MaxContextUnbounded   bool      `json:"max_context_unbounded"`
	Fits                  bool      `json:"fits"`
	Message               string    `json:"message,omitempty"`
	Assumptions           []string  `json:"assumptions"`
	// PerRequest is what --kv-bytes-per-request gives, when given.
	PerRequest *requestOverride `json:"kv_bytes_per_request,omitempty"`
	// HostTier is what --host-ram holds as a KV tier below the GPUs (hosttier.go).
	HostTier *hostTier `json:"host_tier,omitempty"`
	// StateBytesPerRequestPerGPU is the Mamba / linear-attention state of one request.
	StateBytesPerRequestPerGPU int64 `json:"state_bytes_per_request_per_gpu,omitempty"`
	// Layouts compares the memory layouts of a hybrid model (more than one kind of layer).
	Layouts *layoutsJSON `json:"layouts,omitempty"`
}

func planToJSON(p sizing.Plan, extra []string, over *requestOverride) planJSON {
	c := p.Config
	j := planJSON{
		Model: c.Model.Name, GPU: c.GPU.Name, GPUMemoryMiB: c.GPU.MemoryMiB,
		TensorParallelSize: c.TensorParallel, KVCacheDType: c.CacheDType.String(), BlockSize: c.BlockSize,
		GPUMemoryUtilization: c.GPUMemoryUtilization, MaxModelLen: c.MaxModelLen,
		RuntimeOverheadBytes: c.RuntimeOverhead, WeightsBytes: p.WeightsTotal, WeightsBytesPerGPU: p.WeightsPerGPU,
		UsableBytesPerGPU: p.UsableMemory, KVCacheBytesPerGPU: max(p.KVBudget, 0),
		KVCacheBytes: max(p.KVBudget, 0) * int64(c.TensorParallel), PerRequest: over,
		BytesPerToken: jsonBytes(p.BytesPerToken), BytesPerTokenPerGPU: jsonBytes(p.BytesPerTokenPerGPU),
		BytesPerRequest: p.ModelBytesPerRequest, BytesPerRequestPerGPU: p.BytesPerRequest,
		BytesPerBlock: p.BytesPerBlock, NumBlocks: p.NumBlocks, KVCacheTokens: p.KVCacheTokens,
		MaxConcurrency: p.MaxConcurrency, ConcurrencyRatio: math.Round(p.ConcurrencyRatio*100) / 100,
		LimitedBy: p.Limit, MaxContextUnbounded: p.MaxContextUnbounded, Fits: p.Fits(),
		Assumptions: assumptions(p, extra), StateBytesPerRequestPerGPU: p.StateBytesPerRequest,
		Layouts: layoutsToJSON(p),
	}
	if over != nil && over.Concurrency > 0 && p.KVBudget > 0 {
		j.Fits, j.Message = true, ""
		return j
	}
	if !p.MaxContextUnbounded {
		mc := p.MaxContext
		j.MaxContextOneRequest = &mc
	}
	if err := p.Err(); err != nil {
		j.Message = err.Error()
	}
	return j
}

// cacheLabel names the KV cache's data type, or says the bytes were given.
func cacheLabel(c sizing.PlanConfig) string {
	if strings.HasSuffix(c.Model.Name, " per token") {
		return "of " + c.Model.Name + " (--kv-bytes-per-token)"
	}
	return c.CacheDType.String()
}

// gpusText is "1 GPU" or "4 GPUs".
func gpusText(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

func writePlanTable(w io.Writer, p sizing.Plan, extra []string, over *requestOverride) error {
	c := p.Config
	n := int64(c.MaxModelLen)
	if strings.HasSuffix(c.Model.Name, " per token") {
		fmt.Fprintf(w, "kvpage plan: KV cache %s on %d x %s, max-model-len %s\n\n", cacheLabel(c)[3:], c.TensorParallel, c.GPU.Name, commas(n))
	} else {
		fmt.Fprintf(w, "kvpage plan: %s on %d x %s, KV cache %s, max-model-len %s\n\n",
			c.Model.Name, c.TensorParallel, c.GPU.Name, cacheLabel(c), commas(n))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(a, b, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", a, b, note) }
	layers := fmt.Sprintf("%d layers, ", c.Model.NumLayers())
	if strings.HasSuffix(c.Model.Name, " per token") {
		layers = ""
	}
	row("KV cache per token, whole model", exactBytes(p.BytesPerToken),
		fmt.Sprintf("%s; %sbefore the tensor-parallel split", human(p.BytesPerToken.Bytes()), layers))
	row("KV cache per token, per GPU", exactBytes(p.BytesPerTokenPerGPU), human(p.BytesPerTokenPerGPU.Bytes()))
	row("KV cache per request, whole model", bothUnits(p.ModelBytesPerRequest), "at "+commas(n)+" tokens, windows applied, whole blocks")
	row("KV cache per request, per GPU", bothUnits(p.BytesPerRequest), "")
	row("bytes per block, per GPU", commas(p.BytesPerBlock)+" B", fmt.Sprintf("%s; %d tokens, all layers", human(float64(p.BytesPerBlock)), c.BlockSize))
	row("KV cache budget, per GPU", bothUnits(max(p.KVBudget, 0)),
		fmt.Sprintf("%s usable - %s weights - %s overhead", bothUnits(p.UsableMemory), bothUnits(p.WeightsPerGPU), bothUnits(c.RuntimeOverhead)))
	row("KV cache budget, total", bothUnits(max(p.KVBudget, 0)*int64(c.TensorParallel)), "across "+theGPUs(c.TensorParallel))
	if sb := p.StateBytesPerRequest; sb > 0 {
		row("state per request, per GPU", bothUnits(sb), "Mamba / linear-attention state, whatever the length; included above")
	}
	blocksNote := commas(p.KVCacheTokens) + " tokens"
	if hasWindows(c.Model) {
		blocksNote += " if every layer kept every token; sliding-window layers keep less"
	}
	row("blocks, per GPU", commas(p.NumBlocks), blocksNote)
	row("max concurrency at "+commas(n)+" tokens", commas(p.MaxConcurrency), limitText(p))
	if over != nil {
		row("max concurrency at "+bothUnits(over.BytesPerRequest)+" a request", commas(over.Concurrency),
			"--kv-bytes-per-request: the total KV budget / the bytes of one request")
	}
	if p.MaxContextUnbounded {
		row("longest context for one request", "unbounded", "every layer has a sliding window")
	} else {
		row("longest context for one request", commas(p.MaxContext)+" tokens", "")
	}
	if p.Fits() {
		row("fits", "yes", "")
	} else {
		row("fits", "NO", "why, and what to change: on stderr")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeLayouts(w, p); err != nil {
		return err
	}
	return writeAssumptions(w, assumptions(p, extra))
}

func hasMLA(m sizing.ModelSpec) bool {
	for _, g := range m.Groups {
		if g.MLA() {
			return true
		}
	}
	return false
}

func hasWindows(m sizing.ModelSpec) bool {
	for _, g := range m.Groups {
		if g.Sliding() {
			return true
		}
	}
	return false
}

func limitText(p sizing.Plan) string {
	switch p.Limit {
	case "weights":
		return "limited by the weights: no memory left for KV cache"
	case "max-num-seqs":
		return fmt.Sprintf("limited by --max-num-seqs %d (the KV cache holds %.2fx)", p.Config.MaxNumSeqs, p.ConcurrencyRatio)
	}
	return fmt.Sprintf("limited by the KV cache (%.2fx)", p.ConcurrencyRatio)
}

func writeAssumptions(w io.Writer, a []string) error {
	_, err := fmt.Fprintln(w, "\nassumptions:")
	for _, s := range a {
		if err != nil {
			break
		}
		_, err = fmt.Fprintf(w, "  - %s\n", s)
	}
	return err
}

// assumptions lists everything a result rests on: the model's layers and where they come
// from, the weights, the GPU, the memory split, the cache type and block size.
func assumptions(p sizing.Plan, extra []string) []string {
	c := p.Config
	m := c.Model
	var a []string
	bytesOnly := strings.HasSuffix(m.Name, " per token")
	if bytesOnly {
		a = append(a, fmt.Sprintf("KV cache %s (--kv-bytes-per-token), whole model; tensor parallelism divides it evenly", m.Name))
	} else {
		a = append(a, fmt.Sprintf("model %s: %s", m.Name, describeGroups(m)))
		if m.Source != "" {
			a = append(a, "model values: "+m.Source)
		}
		a = append(a, describeTP(m, c.TensorParallel))
	}
	a = append(a, describeWeights(p))
	gpu := fmt.Sprintf("GPU %s: %s MiB", c.GPU.Name, commas(c.GPU.MemoryMiB))
	if c.GPU.Bytes != 0 {
		gpu = fmt.Sprintf("GPU %s: %s bytes = %s", c.GPU.Name, commas(c.GPU.Bytes), bothUnits(c.GPU.Bytes))
	}
	if c.GPU.NvidiaSMIName != "" {
		gpu += " (" + c.GPU.NvidiaSMIName + ", as nvidia-smi reports it)"
	} else if c.GPU.Source != "" {
		gpu += " (" + c.GPU.Source + ")"
	}
	a = append(a, gpu)
	a = append(a, fmt.Sprintf("--gpu-memory-utilization %.2f: %s usable per GPU", c.GPUMemoryUtilization, human(float64(p.UsableMemory))))
	a = append(a, fmt.Sprintf("runtime overhead %s per GPU (--overhead): CUDA context, activation peak, CUDA graphs; vLLM logs the real figure at start-up", human(float64(c.RuntimeOverhead))))
	a = append(a, extra...)
	switch cd := c.CacheDType; {
	case bytesOnly:
	case cd == sizing.NVFP4:
		a = append(a, "nvfp4 cache: 4-bit values plus one fp8 scale per 16 values of each head (4.5 bits a value)")
	case cd == sizing.MXFP4:
		a = append(a, "mxfp4 cache: 4-bit values plus one 8-bit scale per 32 values of each head (4.25 bits a value)")
	case cd == sizing.FP8E4M3, cd == sizing.FP8E5M2, cd == sizing.INT8:
		a = append(a, c.CacheDType.String()+" cache: per-tensor scales, not counted per token")
		if hasMLA(m) {
			a = append(a, "MLA in fp8: one byte a latent value (576 a token a layer); vLLM's fp8_ds_mla layout for FlashMLA's sparse backend takes 656, with its scales and a bf16 RoPE part")
		}
	}
	a = append(a, fmt.Sprintf("block size %d tokens; a sliding-window layer holds at most its window plus one block", c.BlockSize))
	if c.MaxNumSeqs > 0 {
		a = append(a, fmt.Sprintf("--max-num-seqs %d caps concurrency", c.MaxNumSeqs))
	} else {
		a = append(a, "no cap on concurrent requests: vLLM's --max-num-seqs default may bind first; pass it to apply it")
	}
	a = append(a, m.Notes...)
	return a
}

func describeGroups(m sizing.ModelSpec) string {
	parts := make([]string, 0, len(m.Groups))
	for _, g := range m.Groups {
		kind := "full-attention"
		switch {
		case g.Chunked:
			kind = "chunked-local-attention (chunk " + commas(int64(g.Window)) + ")"
		case g.Sliding():
			kind = "sliding-window (" + commas(int64(g.Window)) + ")"
		}
		if g.State() {
			parts = append(parts, fmt.Sprintf("%d state layers (Mamba / linear attention) x %s state values a sequence", g.Layers, commas(g.StateValues)))
			continue
		}
		if g.MLA() {
			parts = append(parts, fmt.Sprintf("%d MLA layers x one %d-value latent", g.Layers, g.LatentDim))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s layers x %d KV heads x (%d K + %d V) values", g.Layers, kind, g.KVHeads, g.KHeadDim, g.VHeadDim))
	}
	s := strings.Join(parts, ", ")
	if m.AttentionHeads > 0 {
		s += fmt.Sprintf("; %d attention heads", m.AttentionHeads)
	}
	return s
}

func describeTP(m sizing.ModelSpec, tp int) string {
	if tp == 1 {
		return "tensor parallel size 1: the whole KV cache on one GPU"
	}
	var parts []string
	seen := map[int]bool{}
	for _, g := range m.Groups {
		switch {
		case g.State():
			if !seen[-2] {
				parts = append(parts, "the Mamba / linear-attention state is split across the GPUs")
			}
			seen[-2] = true
			continue
		case g.MLA():
			if !seen[-1] {
				parts = append(parts, "the MLA latent is replicated on every GPU, as in vLLM")
			}
			seen[-1] = true
		case seen[g.KVHeads]:
		case g.KVHeads >= tp:
			parts = append(parts, fmt.Sprintf("%d of %d KV heads per GPU", g.KVHeads/tp, g.KVHeads))
		default:
			parts = append(parts, fmt.Sprintf("%d KV heads for %d GPUs: each head replicated, 1 per GPU", g.KVHeads, tp))
		}
		seen[g.KVHeads] = true
	}
	return fmt.Sprintf("tensor parallel size %d: %s", tp, strings.Join(parts, "; "))
}

func describeWeights(p sizing.Plan) string {
	c := p.Config
	m := c.Model
	per := fmt.Sprintf(", %s per GPU", human(float64(p.WeightsPerGPU)))
	switch {
	case c.WeightBytes != mustWeights(m):
		return "weights " + bothUnits(p.WeightsTotal) + " (--weights)" + per
	case m.WeightBytes > 0:
		return fmt.Sprintf("weights %s as loaded (checkpoint size; %s parameters)%s", human(float64(p.WeightsTotal)), commas(m.Params), per)
	}
	d := m.WeightDType
	if d == 0 {
		d = m.ServingDType()
	}
	return fmt.Sprintf("weights %s = %s parameters x %g bits (%s)%s", human(float64(p.WeightsTotal)), commas(m.Params), d.BitsPerValue(), d, per)
}

func mustWeights(m sizing.ModelSpec) int64 {
	w, _ := m.TotalWeightBytes()
	return w
}

// readConfigFile reads --config, at most sizing.MaxConfigBytes+1 bytes of it: enough for
// ParseHFConfig to refuse a file too large without loading it whole.
func readConfigFile(name string) ([]byte, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(io.LimitReader(file, sizing.MaxConfigBytes+1))
}
