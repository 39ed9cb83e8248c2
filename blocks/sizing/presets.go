package sizing

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The presets are embedded JSON: presets/models.json holds, for each model, the fields of
// its published config.json (read by ParseHFConfig, like any config) with its parameter
// count and where the values come from; presets/gpus.json holds each GPU's memory as
// nvidia-smi reports it.
//
//go:embed presets/*.json
var presetFiles embed.FS

type modelPresetFile struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases"`
	HFRepo      string   `json:"hf_repo"`
	Params      int64    `json:"params"`
	WeightBytes int64    `json:"weight_bytes"`
	Source      string   `json:"source"`
	// Hybrid puts the model in the layout comparison (HybridPresets).
	Hybrid bool            `json:"hybrid"`
	Config json.RawMessage `json:"config"`
}

// GPU is a device to plan for: its memory as nvidia-smi reports it (the "Total" of
// Memory-Usage, in MiB), which is what vLLM's --gpu-memory-utilization is a fraction of,
// give or take the few hundred MiB the driver keeps.
type GPU struct {
	Name          string   `json:"name"`
	Aliases       []string `json:"aliases,omitempty"`
	NvidiaSMIName string   `json:"nvidia_smi_name,omitempty"`
	MemoryMiB     int64    `json:"memory_mib"`
	// Bytes, when not 0, is the memory in bytes and takes precedence over MemoryMiB: a
	// size given in decimal units ("an 80 GB card") is not a whole number of MiB.
	Bytes int64 `json:"bytes,omitempty"`
	// ComputeCapability is the CUDA compute capability as vLLM's DeviceCapability.to_int
	// writes it, major x 10 + minor: 75 for a T4's 7.5, 90 for an H100's 9.0. It decides
	// which data types vLLM runs a model in (ModelSpec.OnGPU). 0 is unknown, planned as
	// 8.0 or later (a custom GPU, --gpu-memory).
	ComputeCapability int    `json:"compute_capability,omitempty"`
	Source            string `json:"source,omitempty"`
}

// MemoryBytes returns the memory in bytes: Bytes when set, else MemoryMiB x 2^20.
func (g GPU) MemoryBytes() int64 {
	if g.Bytes != 0 {
		return g.Bytes
	}
	return g.MemoryMiB << 20
}

type presetTable struct {
	models     []ModelSpec
	hybrid     []int          // indices of the models of the layout comparison
	modelNames map[string]int // normalized name, alias or HF repo -> index
	gpus       []GPU
	gpuNames   map[string]int
}

var (
	presetsOnce sync.Once
	presets     presetTable
)

// loadPresets parses the embedded presets once. A preset that does not parse is a bug in
// this module, caught by the tests, so it panics.
func loadPresets() *presetTable {
	presetsOnce.Do(func() {
		t, err := parsePresets()
		if err != nil {
			panic("kvpage: broken embedded preset: " + err.Error())
		}
		presets = t
	})
	return &presets
}

func parsePresets() (presetTable, error) {
	t := presetTable{modelNames: map[string]int{}, gpuNames: map[string]int{}}
	data, err := presetFiles.ReadFile("presets/models.json")
	if err != nil {
		return t, err
	}
	var files []modelPresetFile
	if err := json.Unmarshal(data, &files); err != nil {
		return t, fmt.Errorf("models.json: %v", err)
	}
	for _, f := range files {
		spec, err := ParseHFConfig(f.Config)
		if err != nil {
			return t, fmt.Errorf("model %s: %v", f.Name, err)
		}
		spec.Name, spec.Params, spec.WeightBytes = f.Name, f.Params, f.WeightBytes
		spec.Source = f.HFRepo + ": " + f.Source
		if f.WeightBytes > 0 {
			spec.Notes = slices.DeleteFunc(spec.Notes, func(n string) bool { return strings.HasPrefix(n, weightsNote) })
		}
		if len(spec.Notes) == 0 {
			spec.Notes = nil
		}
		if err := addNames(t.modelNames, len(t.models), append([]string{f.Name, f.HFRepo}, f.Aliases...)); err != nil {
			return t, err
		}
		if f.Hybrid {
			if _, err := spec.Hybrid(BF16); err != nil {
				return t, fmt.Errorf("model %s: %v", f.Name, err)
			}
			t.hybrid = append(t.hybrid, len(t.models))
		}
		t.models = append(t.models, spec)
	}
	data, err = presetFiles.ReadFile("presets/gpus.json")
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(data, &t.gpus); err != nil {
		return t, fmt.Errorf("gpus.json: %v", err)
	}
	for i, g := range t.gpus {
		if g.MemoryMiB <= 0 {
			return t, fmt.Errorf("GPU %s: memory %d MiB", g.Name, g.MemoryMiB)
		}
		if g.ComputeCapability < 60 {
			return t, fmt.Errorf("GPU %s: compute capability %d (vLLM runs on 6.0 and later)", g.Name, g.ComputeCapability)
		}
		if err := addNames(t.gpuNames, i, append([]string{g.Name}, g.Aliases...)); err != nil {
			return t, err
		}
	}
	return t, nil
}

func addNames(m map[string]int, i int, names []string) error {
	for _, n := range names {
		if n == "" {
			continue
		}
		k := normalizeName(n)
		if j, dup := m[k]; dup && j != i {
			return fmt.Errorf("name %q used twice", n)
		}
		m[k] = i
	}
	return nil
}

// normalizeName makes "Llama_3.1 70B" and "llama-3.1-70b" the same name.
func normalizeName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ' ' {
			return '-'
		}
		return r
	}, s)
}

// ModelPreset returns the built-in model named name: a preset name such as
// "llama-3.1-70b", an alias, or its Hugging Face repository ("meta-llama/Llama-3.1-70B-
// Instruct"), case and '-'/'_' ignored. An unknown name gives an *UnknownNameError
// wrapping ErrUnknownModel that lists the closest preset names.
func ModelPreset(name string) (ModelSpec, error) {
	t := loadPresets()
	i, ok := t.modelNames[normalizeName(name)]
	if !ok {
		return ModelSpec{}, &UnknownNameError{Kind: "model", Name: name, Closest: closestPreset(name, t.modelNames, ModelPresetNames()), Err: ErrUnknownModel}
	}
	m := t.models[i]
	m.Groups = slices.Clone(m.Groups)
	m.Notes = slices.Clone(m.Notes)
	return m, nil
}

// ModelPresetNames returns the names of the built-in models, in the order of the presets
// file.
func ModelPresetNames() []string {
	t := loadPresets()
	names := make([]string, len(t.models))
	for i, m := range t.models {
		names[i] = m.Name
	}
	return names
}

// GPUPreset returns the built-in GPU named name ("h100-80gb", "h100", "H200", ...). An
// unknown name gives an *UnknownNameError wrapping ErrUnknownGPU that lists the closest
// preset names.
func GPUPreset(name string) (GPU, error) {
	t := loadPresets()
	i, ok := t.gpuNames[normalizeName(name)]
	if !ok {
		return GPU{}, &UnknownNameError{Kind: "GPU", Name: name, Closest: closestPreset(name, t.gpuNames, GPUPresetNames()), Err: ErrUnknownGPU}
	}
	g := t.gpus[i]
	g.Aliases = slices.Clone(g.Aliases)
	return g, nil
}

// GPUPresetNames returns the names of the built-in GPUs.
func GPUPresetNames() []string {
	t := loadPresets()
	names := make([]string, len(t.gpus))
	for i, g := range t.gpus {
		names[i] = g.Name
	}
	return names
}

// closestPreset ranks every name and alias by edit distance to name and returns the
// canonical names of the three nearest presets.
func closestPreset(name string, index map[string]int, canonical []string) []string {
	best := map[int]int{} // preset index -> smallest distance over its names
	q := normalizeName(name)
	for k, i := range index {
		d := editDistance(q, k)
		if old, ok := best[i]; !ok || d < old {
			best[i] = d
		}
	}
	order := make([]int, 0, len(best))
	for i := range best {
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool {
		if best[order[a]] != best[order[b]] {
			return best[order[a]] < best[order[b]]
		}
		return order[a] < order[b]
	})
	if len(order) > 3 {
		order = order[:3]
	}
	out := make([]string, len(order))
	for j, i := range order {
		out[j] = canonical[i]
	}
	return out
}

// closestNames returns the k names nearest to name by edit distance, ties in list order.
func closestNames(name string, names []string, k int) []string {
	q := normalizeName(name)
	out := slices.Clone(names)
	sort.SliceStable(out, func(a, b int) bool {
		return editDistance(q, normalizeName(out[a])) < editDistance(q, normalizeName(out[b]))
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
