package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// A hybrid model (more than one kind of layer: full, sliding-window or chunked attention,
// Mamba / linear-attention state) gets a comparison of memory layouts below its plan:
// sizing.CompareLayouts at --max-model-len over the total KV budget, the per-class pools
// split for that same length.

// hybridOf returns the plan's model as the layout comparison describes it, or false when
// it has one kind of layer only (or is a bare byte figure).
func hybridOf(p sizing.Plan) (sizing.HybridModel, bool) {
	m := p.Config.Model
	if strings.HasSuffix(m.Name, " per token") {
		return sizing.HybridModel{}, false
	}
	h, err := m.Hybrid(p.Config.CacheDType)
	if err != nil {
		return h, false
	}
	kinds := map[sizing.HybridKind]bool{}
	for _, l := range h.Layers {
		kinds[l.Kind] = true
	}
	return h, len(kinds) > 1
}

// layoutsJSON is the comparison in `kvpage plan --json`.
type layoutsJSON struct {
	Tokens int64            `json:"tokens"`
	Budget int64            `json:"kv_cache_bytes"`
	Groups []layerGroupJSON `json:"groups"`
	Rows   []layoutRowJSON  `json:"rows"`
}

type layerGroupJSON struct {
	Kind          string `json:"kind"`
	Layers        int    `json:"layers"`
	Span          int    `json:"span_tokens,omitempty"`
	BytesPerToken int64  `json:"bytes_per_token,omitempty"` // all the group's layers
	StateBytes    int64  `json:"state_bytes,omitempty"`     // all the group's layers
}

type layoutRowJSON struct {
	Layout          string  `json:"layout"`
	BlockTokens     int     `json:"block_tokens"`
	PaddingLayers   int     `json:"padding_layers"`
	BlocksPerSeq    int64   `json:"blocks_per_sequence"`
	BytesPerRequest int64   `json:"bytes_per_request"`
	UsefulBytes     int64   `json:"useful_bytes_per_request"`
	Waste           float64 `json:"waste"`
	MaxConcurrency  int64   `json:"max_concurrency"`
}

func compareForPlan(p sizing.Plan) (sizing.HybridModel, []sizing.LayoutRow, int64, bool) {
	h, ok := hybridOf(p)
	budget := max(p.KVBudget, 0) * int64(p.Config.TensorParallel)
	if !ok || budget == 0 || p.Config.MaxModelLen <= 0 {
		return h, nil, 0, false
	}
	t := int64(p.Config.MaxModelLen)
	rows, err := sizing.CompareLayouts(h, t, t, budget)
	if err != nil {
		return h, nil, 0, false
	}
	return h, rows, budget, true
}

func layoutsToJSON(p sizing.Plan) *layoutsJSON {
	h, rows, budget, ok := compareForPlan(p)
	if !ok {
		return nil
	}
	j := &layoutsJSON{Tokens: int64(p.Config.MaxModelLen), Budget: budget}
	for _, l := range h.Layers {
		j.Groups = append(j.Groups, layerGroupJSON{Kind: string(l.Kind), Layers: l.Layers, Span: l.Span,
			BytesPerToken: int64(l.Layers) * l.TokenBytes, StateBytes: int64(l.Layers) * l.StateBytes})
	}
	for _, r := range rows {
		j.Rows = append(j.Rows, layoutRowJSON{Layout: string(r.Layout), BlockTokens: r.BlockTokens, PaddingLayers: r.PaddingLayers,
			BlocksPerSeq: r.Blocks, BytesPerRequest: r.RequestBytes, UsefulBytes: r.UsefulBytes,
			Waste: float64(int64(r.Waste()*10000+0.5)) / 10000, MaxConcurrency: r.Concurrency})
	}
	return j
}

// writeLayouts prints the comparison for a hybrid model; nothing for any other.
func writeLayouts(w io.Writer, p sizing.Plan) error {
	h, rows, budget, ok := compareForPlan(p)
	if !ok {
		return nil
	}
	fmt.Fprintf(w, "\nhybrid memory layouts, %s tokens a request, %s of KV cache in all (whole model, %s):\n",
		commas(int64(p.Config.MaxModelLen)), bothUnits(budget), p.Config.CacheDType)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range h.Layers {
		what := fmt.Sprintf("%s B a token", commas(int64(l.Layers)*l.TokenBytes))
		switch l.Kind {
		case sizing.KindState:
			what = fmt.Sprintf("%s a sequence (state)", bothUnits(int64(l.Layers)*l.StateBytes))
		case sizing.KindSliding:
			what += fmt.Sprintf(", window %s", commas(int64(l.Span)))
		case sizing.KindChunked:
			what += fmt.Sprintf(", chunk %s", commas(int64(l.Span)))
		}
		fmt.Fprintf(tw, "  group %s\t%d layers\t%s\n", l.Kind, l.Layers, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  layout\tblock, tokens\tpadding layers\tblocks a request\tper request\twaste\tmax concurrency\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%.1f%%\t%s\t\n", r.Layout, r.BlockTokens, r.PaddingLayers,
			commas(r.Blocks), human(float64(r.RequestBytes)), 100*r.Waste(), commas(r.Concurrency))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "  (uniform: vLLM's one page size; pool per page size: split ahead for this length;\n   carved: large pages carved into each kind's pages, Jenga. `go test -run TestHybridLayoutTable -v ./blocks/sizing/`)")
	return err
}
