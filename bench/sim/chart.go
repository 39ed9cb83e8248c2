package sim

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Colours of the usage parts, the same in every chart.
var (
	colorTokens   = color.RGBA{R: 0x2e, G: 0x8b, B: 0x57, A: 0xff} // sea green
	colorReserved = color.RGBA{R: 0x46, G: 0x82, B: 0xb4, A: 0xff} // steel blue
	colorInternal = color.RGBA{R: 0xff, G: 0x8c, B: 0x00, A: 0xff} // dark orange
	colorExternal = color.RGBA{R: 0xb2, G: 0x22, B: 0x22, A: 0xff} // firebrick
	colorFree     = color.RGBA{R: 0xdc, G: 0xdc, B: 0xdc, A: 0xff} // light grey
)

// WriteCharts writes the two charts into dir, each as PNG and SVG, and returns the paths:
// shares.* (a stacked bar per scheme: tokens, reserved, internal, external, free, as
// percentages of the KV budget) and blocksize.* (token utilisation against block size for
// the paged runs, with the contiguous schemes as horizontal lines). A chart with nothing
// to show (blocksize without paged runs) is not written.
func WriteCharts(dir, title string, results []*Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	charts := []struct {
		name string
		make func(string, []*Result) (*plot.Plot, vg.Length, error)
	}{{"shares", sharesChart}, {"blocksize", blockSizeChart}}
	for _, c := range charts {
		p, width, err := c.make(title, results)
		if err != nil {
			return files, err
		}
		if p == nil {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, c.name+ext)
			if err := p.Save(width, 10*vg.Centimeter, path); err != nil {
				return files, fmt.Errorf("writing %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

func sharesChart(title string, results []*Result) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	p.Title.Text = "KV memory by use, saturated phase: " + title
	p.Y.Label.Text = "% of KV budget"
	p.Y.Min, p.Y.Max = 0, 100
	parts := []struct {
		name  string
		col   color.Color
		share func(Shares) float64
	}{
		{"tokens", colorTokens, func(s Shares) float64 { return s.Tokens }},
		{"reserved", colorReserved, func(s Shares) float64 { return s.Reserved }},
		{"internal frag.", colorInternal, func(s Shares) float64 { return s.Internal }},
		{"external frag.", colorExternal, func(s Shares) float64 { return s.External }},
		{"free", colorFree, func(s Shares) float64 { return s.Free }},
	}
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Scheme.Label()
	}
	barWidth := vg.Points(18)
	var below *plotter.BarChart
	for _, part := range parts {
		vals := make(plotter.Values, len(results))
		for i, r := range results {
			vals[i] = 100 * part.share(r.Shares)
		}
		bc, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return nil, 0, err
		}
		bc.Color = part.col
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part.name, bc)
	}
	p.NominalX(names...)
	// Room right of the last bar for the legend, inside the plot area.
	p.X.Max = float64(len(results)) + 1.6
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Legend.Top = true
	p.Legend.Left = false
	width := max(14*vg.Centimeter, vg.Length(len(results))*vg.Points(30)+8*vg.Centimeter)
	return p, width, nil
}

func blockSizeChart(title string, results []*Result) (*plot.Plot, vg.Length, error) {
	type series struct {
		label string
		pts   plotter.XYs
	}
	var lines []*series
	byLabel := map[string]*series{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if !r.Scheme.allocatesBlocks() {
			continue
		}
		s := r.Scheme
		s.BlockSize = 0
		label := s.Name
		if s.PrefixSharing {
			label += ", prefix sharing (" + s.EvictionName() + ")"
		}
		if s.Preemption != "" && s.Preemption != "fcfs" {
			label += ", preempt " + s.Preemption
		}
		if s.Watermark > 0 {
			label += ", watermark " + strconv.FormatFloat(s.Watermark, 'g', -1, 64)
		}
		l, ok := byLabel[label]
		if !ok {
			l = &series{label: label}
			byLabel[label] = l
			lines = append(lines, l)
		}
		x := float64(r.Scheme.BlockSize)
		l.pts = append(l.pts, plotter.XY{X: x, Y: 100 * r.Shares.Tokens})
		lo, hi = min(lo, x), max(hi, x)
	}
	if len(lines) == 0 {
		return nil, 0, nil
	}
	p := plot.New()
	p.Title.Text = "Token utilisation vs block size: " + title
	p.X.Label.Text = "block size (tokens)"
	p.Y.Label.Text = "% of KV budget holding tokens"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = powersOfTwo{}
	p.Y.Min, p.Y.Max = 0, 100
	if lo == hi {
		lo, hi = lo/2, hi*2
	}
	palette := []color.Color{colorTokens, colorReserved, color.RGBA{R: 0x80, G: 0x00, B: 0x80, A: 0xff}, color.Black}
	for i, l := range lines {
		line, pts, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return nil, 0, err
		}
		line.Color = palette[i%len(palette)]
		pts.Color = line.Color
		pts.Shape = draw.CircleGlyph{}
		p.Add(line, pts)
		p.Legend.Add(l.label, line, pts)
	}
	dashes := map[string][]vg.Length{OrcaMax: {vg.Points(2), vg.Points(2)}, OrcaPow2: {vg.Points(6), vg.Points(3)}, OrcaOracle: {vg.Points(10), vg.Points(3), vg.Points(2), vg.Points(3)}}
	for _, r := range results {
		if r.Scheme.allocatesBlocks() {
			continue
		}
		ref, err := plotter.NewLine(plotter.XYs{{X: lo, Y: 100 * r.Shares.Tokens}, {X: hi, Y: 100 * r.Shares.Tokens}})
		if err != nil {
			return nil, 0, err
		}
		ref.Color = colorExternal
		ref.Dashes = dashes[r.Scheme.Name]
		p.Add(ref)
		p.Legend.Add(r.Scheme.Label(), ref)
	}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.YOffs = vg.Points(8)
	return p, 16 * vg.Centimeter, nil
}

// powersOfTwo puts a labelled tick at every power of two in range.
type powersOfTwo struct{}

func (powersOfTwo) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 2 {
		if v >= lo*0.9999 {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ticks
}
