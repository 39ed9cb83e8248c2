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
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours of the usage parts, the same in every chart.
var (
	colorTokens   = color.RGBA{R: 0x2e, G: 0x8b, B: 0x57, A: 0xff} // sea green
	colorReserved = color.RGBA{R: 0x46, G: 0x82, B: 0xb4, A: 0xff} // steel blue
	colorInternal = color.RGBA{R: 0xff, G: 0x8c, B: 0x00, A: 0xff} // dark orange
	colorExternal = color.RGBA{R: 0xb2, G: 0x22, B: 0x22, A: 0xff} // firebrick
	colorFree     = color.RGBA{R: 0xdc, G: 0xdc, B: 0xdc, A: 0xff} // light grey
)

// Chart size: 8 x 4.5 inches at 200 dots per inch, a 1600 x 900 PNG that stays sharp in
// a paper's column; the SVG has the same layout.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
	chartDPI    = 200
)

// WriteCharts writes the two charts into dir, each as PNG and SVG, and returns the paths:
// shares.* (a stacked bar per scheme: tokens, reserved, internal, external, free, as
// percentages of the KV budget) and blocksize.* (token utilisation against block size for
// the paged runs, with the contiguous schemes as horizontal lines), and, when a scheme has
// lower tiers, tiers.* (tiers_chart.go). title names the run
// (workload, model, GPU, budget) and goes under each chart's own title. Each legend sits
// beside the plot, never over the data. A chart with nothing to show (blocksize without
// paged runs) is not written.
func WriteCharts(dir, title string, results []*Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	charts := []struct {
		name string
		make func(string, []*Result) (*plot.Plot, error)
	}{{"shares", sharesChart}, {"blocksize", blockSizeChart}, {"tiers", tiersChart}}
	for _, c := range charts {
		p, err := c.make(title, results)
		if err != nil {
			return files, err
		}
		if p == nil {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, c.name+ext)
			if err := saveChart(p, path); err != nil {
				return files, fmt.Errorf("writing %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// saveChart draws p with its legend in a column to the right of the plot area, so that
// no entry hides a line or a bar, and writes it as PNG or SVG by the path's extension.
func saveChart(p *plot.Plot, path string) error {
	var canvas vg.CanvasWriterTo
	if filepath.Ext(path) == ".svg" {
		canvas = vgsvg.New(chartWidth, chartHeight)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))}
	}
	dc := draw.New(canvas)
	legend := p.Legend
	p.Legend = plot.NewLegend() // the plot draws none of its own
	defer func() { p.Legend = legend }()
	legend.Top, legend.Left = true, true
	pad := vg.Points(10)
	width := legend.Rectangle(dc).Size().X + 2*pad
	p.Draw(draw.Crop(dc, 0, -width, 0, 0))
	// Top-aligned with the plot area, below the title.
	titleH := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	legend.Draw(draw.Crop(dc, chartWidth-width+pad, 0, 0, -titleH-pad))
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// percentTicks labels the y axis every 10%, with a faint grid, so that a bar can be read
// to a few percent.
type percentTicks struct{}

func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := 0.0; v <= 100; v += 5 {
		if v < lo-1e-9 || v > hi+1e-9 {
			continue
		}
		label := ""
		if int(v)%10 == 0 {
			label = strconv.Itoa(int(v)) + "%"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// styleAxes sets the fonts and the grid shared by both charts.
func styleAxes(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	p.Y.Tick.Marker = percentTicks{}
	p.Y.Min, p.Y.Max = 0, 100
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	grid.Horizontal.Color = color.Gray{Y: 0xe0}
	p.Add(grid)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.Padding = vg.Points(3)
}

func sharesChart(title string, results []*Result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "KV memory by use, time-averaged over the saturated phase\n" + title
	p.Y.Label.Text = "share of the KV budget (% of token slots)"
	p.X.Label.Text = "scheme (paged/B: blocks of B tokens; +lru: prefix sharing, LRU eviction)"
	styleAxes(p)
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
	var bars []*plotter.BarChart
	for _, part := range parts {
		vals := make(plotter.Values, len(results))
		for i, r := range results {
			vals[i] = 100 * part.share(r.Shares)
		}
		bc, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return nil, err
		}
		bc.Color = part.col
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		bars = append(bars, bc)
	}
	// The legend lists the parts top down, as the stacks show them.
	for i := len(parts) - 1; i >= 0; i-- {
		p.Legend.Add(parts[i].name, bars[i])
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}

func blockSizeChart(title string, results []*Result) (*plot.Plot, error) {
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
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Token utilisation against block size, saturated phase\n" + title
	p.X.Label.Text = "block size (tokens per block, log scale)"
	p.Y.Label.Text = "KV budget holding token states (%)"
	styleAxes(p)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = powersOfTwo{}
	if lo == hi {
		lo, hi = lo/2, hi*2
	}
	palette := []color.Color{colorTokens, colorReserved, color.RGBA{R: 0x80, G: 0x00, B: 0x80, A: 0xff}, color.Black}
	for i, l := range lines {
		line, pts, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return nil, err
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		pts.Color = line.Color
		// Shapes and sizes differ by series, the later drawn smaller on top, so that
		// series with the same value at a block size all stay visible.
		shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.RingGlyph{}, draw.CrossGlyph{}}
		pts.Shape = shapes[i%len(shapes)]
		pts.Radius = vg.Points(max(5-1.2*float64(i), 2))
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
			return nil, err
		}
		ref.Color = colorExternal
		ref.Width = vg.Points(1.5)
		ref.Dashes = dashes[r.Scheme.Name]
		p.Add(ref)
		p.Legend.Add(r.Scheme.Label(), ref)
	}
	return p, nil
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
