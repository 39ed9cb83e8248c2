package sim

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kvpage/kvpage/prefix"
)

// Colours of the tiers, the same in every chart.
var tierColors = map[string]color.Color{
	prefix.MediumGPU:  colorTokens,
	prefix.MediumCPU:  colorReserved,
	prefix.MediumDisk: colorInternal,
}

// tiersChart is a stacked bar per prefix-sharing paged scheme: the prompt tokens found on
// the device, then loaded from the host, then from disk, as percentages of all prompt
// tokens (whole run). A scheme without tiers is one bar of its device hits. It returns
// nil when no scheme has tiers.
func tiersChart(title string, results []*Result) (*plot.Plot, error) {
	var rs []*Result
	tiered := false
	media := []string{prefix.MediumGPU}
	for _, r := range results {
		if r.Scheme.Name != Paged || !r.Scheme.PrefixSharing {
			continue
		}
		rs = append(rs, r)
		if len(r.Tiers) > 0 {
			tiered = true
			for _, t := range r.Tiers[len(media):] {
				media = append(media, t.Medium)
			}
		}
	}
	if !tiered {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Prompt tokens found per tier (whole run)\n" + title
	p.Y.Label.Text = "hit rate (% of prompt tokens)"
	p.X.Label.Text = "scheme (host=N, disk=N: lower tiers of N blocks)"
	styleAxes(p)
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Scheme.Label()
	}
	var below *plotter.BarChart
	bars := make([]*plotter.BarChart, len(media))
	for k, m := range media {
		vals := make(plotter.Values, len(rs))
		for i, r := range rs {
			switch {
			case k < len(r.Tiers):
				vals[i] = 100 * r.Tiers[k].HitRate
			case k == 0:
				vals[i] = 100 * r.PrefixHitRate // no tiers: its device hits
			}
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(18))
		if err != nil {
			return nil, err
		}
		bc.Color = tierColors[m]
		if bc.Color == nil {
			bc.Color = colorExternal
		}
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		bars[k] = bc
	}
	for k := len(media) - 1; k >= 0; k-- {
		p.Legend.Add(media[k], bars[k])
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}
