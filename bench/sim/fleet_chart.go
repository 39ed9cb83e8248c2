package sim

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// policyColors are the routing policies' colours, the same in every chart.
var policyColors = map[string]color.Color{
	RoundRobin:  color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff},
	LeastLoaded: color.RGBA{R: 0x46, G: 0x82, B: 0xb4, A: 0xff},
	PrefixAware: color.RGBA{R: 0xff, G: 0x8c, B: 0x00, A: 0xff},
	PrefixLoad:  color.RGBA{R: 0x2e, G: 0x8b, B: 0x57, A: 0xff},
}

// WriteFleetChart writes one PNG, 1,800 pixels wide, of four panels against the number
// of servers (a log-2 axis), one line per routing policy: fleet prefix-hit rate, load
// imbalance, preemptions per 1,000 requests and requests completed per step.
func WriteFleetChart(path, title string, results []*FleetResult) error {
	const dpi = 96
	w, h := vg.Length(1800)*vg.Inch/dpi, vg.Length(1200)*vg.Inch/dpi
	panels := []struct {
		name string
		y    func(*FleetResult) float64
	}{
		{"fleet prefix-hit rate (%)", func(r *FleetResult) float64 { return 100 * r.HitRate }},
		{"load imbalance (max / mean outstanding)", func(r *FleetResult) float64 { return r.Imbalance }},
		{"preemptions per 1,000 requests", func(r *FleetResult) float64 { return 1000 * float64(r.Preemptions) / float64(max(r.Requests, 1)) }},
		{"requests completed per step", func(r *FleetResult) float64 { return r.CompletedPerStep }},
	}
	plots := make([][]*plot.Plot, 2)
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = title + ": " + pn.name
		p.X.Label.Text = "servers"
		p.X.Tick.Marker = log2Ticks{}
		p.Legend.Top = false // hit rates sit high: the legend goes below them
		for _, pol := range FleetPolicies() {
			var pts plotter.XYs
			for _, r := range results {
				if r.Policy == pol {
					pts = append(pts, plotter.XY{X: math.Log2(float64(r.Servers)), Y: pn.y(r)})
				}
			}
			if len(pts) == 0 {
				continue
			}
			slices.SortFunc(pts, func(a, b plotter.XY) int { return int(math.Copysign(1, a.X-b.X)) })
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = policyColors[pol], policyColors[pol]
			line.Width = vg.Points(2)
			points.Shape = draw.CircleGlyph{}
			points.Radius = vg.Points(3)
			p.Add(line, points)
			if i == 0 {
				p.Legend.Add(pol, line, points)
			}
		}
		p.Y.Min = 0
		plots[i/2] = append(plots[i/2], p)
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// log2Ticks labels a log-2 axis with the powers of two it spans.
type log2Ticks struct{}

func (log2Ticks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		t = append(t, plot.Tick{Value: e, Label: strconv.Itoa(1 << int(e))})
	}
	return t
}
