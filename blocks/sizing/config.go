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
// for the weight type; max_position_embeddings; and what each layer caches (the rules
// of layerKinds, in this order):
//
//   - layer_types when present (full_attention, sliding_attention, chunked_attention,
//     linear_attention; attention and mamba too), or layers_block_type (Jamba);
//   - Jamba's attn_layer_period / attn_layer_offset, Qwen3-Next's full_attention_interval,
//     Llama 4's attention_chunk_size with no_rope_layers (or no_rope_layer_interval);
//   - otherwise nothing when use_sliding_window is false or sliding_window is null or 0;
//   - otherwise the family's interleave rule: gemma2 and gpt_oss alternate, even layers
//     (from 0) sliding; gemma3 and cohere2 have one global layer every
//     sliding_window_pattern layers (defaults 6 and 4), layer i global when (i+1) is a
//     multiple of it; qwen2 and qwen3 slide from layer max_window_layers on; any other
//     family (Mistral 7B v0.1) slides on every layer.
//
// A state layer (Mamba, Gated DeltaNet) is sized from mamba_expand, hidden_size,
// mamba_d_conv and mamba_d_state, or from linear_conv_kernel_dim, linear_num_key_heads,
// linear_key_head_dim, linear_num_value_heads and linear_value_head_dim (see stateValues).
//
// A multimodal wrapper (Gemma 3, Llava, Mistral 3) keeps its language model's fields in
// text_config: they are read from there, and a field absent there from the top level.
// Missing or unusable fields give a *FieldError naming the field (wrapping
// ErrMissingField or ErrBadConfig). Defaults taken are listed in the spec's Notes. The
// parameter count is not in config.json: set Params (or WeightBytes) to size the weights.
// A config over MaxConfigBytes is refused unread, one nesting deeper than MaxConfigDepth
// with ErrConfigTooDeep before it is decoded.
func ParseHFConfig(data []byte) (ModelSpec, error) {
	if len(data) > MaxConfigBytes {
		return ModelSpec{}, fmt.Errorf("%w: config.json is %d bytes, over the %d a config.json can need", ErrBadConfig, len(data), MaxConfigBytes)
	}
	if err := checkDepth(data); err != nil {
		return ModelSpec{}, err
	}
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

// MaxConfigBytes bounds the config.json ParseHFConfig reads. Published configs are a few
// kilobytes (Llama 4 Scout's, among the largest, under 2 KiB); a reader of a file should
// stop at MaxConfigBytes+1 bytes rather than load a hostile file whole.
const MaxConfigBytes = 1 << 20

// MaxConfigDepth bounds how deeply a config.json ParseHFConfig reads nests objects and
// arrays. Published configs nest 2 or 3 levels (a compressed-tensors quantization_config
// about 5); encoding/json alone accepts 10,000, a recursion and a map or slice per level.
const MaxConfigDepth = 64

// checkDepth refuses data whose brackets outside strings nest deeper than MaxConfigDepth:
// one pass over at most MaxConfigBytes, no allocation. Whether data is JSON at all is
// left to the decoder; a stray closing bracket never takes the count below 0.
func checkDepth(data []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte, a quote among them
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > MaxConfigDepth {
				return fmt.Errorf("%w: more than %d levels at byte %d", ErrConfigTooDeep, MaxConfigDepth, i)
			}
		case '}', ']':
			depth = max(depth-1, 0)
		}
	}
	return nil
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
	m.Name, m.ModelType = modelType, modelType
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
	kindOf, err := c.layerKinds(layers, modelType)
	if err != nil {
		return nil, err
	}
	var attn LayerGroup // heads and dims, read only when some layer is attention
	var state int64     // state values, read only when some layer keeps a state
	var groups []LayerGroup
	index := map[layerKind]int{}
	var last layerKind
	lastGroup := 0
	// One group per distinct kind, in order of first appearance. The kinds come from a
	// rule or a list of at most num_hidden_layers entries; nothing is allocated per layer.
	for i := range layers {
		k, err := kindOf(i)
		if err != nil {
			return nil, err
		}
		if i > 0 && k == last {
			groups[lastGroup].Layers++
			continue
		}
		g, seen := index[k]
		last = k
		if !seen {
			var lg LayerGroup
			if k.state != "" {
				if state == 0 {
					if state, err = c.stateValues(k.state); err != nil {
						return nil, err
					}
				}
				lg.StateValues = state
			} else {
				if attn.KVHeads == 0 {
					if attn, err = c.attentionShape(heads); err != nil {
						return nil, err
					}
				}
				lg = attn
				lg.Window, lg.Chunked = k.window, k.chunked
			}
			g = len(groups)
			index[k] = g
			groups = append(groups, lg)
		}
		lastGroup = g
		groups[g].Layers++
	}
	return groups, nil
}

// attentionShape reads the KV heads and head dims of the attention layers.
func (c *hfConfig) attentionShape(heads int) (LayerGroup, error) {
	kvHeads, ok, err := c.int("num_key_value_heads")
	if err != nil {
		return LayerGroup{}, err
	}
	if !ok {
		kvHeads = heads
		c.note("num_key_value_heads absent: assuming %d, one KV head per attention head, as transformers does", heads)
	}
	if kvHeads == 0 {
		return LayerGroup{}, badField("num_key_value_heads", "is 0")
	}
	headDim, ok, err := c.int("head_dim")
	if err != nil {
		return LayerGroup{}, err
	}
	if !ok {
		hidden, hasHidden, err := c.int("hidden_size")
		if err != nil {
			return LayerGroup{}, err
		}
		if !hasHidden {
			_, name, _ := c.lookup("head_dim")
			return LayerGroup{}, missingField(name, "and hidden_size is missing too, so head_dim = hidden_size / num_attention_heads cannot be worked out")
		}
		if hidden%heads != 0 {
			return LayerGroup{}, badField("hidden_size", "%d is not a multiple of num_attention_heads %d", hidden, heads)
		}
		headDim = hidden / heads
	}
	if headDim == 0 {
		return LayerGroup{}, badField("head_dim", "is 0")
	}
	vDim, ok, err := c.int("v_head_dim")
	if err != nil {
		return LayerGroup{}, err
	}
	if !ok || vDim == 0 {
		vDim = headDim
	}
	return LayerGroup{KVHeads: kvHeads, KHeadDim: headDim, VHeadDim: vDim}, nil
}

// layerKind is what one decoder layer caches.
type layerKind struct {
	window  int    // sliding window or attention chunk, tokens; 0 for full attention
	chunked bool   // window is a chunk
	state   string // "linear_attention" or "mamba" for a state layer, else ""
}

// State layer kinds.
const (
	stateLinear = "linear_attention" // Gated DeltaNet (Qwen3-Next, Qwen3.5)
	stateMamba  = "mamba"            // Mamba (Jamba)
)

// layerKinds returns each layer's kind as a function of its index, from, in this order:
//
//   - layer_types (full_attention, sliding_attention, chunked_attention,
//     linear_attention; also attention and mamba);
//   - layers_block_type (Jamba: attention, mamba);
//   - Jamba's attn_layer_period and attn_layer_offset (defaults 8 and 4): layer i is
//     attention when i % period == offset, Mamba otherwise;
//   - full_attention_interval (Qwen3-Next, Qwen3.5): layer i is full attention when
//     (i+1) is a multiple of it, linear attention otherwise;
//   - Llama 4 (attention_chunk_size with a llama4 model_type or no_rope_layers): a layer
//     with RoPE (no_rope_layers[i] = 1) is chunked, a NoPE layer (0) is global; an absent
//     or empty no_rope_layers is transformers' default, one NoPE layer every
//     no_rope_layer_interval (default 4), layer i NoPE when (i+1) is a multiple of it;
//   - the sliding-window rules of layerWindow.
func (c *hfConfig) layerKinds(layers int, modelType string) (func(int) (layerKind, error), error) {
	if v, name, ok := c.lookup("layer_types"); ok {
		return c.kindsFromList(v, name, layers)
	}
	if v, name, ok := c.lookup("layers_block_type"); ok {
		return c.kindsFromList(v, name, layers)
	}
	if modelType == "jamba" {
		period, offset, err := c.jambaPeriod()
		if err != nil {
			return nil, err
		}
		return func(i int) (layerKind, error) {
			if i%period == offset {
				return layerKind{}, nil
			}
			return layerKind{state: stateMamba}, nil
		}, nil
	}
	if interval, ok, err := c.int("full_attention_interval"); err != nil {
		return nil, err
	} else if ok {
		if interval == 0 {
			return nil, badField("full_attention_interval", "is 0")
		}
		c.note("full_attention_interval %d: one full-attention layer every %d, linear attention (Gated DeltaNet) on the others", interval, interval)
		return func(i int) (layerKind, error) {
			if (i+1)%interval == 0 {
				return layerKind{}, nil
			}
			return layerKind{state: stateLinear}, nil
		}, nil
	}
	if f, ok, err := c.llama4Kinds(layers, modelType); err != nil || ok {
		return f, err
	}
	return c.slidingKinds(layers, modelType)
}

// jambaPeriod reads Jamba's attention interleave, with JambaConfig's defaults.
func (c *hfConfig) jambaPeriod() (period, offset int, err error) {
	period, ok, err := c.int("attn_layer_period")
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		period = 8
		c.note("attn_layer_period absent: JambaConfig's default 8")
	}
	offset, ok, err = c.int("attn_layer_offset")
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		offset = 4
		c.note("attn_layer_offset absent: JambaConfig's default 4")
	}
	if period == 0 || offset >= period {
		return 0, 0, badField("attn_layer_offset", "is %d with attn_layer_period %d, want an offset below a positive period", offset, period)
	}
	c.note("attention on layer i when i %% %d == %d, Mamba on the others", period, offset)
	return period, offset, nil
}

// llama4Kinds is Llama 4's interleave of chunked local and global (NoPE) attention.
func (c *hfConfig) llama4Kinds(layers int, modelType string) (func(int) (layerKind, error), bool, error) {
	chunk, hasChunk, err := c.int("attention_chunk_size")
	if err != nil {
		return nil, false, err
	}
	v, name, hasNoRope := c.lookup("no_rope_layers")
	if !hasChunk || (!hasNoRope && !strings.HasPrefix(modelType, "llama4")) {
		return nil, false, nil
	}
	if chunk == 0 {
		return nil, false, badField("attention_chunk_size", "is 0")
	}
	var list []any
	if hasNoRope {
		l, ok := v.([]any)
		if !ok {
			return nil, false, badField(name, "is %s, want an array of 0 and 1", jsonKind(v))
		}
		if len(l) != 0 && len(l) < layers {
			return nil, false, badField(name, "has %d entries for %d layers (num_hidden_layers)", len(l), layers)
		}
		list = l
	}
	if len(list) == 0 {
		interval, ok, err := c.int("no_rope_layer_interval")
		if err != nil {
			return nil, false, err
		}
		if !ok {
			interval = 4
		}
		if interval == 0 {
			return nil, false, badField("no_rope_layer_interval", "is 0")
		}
		c.note("no_rope_layers empty: one global (NoPE) layer every %d, chunked attention (chunk %d) on the others, as transformers' Llama4TextConfig", interval, chunk)
		return func(i int) (layerKind, error) {
			if (i+1)%interval == 0 {
				return layerKind{}, nil
			}
			return layerKind{window: chunk, chunked: true}, nil
		}, true, nil
	}
	c.note("no_rope_layers: chunked attention (chunk %d) on RoPE layers, global attention on NoPE ones", chunk)
	return func(i int) (layerKind, error) {
		switch n, _ := list[i].(json.Number); n.String() {
		case "0":
			return layerKind{}, nil
		case "1":
			return layerKind{window: chunk, chunked: true}, nil
		}
		return layerKind{}, badField(name, "entry %d is not 0 or 1", i)
	}, true, nil
}

// kindsFromList reads layer_types or layers_block_type.
func (c *hfConfig) kindsFromList(v any, name string, layers int) (func(int) (layerKind, error), error) {
	list, ok := v.([]any)
	if !ok {
		return nil, badField(name, "is %s, want an array of layer type names", jsonKind(v))
	}
	if len(list) != layers {
		return nil, badField(name, "has %d entries for %d layers (num_hidden_layers)", len(list), layers)
	}
	// The window and chunk are read once, when a layer first needs them.
	window, chunk := -1, -1
	return func(i int) (layerKind, error) {
		s, _ := list[i].(string)
		switch s {
		case "full_attention", "attention":
			return layerKind{}, nil
		case "sliding_attention":
			if window < 0 {
				w, ok, err := c.int("sliding_window")
				if err != nil {
					return layerKind{}, err
				}
				if !ok || w == 0 {
					_, wname, _ := c.lookup("sliding_window")
					return layerKind{}, missingField(wname, name+" has sliding_attention layers")
				}
				window = w
			}
			return layerKind{window: window}, nil
		case "chunked_attention":
			if chunk < 0 {
				n, err := c.mustInt("attention_chunk_size", name+" has chunked_attention layers")
				if err != nil {
					return layerKind{}, err
				}
				if n == 0 {
					return layerKind{}, badField("attention_chunk_size", "is 0")
				}
				chunk = n
			}
			return layerKind{window: chunk, chunked: true}, nil
		case stateLinear, stateMamba:
			return layerKind{state: s}, nil
		}
		return layerKind{}, badField(name, "layer %d is %q: only full_attention, sliding_attention, chunked_attention, linear_attention, attention and mamba layers have a cache the sizing can model", i, shorten(list[i]))
	}, nil
}

// shorten keeps an error message about a hostile value short.
func shorten(v any) string {
	s, ok := v.(string)
	if !ok {
		return jsonKind(v)
	}
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// stateValues reads the per-layer state size of a state layer kind.
//
// Linear attention (Gated DeltaNet, as vLLM's GDN state shapes): a convolution state of
// (linear_conv_kernel_dim - 1) x (2 x linear_num_key_heads x linear_key_head_dim +
// linear_num_value_heads x linear_value_head_dim) values and a recurrent state of
// linear_num_value_heads x linear_key_head_dim x linear_value_head_dim.
//
// Mamba (Jamba, as vLLM's Mamba1 state shapes): with d_inner = mamba_expand x
// hidden_size, a convolution state of (mamba_d_conv - 1) x d_inner and an SSM state of
// d_inner x mamba_d_state (defaults 2, 4 and 16, JambaConfig's).
func (c *hfConfig) stateValues(kind string) (int64, error) {
	get := func(key string, def int) (int64, error) {
		n, ok, err := c.int(key)
		if err != nil {
			return 0, err
		}
		if !ok {
			if def == 0 {
				_, name, _ := c.lookup(key)
				return 0, missingField(name, "the "+kind+" layers' state is sized from it")
			}
			n = def
			c.note("%s absent: the default %d", key, def)
		}
		if n == 0 || n > maxDim {
			return 0, badField(key, "is %d, want 1 to %d", n, maxDim)
		}
		return int64(n), nil
	}
	var v [5]int64
	var err error
	var keys []string
	var defs []int
	if kind == stateLinear {
		keys = []string{"linear_conv_kernel_dim", "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim"}
		defs = []int{0, 0, 0, 0, 0}
	} else {
		keys = []string{"mamba_expand", "hidden_size", "mamba_d_conv", "mamba_d_state"}
		defs = []int{2, 0, 4, 16}
	}
	for i, k := range keys {
		if v[i], err = get(k, defs[i]); err != nil {
			return 0, err
		}
	}
	var total int64
	if kind == stateLinear {
		kernel, kh, kd, vh, vd := v[0], v[1], v[2], v[3], v[4]
		if kernel < 2 {
			return 0, badField("linear_conv_kernel_dim", "is %d, want at least 2", kernel)
		}
		total = (kernel-1)*(2*kh*kd+vh*vd) + vh*kd*vd
		c.note("linear attention state per layer: (%d-1) x (2 x %d x %d + %d x %d) convolution + %d x %d x %d recurrent = %d values", kernel, kh, kd, vh, vd, vh, kd, vd, total)
	} else {
		expand, hidden, conv, dstate := v[0], v[1], v[2], v[3]
		if conv < 2 {
			return 0, badField("mamba_d_conv", "is %d, want at least 2", conv)
		}
		inner := expand * hidden
		total = (conv-1)*inner + inner*dstate
		c.note("Mamba state per layer: d_inner %d x %d = %d; (%d-1) x %d convolution + %d x %d SSM = %d values", expand, hidden, inner, conv, inner, inner, dstate, total)
	}
	if total > maxStateValues {
		return 0, badField(keys[0], "gives a state of %d values a layer, beyond any real model", total)
	}
	return total, nil
}

// slidingKinds returns each layer's sliding window for a model without layer types.
func (c *hfConfig) slidingKinds(layers int, modelType string) (func(int) (layerKind, error), error) {
	full := func(int) (layerKind, error) { return layerKind{}, nil }
	window, hasWindow, err := c.int("sliding_window")
	if err != nil {
		return nil, err
	}
	if v, name, ok := c.lookup("use_sliding_window"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, badField(name, "is %s, want a boolean", jsonKind(v))
		}
		if !b {
			return full, nil
		}
	} else if isQwen(modelType) {
		return full, nil // Qwen2Config's use_sliding_window defaults to false
	}
	if !hasWindow || window == 0 {
		return full, nil
	}
	slide := func(on bool) layerKind {
		if on {
			return layerKind{window: window}
		}
		return layerKind{}
	}
	pattern, hasPattern, err := c.int("sliding_window_pattern")
	if err != nil {
		return nil, err
	}
	switch {
	case modelType == "gemma2" || modelType == "gpt_oss":
		c.note("%s without layer_types: sliding window %d on even layers (0, 2, ...), full attention on odd ones", modelType, window)
		return func(i int) (layerKind, error) { return slide(i%2 == 0), nil }, nil
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
		return func(i int) (layerKind, error) { return slide((i+1)%pattern != 0), nil }, nil
	case isQwen(modelType):
		first, ok, err := c.int("max_window_layers")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, missingField("max_window_layers", "use_sliding_window is true")
		}
		return func(i int) (layerKind, error) { return slide(i >= first), nil }, nil
	}
	c.note("sliding window %d on every layer (no layer_types, no interleave rule for %q)", window, modelType)
	return func(int) (layerKind, error) { return slide(true), nil }, nil
}

func isQwen(modelType string) bool {
	return strings.HasPrefix(modelType, "qwen2") || strings.HasPrefix(modelType, "qwen3")
}

// weightsNote starts the notes about how the weights are sized, which a given weight size
// makes moot.
const weightsNote = "weights: "

// dtypes reads torch_dtype (or dtype) and the weight type of a quantized checkpoint.
// latentOnly reports whether every layer that caches tokens in gs caches an MLA latent
// (DeepSeek's models): vLLM builds no Attention layer for such a model, only
// MLAAttention, so nothing applies compressed-tensors' auto-to-fp8 rule.
func latentOnly(gs []LayerGroup) bool {
	n := 0
	for _, g := range gs {
		switch {
		case g.State():
		case !g.MLA():
			return false
		default:
			n++
		}
	}
	return n > 0
}

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
	// The notes say how ServingDType reads DType: vLLM's --dtype auto (see there).
	switch m.DType {
	case FP16, BF16:
	case 0:
		c.note("no torch_dtype: vLLM takes the checkpoint's safetensors dtype, else float32, and --dtype auto runs float32 in bf16 " +
			"(GPUs of compute capability 8.0+); sized in bf16 (an fp16 checkpoint runs in fp16, the same size)")
	case FP32:
		c.note("torch_dtype float32: vLLM's --dtype auto runs it in bf16 (GPUs of compute capability 8.0+), so it is sized in bf16")
	default:
		c.note("torch_dtype %s: vLLM's --dtype auto runs a model in bf16, fp16 or fp32 only and falls back to bf16, so it is sized in bf16", m.DType)
	}
	q, name, ok := c.lookup("quantization_config")
	if !ok {
		return nil
	}
	qc, isObj := q.(map[string]any)
	if !isObj {
		return badField(name, "is %s, want an object", jsonKind(q))
	}
	kv, kvNote, err := kvCacheDType(qc, name)
	if err != nil {
		return err
	}
	method, _ := qc["quant_method"].(string)
	switch {
	case kv != 0 && method == "compressed-tensors" && latentOnly(m.Groups):
		c.note("%s.kv_cache_scheme (compressed-tensors): the checkpoint's KV cache is fp8_e4m3, which vLLM's --kv-cache-dtype auto "+
			"does not take for MLA layers (only its Attention layer turns the scheme into fp8; MLAAttention keeps auto), "+
			"so auto is the model's data type; give --kv-cache-dtype fp8 for an fp8 latent cache", name)
	case kv != 0:
		m.KVDType = kv
		c.note("%s", kvNote)
	}
	bitsNum, _ := qc["bits"].(json.Number)
	switch {
	case method == "fp8":
		m.WeightDType = FP8E4M3
	case method == "mxfp4":
		m.WeightDType = MXFP4
		c.note(weightsNote+"quantization_config mxfp4: all weights sized at 4.25 bits, though some layers stay in %s", m.ServingDType())
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
