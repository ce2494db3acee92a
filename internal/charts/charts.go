// Package charts draws the benchmark charts of docs/benchmarks.md from the
// reports `sluice bench --json` writes: throughput by peer, by message
// size and by number of queues, and latency percentiles; and line charts
// of figures over time (Lines) for the docs. The same input always gives
// the same files (no clock, no map order, embedded fonts).
//
// It must not run benchmarks or read anything but what it is given.
package charts

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sluicemq/sluice/internal/peers"
)

// Width and Height of every chart; PNGs are drawn at DPI dots an inch.
const (
	Width  = 8 * vg.Inch
	Height = 4.5 * vg.Inch
	DPI    = 96
	// PanelWidth is the width of each panel of a row (Panels).
	PanelWidth = 5.5 * vg.Inch
)

// Formats are the file formats written for each chart.
func Formats() []string { return []string{"png", "svg"} }

// Render writes every chart the reports have data for into dir and
// returns the files written. A chart needs a report with two or more of
// what it compares (peers, sizes or queue counts); the report with the
// most is used, the first of equals.
func Render(reports []peers.Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	save := func(name string, p *plot.Plot) error {
		for _, f := range Formats() {
			path := filepath.Join(dir, name+"."+f)
			if err := saveAs(p, f, path); err != nil {
				return fmt.Errorf("charts: %s: %w", path, err)
			}
			files = append(files, path)
		}
		return nil
	}
	if rep, ok := most(reports, func(c peers.Config) int { return len(c.Peers) }); ok {
		sums := atFirst(rep)
		p, err := byPeer(sums, rep)
		if err != nil {
			return nil, err
		}
		if err := save("throughput-by-peer", p); err != nil {
			return nil, err
		}
		for _, kind := range []string{"end-to-end", "send"} {
			p, err := latency(sums, rep, kind)
			if err != nil {
				return nil, err
			}
			if err := save("latency-"+kind, p); err != nil {
				return nil, err
			}
		}
	}
	if rep, ok := most(reports, func(c peers.Config) int { return len(c.Sizes) }); ok {
		p, err := sweep(rep, "message size", "throughput by message size", func(r peers.Result) int { return r.Size }, SizeLabel)
		if err != nil {
			return nil, err
		}
		if err := save("throughput-by-size", p); err != nil {
			return nil, err
		}
	}
	if rep, ok := most(reports, func(c peers.Config) int { return len(c.QueueCnts) }); ok {
		p, err := sweep(rep, "queues", "throughput by number of queues", func(r peers.Result) int { return r.Queues }, strconv.Itoa)
		if err != nil {
			return nil, err
		}
		if err := save("throughput-by-queues", p); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// most returns the report with the largest n (at least 2).
func most(reports []peers.Report, n func(peers.Config) int) (peers.Report, bool) {
	best, bi := 1, -1
	for i, r := range reports {
		if v := n(r.Config); v > best {
			best, bi = v, i
		}
	}
	if bi < 0 {
		return peers.Report{}, false
	}
	return reports[bi], true
}

// atFirst are the summaries of the report's first size and queue count.
func atFirst(rep peers.Report) []peers.Summary {
	var out []peers.Summary
	for _, s := range peers.Summaries(rep.Results) {
		if s.Size == rep.Results[0].Size && s.Queues == rep.Results[0].Queues {
			out = append(out, s)
		}
	}
	return out
}

// peerColor gives each peer the same colour in every chart.
func peerColor(name string, i int) color.Color {
	switch name {
	case "sluice":
		return color.RGBA{0x1f, 0x6f, 0xb4, 0xff}
	case "sluice-cluster":
		return color.RGBA{0x6b, 0xae, 0xd6, 0xff}
	case "rabbitmq":
		return color.RGBA{0xe0, 0x7b, 0x20, 0xff}
	case "nats":
		return color.RGBA{0x2c, 0x9a, 0x4c, 0xff}
	}
	palette := []color.Color{color.RGBA{0x8c, 0x56, 0x4b, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}}
	return palette[i%len(palette)]
}

func conditions(rep peers.Report, s peers.Summary) string {
	c := rep.Config
	return fmt.Sprintf("%d producers x %d in flight, %d consumers, %s, %d queue(s), %.0f s rounds, %d cores, %s",
		c.Producers, c.InFlight, c.Consumers, SizeLabel(s.Size), s.Queues, c.DurationS, rep.Host.CPUs, dateOf(rep))
}

func dateOf(rep peers.Report) string {
	if len(rep.Date) >= 10 {
		return rep.Date[:10]
	}
	return rep.Date
}

func newPlot(title, sub, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title + "\n" + sub
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Y.Tick.Marker = commaTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

// byPeer: median msgs/s a peer, one bar each, labelled, with each round
// as a dot.
func byPeer(sums []peers.Summary, rep peers.Report) (*plot.Plot, error) {
	p := newPlot("Throughput by broker (median of rounds; dots: each round)", conditions(rep, sums[0]), "", "messages/s (received and acknowledged)")
	names := make([]string, len(sums))
	for i, s := range sums {
		names[i] = s.Peer
		b, err := plotter.NewBarChart(plotter.Values{s.Median}, barWidth(len(sums), 1))
		if err != nil {
			return nil, err
		}
		b.XMin = float64(i)
		b.Color = peerColor(s.Peer, i)
		b.LineStyle.Width = 0
		p.Add(b)
		var dots plotter.XYs
		for _, r := range s.Rates {
			dots = append(dots, plotter.XY{X: float64(i) + 0.25, Y: r})
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(sc)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(i), Y: s.Median}}, Labels: []string{comma(s.Median)}})
		if err != nil {
			return nil, err
		}
		lb.Offset = vg.Point{X: -vg.Points(14), Y: vg.Points(3)}
		p.Add(lb)
	}
	p.NominalX(names...)
	headroom(p)
	return p, nil
}

// latency: a peer's percentiles (medians over rounds), log scale.
func latency(sums []peers.Summary, rep peers.Report, kind string) (*plot.Plot, error) {
	title := "End-to-end latency (publish to receipt by a consumer), median of rounds"
	if kind == "send" {
		title = "Send latency (publish to the broker's durable acknowledgement), median of rounds"
	}
	p := newPlot(title, conditions(rep, sums[0]), "percentile", "milliseconds (log scale)")
	p.Y.Min = 0
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	keys := peers.PercentileKeys()
	lo, hi := 0.0, 0.0
	for i, s := range sums {
		v := s.E2EMS
		if kind == "send" {
			v = s.SendMS
		}
		var xys plotter.XYs
		for j, k := range keys {
			if y, ok := v[k]; ok && y > 0 {
				xys = append(xys, plotter.XY{X: float64(j), Y: y})
				if lo == 0 || y < lo {
					lo = y
				}
				hi = max(hi, y)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = peerColor(s.Peer, i), peerColor(s.Peer, i)
		l.Width = vg.Points(2)
		pts.Shape = nil
		p.Add(l, pts)
		p.Legend.Add(s.Peer, l)
	}
	if lo > 0 {
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	} else {
		p.Y.Min, p.Y.Max = 0.1, 1
	}
	p.NominalX("p50", "p90", "p99", "p99.9")
	return p, nil
}

// sweep: median msgs/s by what varies (dim), grouped bars a peer.
func sweep(rep peers.Report, what, title string, dim func(peers.Result) int, label func(int) string) (*plot.Plot, error) {
	var xs []int
	var names []string
	for _, r := range rep.Results {
		if !slices.Contains(xs, dim(r)) {
			xs = append(xs, dim(r))
		}
		if !slices.Contains(names, r.Peer) {
			names = append(names, r.Peer)
		}
	}
	slices.Sort(xs)
	sums := peers.Summaries(rep.Results)
	c := rep.Config
	sub := fmt.Sprintf("%d producers x %d in flight, %d consumers, %.0f s rounds, %d cores, %s", c.Producers, c.InFlight, c.Consumers, c.DurationS, rep.Host.CPUs, dateOf(rep))
	if what == "queues" {
		sub = SizeLabel(sums[0].Size) + " messages, " + sub
	} else {
		sub = strconv.Itoa(sums[0].Queues) + " queue(s), " + sub
	}
	p := newPlot(title+" (median of rounds)", sub, what, "messages/s (received and acknowledged)")
	w := barWidth(len(xs), len(names))
	for gi, name := range names {
		vals := make(plotter.Values, len(xs))
		var lxy plotter.XYs
		var ls []string
		for xi, x := range xs {
			for _, s := range sums {
				if s.Peer == name && (what == "queues" && s.Queues == x || what != "queues" && s.Size == x) {
					vals[xi] = s.Median
				}
			}
			lxy = append(lxy, plotter.XY{X: float64(xi) + groupOffset(gi, len(names)), Y: vals[xi]})
			ls = append(ls, comma(vals[xi]))
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.XMin = groupOffset(gi, len(names))
		b.Color = peerColor(name, gi)
		b.LineStyle.Width = 0
		p.Add(b)
		p.Legend.Add(name, b)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: lxy, Labels: ls})
		if err != nil {
			return nil, err
		}
		lb.Offset = vg.Point{X: -vg.Points(3 * float64(len(ls[0])) / 2), Y: vg.Points(3)}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font.Size = vg.Points(8)
		}
		p.Add(lb)
	}
	labels := make([]string, len(xs))
	for i, x := range xs {
		labels[i] = label(x)
	}
	p.NominalX(labels...)
	headroom(p)
	return p, nil
}

// headroom leaves room above the tallest bar for its label.
func headroom(p *plot.Plot) { p.Y.Max *= 1.12 }

// groupOffset places bar g of n within its category, in data units.
func groupOffset(g, n int) float64 {
	if n <= 1 {
		return 0
	}
	step := 0.8 / float64(n)
	return -0.4 + step/2 + float64(g)*step
}

// barWidth fits n groups of bars into the plot's width (the data area is
// about 85% of it).
func barWidth(categories, perGroup int) vg.Length {
	return Width * 0.85 / vg.Length(categories) * 0.7 / vg.Length(perGroup)
}

// SizeLabel prints a message size as 256 B, 1 KiB, 64 KiB, 1 MiB.
func SizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// comma formats a rate as a whole number with thousands separators.
func comma(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// commaTicks are gonum's default ticks, labelled 12,000 instead of 12000
// (and 0.5 as 0.5).
type commaTicks struct{}

func (commaTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if v := ts[i].Value; ts[i].Label != "" && v == math.Trunc(v) {
			ts[i].Label = comma(v) // fractions keep gonum's label
		}
	}
	return ts
}

// roundTicks label an axis at multiples of a round step (1, 2, 3, 5 or 6
// times a power of ten: 30 minutes, 2 hours), at most seven labels, with
// an unlabelled tick halfway; gonum's default ticks label a time axis
// 20, 80, 140.
type roundTicks struct{}

func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := 0.0
	for m := math.Pow(10, math.Floor(math.Log10(span))-1); step == 0; m *= 10 {
		for _, f := range []float64{1, 2, 3, 5, 6} {
			if span/(f*m) <= 7 {
				step = f * m
				break
			}
		}
	}
	digits := max(0, -int(math.Floor(math.Log10(step))))
	var ts []plot.Tick
	for i := math.Ceil(lo / step * 2); i/2*step <= hi; i++ {
		v := i / 2 * step
		t := plot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			t.Label = strconv.FormatFloat(v, 'f', digits, 64)
			if v == math.Trunc(v) && math.Abs(v) >= 1000 {
				t.Label = comma(v)
			}
		}
		ts = append(ts, t)
	}
	return ts
}

func saveAs(p *plot.Plot, format, path string) error {
	wt, err := p.WriterTo(Width, Height, format)
	if err != nil {
		return err
	}
	return writeFile(path, wt)
}

// writeFile writes what wt writes into a new file at path.
func writeFile(path string, wt io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Series is one line of a Lines chart: its points, in X order; a NaN Y
// leaves a gap (nothing to show there).
type Series struct {
	Name string
	X, Y []float64
}

// Span is a stretch of the X axis shaded behind the lines, with its label
// (an outage, say).
type Span struct {
	From, To float64
	Label    string
}

// Lines draws series as lines, over spans, into base.png and base.svg,
// and returns the files written. With logY the Y axis is logarithmic
// (for values over several orders of magnitude; they must be above 0).
// Earlier series are drawn wider, so that a later one over the same
// values leaves them in sight.
func Lines(base, title, sub, xLabel, yLabel string, logY bool, series []Series, spans []Span) ([]string, error) {
	return Panels(base, xLabel, yLabel, logY, []Panel{{Title: title, Sub: sub, Series: series, Spans: spans}})
}

// Panel is one chart of a row drawn by Panels.
type Panel struct {
	Title, Sub string
	Series     []Series
	Spans      []Span
}

// Panels draws panels side by side (Grid: in rows of up to three), with
// one X and one Y scale for all (so that they compare at a glance), into
// base.png and base.svg, and returns the files written. Each panel is
// drawn as Lines draws one chart.
func Panels(base, xLabel, yLabel string, logY bool, panels []Panel) ([]string, error) {
	top, bottom := 0.0, math.Inf(1)
	left, right := math.Inf(1), math.Inf(-1)
	for _, pn := range panels {
		for _, s := range pn.Series {
			for i, y := range s.Y {
				if !math.IsNaN(y) {
					top, bottom = max(top, y), min(bottom, y)
				}
				if i < len(s.X) {
					left, right = min(left, s.X[i]), max(right, s.X[i])
				}
			}
		}
		for _, sp := range pn.Spans {
			left, right = min(left, sp.From), max(right, sp.To)
		}
	}
	top *= 1.12
	if logY {
		bottom = math.Pow(10, math.Floor(math.Log10(bottom))) / 2 // the lowest decade labelled
		top = math.Pow(10, math.Ceil(math.Log10(top)))
	} else {
		bottom = 0
	}
	var plots []*plot.Plot
	for _, pn := range panels {
		p, err := linesPlot(pn, xLabel, yLabel, logY, bottom, top)
		if err != nil {
			return nil, err
		}
		if len(panels) > 1 && left < right {
			p.X.Min, p.X.Max = left, right
		}
		plots = append(plots, p)
	}
	var written []string
	for _, format := range Formats() {
		path := base + "." + format
		if err := saveRow(plots, format, path); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// linesPlot draws one panel's series over its spans, Y from bottom to top.
func linesPlot(pn Panel, xLabel, yLabel string, logY bool, bottom, top float64) (*plot.Plot, error) {
	p := newPlot(pn.Title, pn.Sub, xLabel, yLabel)
	p.X.Tick.Marker = roundTicks{}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Y.Min = bottom
	for _, sp := range pn.Spans {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: sp.From, Y: bottom}, {X: sp.To, Y: bottom}, {X: sp.To, Y: top}, {X: sp.From, Y: top}})
		if err != nil {
			return nil, err
		}
		poly.Color = color.RGBA{R: 0xf2, G: 0xe6, B: 0xd9, A: 0xff}
		poly.LineStyle.Width = 0
		p.Add(poly)
		if sp.Label == "" {
			continue
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: sp.From, Y: top}}, Labels: []string{sp.Label}})
		if err != nil {
			return nil, err
		}
		lb.Offset = vg.Point{X: vg.Points(3), Y: -vg.Points(12)}
		p.Add(lb)
	}
	for i, s := range pn.Series {
		var first *plotter.Line
		for _, seg := range segments(s) {
			l, err := plotter.NewLine(seg)
			if err != nil {
				return nil, err
			}
			l.Color = linePalette[i%len(linePalette)]
			l.Width = vg.Points(1.5 + 2*float64(len(pn.Series)-1-i))
			p.Add(l)
			if first == nil {
				first = l
			}
		}
		if first != nil {
			p.Legend.Add(s.Name, first)
		}
	}
	p.Y.Max = top
	return p, nil
}

// Grid is how Panels lays out n panels: in rows of up to three, as even
// as they go (four in two rows of two).
func Grid(n int) (rows, cols int) {
	rows = (n + 2) / 3
	cols = (n + rows - 1) / rows
	return rows, cols
}

// saveRow writes plots side by side (Grid) into path, a chart of Width
// (or PanelWidth a plot, if wider) by Height a row.
func saveRow(plots []*plot.Plot, format, path string) error {
	if len(plots) == 1 {
		return saveAs(plots[0], format, path)
	}
	rows, cols := Grid(len(plots))
	w, h := max(Width, PanelWidth*vg.Length(cols)), Height*vg.Length(rows)
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(DPI))}
	case "svg":
		c = vgsvg.New(w, h)
	default:
		return fmt.Errorf("charts: no format %q", format)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadTop: vg.Points(4), PadBottom: vg.Points(4)}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range cols {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	for i, row := range plot.Align(grid, tiles, dc) {
		for j, cv := range row {
			if grid[i][j] != nil {
				grid[i][j].Draw(cv)
			}
		}
	}
	return writeFile(path, c)
}

// linePalette colours the series of a Lines chart, in order.
var linePalette = []color.Color{color.RGBA{0x1f, 0x6f, 0xb4, 0xff}, color.RGBA{0x2c, 0x9a, 0x4c, 0xff}, color.RGBA{0xe0, 0x7b, 0x20, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}}

// segments splits a series at its gaps.
func segments(s Series) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for i := range min(len(s.X), len(s.Y)) {
		if math.IsNaN(s.Y[i]) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, plotter.XY{X: s.X[i], Y: s.Y[i]})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
