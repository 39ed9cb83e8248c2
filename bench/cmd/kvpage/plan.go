package main

import (
	"encoding/json"
	"errors"
	"flag"
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
const planHelp = `usage: kvpage plan (--model NAME | --config config.json --params N) --gpu NAME [flags]

Sizes the KV cache of one vLLM-style deployment: bytes per token and per block, the blocks
that fit in each GPU after the weights and the runtime overhead, the requests that fit at
--max-model-len, and the longest context for which even one request fits. Flag names are
vLLM's. Sizes parse as vLLM parses them: 32k = 32,000, 32K = 32,768.
Exit status: 0 when the plan fits, 1 when it does not (the result is still printed, the
reason goes to stderr), 2 for a bad flag.

`

// sizingFlags are the flags plan and fleet share, named as vLLM names them.
type sizingFlags struct {
	model, config, gpu, kvCacheDType string
	params                           countValue
	weightsGiB, overheadGiB, util    float64
	gpuMemoryMiB                     int64
	tp, blockSize, maxNumSeqs        int
	maxModelLen                      sizeValue
	json                             bool
	set                              map[string]bool // flags given on the command line
}

func (f *sizingFlags) register(fs *flag.FlagSet, defaultTP int) {
	fs.StringVar(&f.model, "model", "", "model preset: "+strings.Join(sizing.ModelPresetNames(), ", "))
	fs.StringVar(&f.model, "m", "", "alias of --model")
	fs.StringVar(&f.config, "config", "", "a Hugging Face config.json to size instead of a preset (with --params or --weights-gib)")
	fs.Var(&f.params, "params", "parameter count for --config, such as 8.03b, 70.6B or 70553706496")
	fs.Float64Var(&f.weightsGiB, "weights-gib", 0, "size of all the weights in GiB, instead of parameters x bytes per weight")
	fs.StringVar(&f.gpu, "gpu", "", "GPU preset: "+strings.Join(sizing.GPUPresetNames(), ", "))
	fs.Int64Var(&f.gpuMemoryMiB, "gpu-memory-mib", 0, "GPU memory in MiB as nvidia-smi reports it, for a GPU without a preset")
	tpHelp := "GPUs the model is split over"
	if defaultTP == 0 {
		tpHelp += " (default: the size, 1 to 64, that needs the fewest GPUs)"
	}
	fs.IntVar(&f.tp, "tensor-parallel-size", defaultTP, tpHelp)
	fs.IntVar(&f.tp, "tp", defaultTP, "alias of --tensor-parallel-size")
	f.maxModelLen.allowAuto = true
	fs.Var(&f.maxModelLen, "max-model-len", "longest context of a request, such as 32k or 32K; auto = the longest that fits (default: the model's max_position_embeddings)")
	fs.Var(&f.maxModelLen, "context", "alias of --max-model-len")
	fs.StringVar(&f.kvCacheDType, "kv-cache-dtype", "auto", "KV cache data type: auto (the model's), "+strings.Join(sizing.DTypeNames(), ", ")+" (fp8 = fp8_e4m3, fp4 = nvfp4)")
	fs.IntVar(&f.blockSize, "block-size", sizing.DefaultBlockSize, "tokens per block")
	fs.Float64Var(&f.util, "gpu-memory-utilization", sizing.DefaultGPUMemoryUtilization, "fraction of GPU memory for weights, activations and KV cache")
	fs.Float64Var(&f.overheadGiB, "overhead-gib", float64(sizing.DefaultRuntimeOverhead)/(1<<30), "GiB per GPU that is neither weights nor KV cache: CUDA context, activations, CUDA graphs")
	fs.IntVar(&f.maxNumSeqs, "max-num-seqs", 0, "cap on concurrent requests, as vLLM's --max-num-seqs (0: no cap)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of the table")
}

// parse parses args into f and reports whether they parsed; flag has printed why not.
func (f *sizingFlags) parse(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return true
}

// flagError is a bad flag value found after parsing: printed, then exit status 2.
type flagError struct{ msg string }

func (e *flagError) Error() string { return e.msg }

func badFlag(format string, args ...any) error { return &flagError{fmt.Sprintf(format, args...)} }

// report turns an error of a subcommand into what run expects: a flag error is printed
// here and becomes errUsage (exit 2); anything else goes back to run (exit 1).
func report(name string, err error, stderr io.Writer) error {
	var fe *flagError
	if errors.As(err, &fe) {
		fmt.Fprintf(stderr, "kvpage %s: %s\n", name, fe.msg)
		return errUsage
	}
	return err
}

// sizingInput is what the shared flags resolve to.
type sizingInput struct {
	cfg         sizing.PlanConfig
	autoLen     bool     // --max-model-len auto
	assumptions []string // how defaults were taken, for the output
}

func (f *sizingFlags) resolve(fs *flag.FlagSet) (sizingInput, error) {
	var in sizingInput
	if fs.NArg() > 0 {
		return in, badFlag("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	m, err := f.resolveModel()
	if err != nil {
		return in, err
	}
	g, err := f.resolveGPU()
	if err != nil {
		return in, err
	}
	d, err := sizing.ResolveCacheDType(f.kvCacheDType, m)
	if err != nil {
		if errors.Is(err, sizing.ErrMissingField) {
			return in, badFlag("--kv-cache-dtype auto: the config gives no torch_dtype; name the cache data type (%s)", strings.Join(sizing.DTypeNames(), ", "))
		}
		return in, badFlag("--kv-cache-dtype: %v", err)
	}
	switch {
	case f.tp < 0 || f.tp == 0 && (f.set["tensor-parallel-size"] || f.set["tp"]):
		return in, badFlag("--tensor-parallel-size must be a positive number of GPUs, got %d", f.tp)
	case f.blockSize <= 0:
		return in, badFlag("--block-size must be a positive number of tokens, got %d", f.blockSize)
	case !(f.util > 0 && f.util <= 1):
		return in, badFlag("--gpu-memory-utilization must be in (0, 1], got %g", f.util)
	case f.overheadGiB < 0 || math.IsNaN(f.overheadGiB) || f.overheadGiB > 1<<20:
		return in, badFlag("--overhead-gib must be a non-negative size in GiB, got %g", f.overheadGiB)
	case f.weightsGiB < 0 || math.IsNaN(f.weightsGiB) || f.weightsGiB > 1<<26:
		return in, badFlag("--weights-gib must be a non-negative size in GiB, got %g", f.weightsGiB)
	case f.maxNumSeqs < 0:
		return in, badFlag("--max-num-seqs must not be negative, got %d", f.maxNumSeqs)
	case f.maxModelLen.set && !f.maxModelLen.auto && (f.maxModelLen.n == 0 || f.maxModelLen.n > sizing.MaxTokens):
		return in, badFlag("--max-model-len must be between 1 and %d tokens, got %d", sizing.MaxTokens, f.maxModelLen.n)
	}
	in.cfg = sizing.PlanConfig{
		Model: m, GPU: g, TensorParallel: f.tp, CacheDType: d, BlockSize: f.blockSize,
		GPUMemoryUtilization: f.util, RuntimeOverhead: int64(f.overheadGiB * (1 << 30)),
		MaxNumSeqs: f.maxNumSeqs,
	}
	if f.weightsGiB > 0 {
		in.cfg.WeightBytes = int64(f.weightsGiB * (1 << 30))
	}
	if f.maxModelLen.set && !f.maxModelLen.auto {
		in.cfg.MaxModelLen = int(f.maxModelLen.n)
	}
	in.autoLen = f.maxModelLen.auto
	if strings.EqualFold(strings.TrimSpace(f.kvCacheDType), "auto") {
		in.assumptions = append(in.assumptions, fmt.Sprintf("kv cache dtype %s: --kv-cache-dtype auto, the model's torch_dtype", d))
	}
	return in, nil
}

func (f *sizingFlags) resolveModel() (sizing.ModelSpec, error) {
	switch {
	case f.model != "" && f.config != "":
		return sizing.ModelSpec{}, badFlag("give --model or --config, not both")
	case f.model == "" && f.config == "":
		return sizing.ModelSpec{}, badFlag("--model (one of %s) or --config is required", strings.Join(sizing.ModelPresetNames(), ", "))
	}
	var m sizing.ModelSpec
	if f.model != "" {
		var err error
		if m, err = sizing.ModelPreset(f.model); err != nil {
			return m, badFlag("--model: %v", err)
		}
	} else {
		data, err := os.ReadFile(f.config)
		if err != nil {
			return m, fmt.Errorf("--config: %w", err)
		}
		if m, err = sizing.ParseHFConfig(data); err != nil {
			return m, fmt.Errorf("--config %s: %w", f.config, err)
		}
		m.Name = m.Name + " (" + f.config + ")"
		if !f.params.set && f.weightsGiB == 0 {
			return m, badFlag("--config gives no parameter count, so the weights cannot be sized: pass --params (such as 8.03b) or --weights-gib")
		}
	}
	if f.params.set {
		if f.params.n <= 0 {
			return m, badFlag("--params must be positive, got %d", f.params.n)
		}
		m.Params, m.WeightBytes = f.params.n, 0
	}
	return m, nil
}

func (f *sizingFlags) resolveGPU() (sizing.GPU, error) {
	if f.gpuMemoryMiB < 0 || f.gpuMemoryMiB > 1<<30 {
		return sizing.GPU{}, badFlag("--gpu-memory-mib must be a positive size in MiB, got %d", f.gpuMemoryMiB)
	}
	if f.gpu == "" {
		if f.gpuMemoryMiB == 0 {
			return sizing.GPU{}, badFlag("--gpu (one of %s) or --gpu-memory-mib is required", strings.Join(sizing.GPUPresetNames(), ", "))
		}
		return sizing.GPU{Name: "custom GPU", MemoryMiB: f.gpuMemoryMiB, Source: "--gpu-memory-mib"}, nil
	}
	g, err := sizing.GPUPreset(f.gpu)
	if err != nil {
		return g, badFlag("--gpu: %v", err)
	}
	if f.gpuMemoryMiB > 0 {
		g.MemoryMiB, g.Source = f.gpuMemoryMiB, "--gpu-memory-mib"
	}
	return g, nil
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), planHelp); fs.PrintDefaults() }
	var f sizingFlags
	f.register(fs, 1)
	if !f.parse(fs, args) {
		return errUsage
	}
	in, err := f.resolve(fs)
	if err != nil {
		return report("plan", err, stderr)
	}
	p, err := planWithLen(&in)
	if err != nil {
		return report("plan", err, stderr)
	}
	if f.json {
		err = writeJSON(stdout, planToJSON(p, in.assumptions))
	} else {
		err = writePlanTable(stdout, p, in.assumptions)
	}
	if err != nil {
		return err
	}
	return p.Err()
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

// sizeValue is a flag holding a token count parsed as vLLM parses it (sizing.ParseSize),
// and "auto" (or vLLM's -1) where allowAuto is set.
type sizeValue struct {
	n         int64
	set, auto bool
	allowAuto bool
}

func (v *sizeValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	if v.auto {
		return "auto"
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *sizeValue) Set(s string) error {
	if t := strings.ToLower(strings.TrimSpace(s)); v.allowAuto && (t == "auto" || t == "-1") {
		v.n, v.set, v.auto = 0, true, true
		return nil
	}
	n, err := sizing.ParseSize(s)
	if err != nil {
		return err
	}
	v.n, v.set, v.auto = n, true, false
	return nil
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
}

func planToJSON(p sizing.Plan, extra []string) planJSON {
	c := p.Config
	j := planJSON{
		Model: c.Model.Name, GPU: c.GPU.Name, GPUMemoryMiB: c.GPU.MemoryMiB,
		TensorParallelSize: c.TensorParallel, KVCacheDType: c.CacheDType.String(), BlockSize: c.BlockSize,
		GPUMemoryUtilization: c.GPUMemoryUtilization, MaxModelLen: c.MaxModelLen,
		RuntimeOverheadBytes: c.RuntimeOverhead, WeightsBytes: p.WeightsTotal, WeightsBytesPerGPU: p.WeightsPerGPU,
		UsableBytesPerGPU: p.UsableMemory, KVCacheBytesPerGPU: max(p.KVBudget, 0),
		BytesPerToken: jsonBytes(p.BytesPerToken), BytesPerTokenPerGPU: jsonBytes(p.BytesPerTokenPerGPU),
		BytesPerRequest: p.ModelBytesPerRequest, BytesPerRequestPerGPU: p.BytesPerRequest,
		BytesPerBlock: p.BytesPerBlock, NumBlocks: p.NumBlocks, KVCacheTokens: p.KVCacheTokens,
		MaxConcurrency: p.MaxConcurrency, ConcurrencyRatio: math.Round(p.ConcurrencyRatio*100) / 100,
		LimitedBy: p.Limit, MaxContextUnbounded: p.MaxContextUnbounded, Fits: p.Fits(),
		Assumptions: assumptions(p, extra),
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

func writePlanTable(w io.Writer, p sizing.Plan, extra []string) error {
	c := p.Config
	n := int64(c.MaxModelLen)
	fmt.Fprintf(w, "kvpage plan: %s on %d x %s, KV cache %s, max-model-len %s\n\n",
		c.Model.Name, c.TensorParallel, c.GPU.Name, c.CacheDType, commas(n))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(a, b, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", a, b, note) }
	row("KV cache per token, whole model", exactBytes(p.BytesPerToken),
		fmt.Sprintf("%s; %d layers, before the tensor-parallel split", human(p.BytesPerToken.Bytes()), c.Model.NumLayers()))
	row("KV cache per token, per GPU", exactBytes(p.BytesPerTokenPerGPU), human(p.BytesPerTokenPerGPU.Bytes()))
	row("KV cache per request, whole model", human(float64(p.ModelBytesPerRequest)), "at "+commas(n)+" tokens, windows applied, whole blocks")
	row("KV cache per request, per GPU", human(float64(p.BytesPerRequest)), "")
	row("bytes per block, per GPU", commas(p.BytesPerBlock)+" B", fmt.Sprintf("%s; %d tokens, all layers", human(float64(p.BytesPerBlock)), c.BlockSize))
	row("KV cache budget, per GPU", human(float64(max(p.KVBudget, 0))),
		fmt.Sprintf("%s usable - %s weights - %s overhead", human(float64(p.UsableMemory)), human(float64(p.WeightsPerGPU)), human(float64(c.RuntimeOverhead))))
	blocksNote := commas(p.KVCacheTokens) + " tokens"
	if hasWindows(c.Model) {
		blocksNote += " if every layer kept every token; sliding-window layers keep less"
	}
	row("blocks, per GPU", commas(p.NumBlocks), blocksNote)
	row("max concurrency at "+commas(n)+" tokens", commas(p.MaxConcurrency), limitText(p))
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
	a = append(a, fmt.Sprintf("model %s: %s", m.Name, describeGroups(m)))
	if m.Source != "" {
		a = append(a, "model values: "+m.Source)
	}
	a = append(a, describeTP(m, c.TensorParallel))
	a = append(a, describeWeights(p))
	gpu := fmt.Sprintf("GPU %s: %s MiB", c.GPU.Name, commas(c.GPU.MemoryMiB))
	if c.GPU.NvidiaSMIName != "" {
		gpu += " (" + c.GPU.NvidiaSMIName + ", as nvidia-smi reports it)"
	} else if c.GPU.Source != "" {
		gpu += " (" + c.GPU.Source + ")"
	}
	a = append(a, gpu)
	a = append(a, fmt.Sprintf("--gpu-memory-utilization %.2f: %s usable per GPU", c.GPUMemoryUtilization, human(float64(p.UsableMemory))))
	a = append(a, fmt.Sprintf("runtime overhead %s per GPU (--overhead-gib): CUDA context, activation peak, CUDA graphs; vLLM logs the real figure at start-up", human(float64(c.RuntimeOverhead))))
	a = append(a, extra...)
	switch c.CacheDType {
	case sizing.NVFP4:
		a = append(a, "nvfp4 cache: 4-bit values plus one fp8 scale per 16 values of each head (4.5 bits a value)")
	case sizing.MXFP4:
		a = append(a, "mxfp4 cache: 4-bit values plus one 8-bit scale per 32 values of each head (4.25 bits a value)")
	case sizing.FP8E4M3, sizing.FP8E5M2, sizing.INT8:
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
		if g.Sliding() {
			kind = "sliding-window (" + commas(int64(g.Window)) + ")"
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
		return "weights " + human(float64(p.WeightsTotal)) + " (--weights-gib)" + per
	case m.WeightBytes > 0:
		return fmt.Sprintf("weights %s as loaded (checkpoint size; %s parameters)%s", human(float64(p.WeightsTotal)), commas(m.Params), per)
	}
	d := m.WeightDType
	if d == 0 {
		d = m.DType
	}
	return fmt.Sprintf("weights %s = %s parameters x %g bits (%s)%s", human(float64(p.WeightsTotal)), commas(m.Params), d.BitsPerValue(), d, per)
}

func mustWeights(m sizing.ModelSpec) int64 {
	w, _ := m.TotalWeightBytes()
	return w
}
