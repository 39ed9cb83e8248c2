package sizing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// ParseHFConfig reads a Hugging Face config.json into a ModelSpec.
//
// It reads num_hidden_layers; num_attention_heads; num_key_value_heads (absent: equal to
// the attention heads, as transformers assumes); head_dim (absent or null: hidden_size /
// num_attention_heads); v_head_dim when V heads differ from K heads; kv_lora_rank and
// qk_rope_head_dim for MLA; torch_dtype (or dtype, its newer name); quantization_config
// for the weight type; max_position_embeddings; and which layers have a sliding window:
//
//   - layer_types when present (full_attention, sliding_attention, chunked_attention);
//   - otherwise nothing when use_sliding_window is false or sliding_window is null or 0;
//   - otherwise the family's interleave rule: gemma2 and gpt_oss alternate, even layers
//     (from 0) sliding; gemma3 and cohere2 have one global layer every
//     sliding_window_pattern layers (defaults 6 and 4), layer i global when (i+1) is a
//     multiple of it; qwen2 and qwen3 slide from layer max_window_layers on; any other
//     family (Mistral 7B v0.1) slides on every layer.
//
// A multimodal wrapper (Gemma 3, Llava, Mistral 3) keeps its language model's fields in
// text_config: they are read from there, and a field absent there from the top level.
// Missing or unusable fields give a *FieldError naming the field (wrapping
// ErrMissingField or ErrBadConfig). Defaults taken are listed in the spec's Notes. The
// parameter count is not in config.json: set Params (or WeightBytes) to size the weights.
func ParseHFConfig(data []byte) (ModelSpec, error) {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return ModelSpec{}, fmt.Errorf("%w: config.json is not a JSON object: %v", ErrBadConfig, err)
	}
	if root == nil {
		return ModelSpec{}, fmt.Errorf("%w: config.json is null", ErrBadConfig)
	}
	c := hfConfig{root: root}
	if tc, ok := root["text_config"]; ok && tc != nil {
		m, ok := tc.(map[string]any)
		if !ok {
			return ModelSpec{}, badField("text_config", "is not an object")
		}
		c.text = m
	}
	spec, err := c.spec()
	if err != nil {
		return ModelSpec{}, err
	}
	if err := spec.Validate(); err != nil {
		return ModelSpec{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	return spec, nil
}

type hfConfig struct {
	root  map[string]any
	text  map[string]any // text_config of a multimodal wrapper, nil otherwise
	notes []string
}

// lookup finds key in text_config first, then at the top level, and returns the dotted
// name it was found under (or would be looked for under) for error messages.
func (c *hfConfig) lookup(key string) (any, string, bool) {
	if c.text != nil {
		if v, ok := c.text[key]; ok && v != nil {
			return v, "text_config." + key, true
		}
	}
	if v, ok := c.root[key]; ok && v != nil {
		return v, key, true
	}
	if c.text != nil {
		return nil, "text_config." + key, false
	}
	return nil, key, false
}

// int reads an integer field; a JSON number with no fraction (128 or 128.0) is accepted.
func (c *hfConfig) int(key string) (int, bool, error) {
	v, name, ok := c.lookup(key)
	if !ok {
		return 0, false, nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return 0, true, badField(name, "is %s, want an integer", jsonKind(v))
	}
	f, err := num.Float64()
	if err != nil || f != math.Trunc(f) || f < 0 || f > MaxTokens {
		return 0, true, badField(name, "is %s, want a non-negative integer", num)
	}
	return int(f), true, nil
}

func (c *hfConfig) mustInt(key, hint string) (int, error) {
	n, ok, err := c.int(key)
	if err != nil {
		return 0, err
	}
	if !ok {
		_, name, _ := c.lookup(key)
		return 0, missingField(name, hint)
	}
	return n, nil
}

func (c *hfConfig) str(key string) (string, bool, error) {
	v, name, ok := c.lookup(key)
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, badField(name, "is %s, want a string", jsonKind(v))
	}
	return s, true, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func (c *hfConfig) note(format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

func (c *hfConfig) spec() (ModelSpec, error) {
	var m ModelSpec
	modelType, _, err := c.str("model_type")
	if err != nil {
		return m, err
	}
	m.Name = modelType
	if m.Name == "" {
		m.Name = "config.json"
	}
	if c.text != nil {
		c.note("multimodal wrapper: sized from text_config (the language model); the vision tower holds no KV cache")
	}
	layers, err := c.mustInt("num_hidden_layers", "the number of decoder layers")
	if err != nil {
		return m, err
	}
	if layers == 0 || layers > maxDim {
		_, name, _ := c.lookup("num_hidden_layers")
		return m, badField(name, "is %d, want 1 to %d", layers, maxDim)
	}
	heads, hasHeads, err := c.int("num_attention_heads")
	if err != nil {
		return m, err
	}
	m.AttentionHeads = heads

	rank, isMLA, err := c.int("kv_lora_rank")
	if err != nil {
		return m, err
	}
	if isMLA {
		rope, err := c.mustInt("qk_rope_head_dim", "MLA caches kv_lora_rank + qk_rope_head_dim values per token per layer")
		if err != nil {
			return m, err
		}
		if rank+rope == 0 {
			return m, badField("kv_lora_rank", "and qk_rope_head_dim are both 0")
		}
		m.Groups = []LayerGroup{{Layers: layers, LatentDim: rank + rope}}
	} else {
		if !hasHeads {
			_, name, _ := c.lookup("num_attention_heads")
			return m, missingField(name, "the number of query heads")
		}
		if heads == 0 {
			return m, badField("num_attention_heads", "is 0")
		}
		groups, err := c.attentionGroups(layers, heads, modelType)
		if err != nil {
			return m, err
		}
		m.Groups = groups
	}
	if err := c.dtypes(&m); err != nil {
		return m, err
	}
	if n, ok, err := c.int("max_position_embeddings"); err != nil {
		return m, err
	} else if ok {
		m.MaxModelLen = n
	}
	m.Source = "config.json"
	m.Notes = c.notes
	return m, nil
}

func (c *hfConfig) attentionGroups(layers, heads int, modelType string) ([]LayerGroup, error) {
	kvHeads, ok, err := c.int("num_key_value_heads")
	if err != nil {
		return nil, err
	}
	if !ok {
		kvHeads = heads
		c.note("num_key_value_heads absent: assuming %d, one KV head per attention head, as transformers does", heads)
	}
	if kvHeads == 0 {
		return nil, badField("num_key_value_heads", "is 0")
	}
	headDim, ok, err := c.int("head_dim")
	if err != nil {
		return nil, err
	}
	if !ok {
		hidden, hasHidden, err := c.int("hidden_size")
		if err != nil {
			return nil, err
		}
		if !hasHidden {
			_, name, _ := c.lookup("head_dim")
			return nil, missingField(name, "and hidden_size is missing too, so head_dim = hidden_size / num_attention_heads cannot be worked out")
		}
		if hidden%heads != 0 {
			return nil, badField("hidden_size", "%d is not a multiple of num_attention_heads %d", hidden, heads)
		}
		headDim = hidden / heads
	}
	if headDim == 0 {
		return nil, badField("head_dim", "is 0")
	}
	vDim, ok, err := c.int("v_head_dim")
	if err != nil {
		return nil, err
	}
	if !ok || vDim == 0 {
		vDim = headDim
	}
	windows, err := c.layerWindows(layers, modelType)
	if err != nil {
		return nil, err
	}
	// One group per distinct window, in order of first appearance.
	var groups []LayerGroup
	index := map[int]int{}
	for _, w := range windows {
		i, seen := index[w]
		if !seen {
			i = len(groups)
			index[w] = i
			groups = append(groups, LayerGroup{Window: w, KVHeads: kvHeads, KHeadDim: headDim, VHeadDim: vDim})
		}
		groups[i].Layers++
	}
	return groups, nil
}

// layerWindows returns each layer's sliding window, 0 for full attention.
func (c *hfConfig) layerWindows(layers int, modelType string) ([]int, error) {
	windows := make([]int, layers)
	window, hasWindow, err := c.int("sliding_window")
	if err != nil {
		return nil, err
	}
	if v, name, ok := c.lookup("layer_types"); ok {
		return c.windowsFromLayerTypes(v, name, windows, window, hasWindow && window > 0)
	}
	if v, name, ok := c.lookup("use_sliding_window"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, badField(name, "is %s, want a boolean", jsonKind(v))
		}
		if !b {
			return windows, nil
		}
	} else if isQwen(modelType) {
		return windows, nil // Qwen2Config's use_sliding_window defaults to false
	}
	if !hasWindow || window == 0 {
		return windows, nil
	}
	pattern, hasPattern, err := c.int("sliding_window_pattern")
	if err != nil {
		return nil, err
	}
	switch {
	case modelType == "gemma2" || modelType == "gpt_oss":
		c.note("%s without layer_types: sliding window %d on even layers (0, 2, ...), full attention on odd ones", modelType, window)
		for i := range windows {
			if i%2 == 0 {
				windows[i] = window
			}
		}
	case hasPattern || strings.HasPrefix(modelType, "gemma3") || modelType == "cohere2":
		if !hasPattern {
			pattern = 6
			if modelType == "cohere2" {
				pattern = 4
			}
			c.note("sliding_window_pattern absent: %s's default %d", modelType, pattern)
		}
		if pattern == 0 {
			return nil, badField("sliding_window_pattern", "is 0")
		}
		c.note("one full-attention layer every %d, sliding window %d on the others", pattern, window)
		for i := range windows {
			if (i+1)%pattern != 0 {
				windows[i] = window
			}
		}
	case isQwen(modelType):
		first, ok, err := c.int("max_window_layers")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, missingField("max_window_layers", "use_sliding_window is true")
		}
		for i := first; i < layers; i++ {
			windows[i] = window
		}
	default:
		c.note("sliding window %d on every layer (no layer_types, no interleave rule for %q)", window, modelType)
		for i := range windows {
			windows[i] = window
		}
	}
	return windows, nil
}

func isQwen(modelType string) bool {
	return strings.HasPrefix(modelType, "qwen2") || strings.HasPrefix(modelType, "qwen3")
}

func (c *hfConfig) windowsFromLayerTypes(v any, name string, windows []int, window int, hasWindow bool) ([]int, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, badField(name, "is %s, want an array of layer type names", jsonKind(v))
	}
	if len(list) != len(windows) {
		return nil, badField(name, "has %d entries for %d layers (num_hidden_layers)", len(list), len(windows))
	}
	for i, t := range list {
		s, _ := t.(string)
		switch s {
		case "full_attention":
		case "sliding_attention":
			if !hasWindow {
				_, wname, _ := c.lookup("sliding_window")
				return nil, missingField(wname, name+" has sliding_attention layers")
			}
			windows[i] = window
		case "chunked_attention":
			chunk, err := c.mustInt("attention_chunk_size", name+" has chunked_attention layers")
			if err != nil {
				return nil, err
			}
			if chunk == 0 {
				return nil, badField("attention_chunk_size", "is 0")
			}
			windows[i] = chunk // a chunk never holds more than chunk tokens: a window's bound
		default:
			return nil, badField(name, "layer %d is %q: only full_attention, sliding_attention and chunked_attention have a KV cache the sizing can model", i, t)
		}
	}
	return windows, nil
}

// weightsNote starts the notes about how the weights are sized, which a given weight size
// makes moot.
const weightsNote = "weights: "

// dtypes reads torch_dtype (or dtype) and the weight type of a quantized checkpoint.
func (c *hfConfig) dtypes(m *ModelSpec) error {
	s, ok, err := c.str("torch_dtype")
	if err != nil {
		return err
	}
	if !ok {
		if s, ok, err = c.str("dtype"); err != nil {
			return err
		}
	}
	if ok {
		d, err := ParseDType(s)
		if err != nil {
			return badField("torch_dtype", "%q is not a data type the sizing knows", s)
		}
		m.DType = d
	}
	q, name, ok := c.lookup("quantization_config")
	if !ok {
		return nil
	}
	qc, isObj := q.(map[string]any)
	if !isObj {
		return badField(name, "is %s, want an object", jsonKind(q))
	}
	method, _ := qc["quant_method"].(string)
	bitsNum, _ := qc["bits"].(json.Number)
	switch {
	case method == "fp8":
		m.WeightDType = FP8E4M3
	case method == "mxfp4":
		m.WeightDType = MXFP4
		c.note(weightsNote+"quantization_config mxfp4: all weights sized at 4.25 bits, though some layers stay in %s", m.DType)
	case bitsNum.String() == "8":
		m.WeightDType = INT8
	case bitsNum.String() == "4":
		m.WeightDType = MXFP4
		c.note(weightsNote+"quantization_config %s with 4-bit weights: sized at 4.25 bits a parameter (one 8-bit scale per 32)", method)
	default:
		c.note(weightsNote+"quantization_config %q: weights sized in the model's data type", method)
	}
	return nil
}
