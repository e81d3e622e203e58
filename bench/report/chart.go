package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)},
	{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}

// point is one case of a chart series.
type point struct {
	conns float64
	ops   float64
	p50   float64
	p99   float64
	p999  float64
}

// line names a chart line of each target: a case protocol ("" for the target's own) and
// a series.
type line struct{ proto, series string }

// series returns the lines in order of first appearance and, for each target and line,
// its points sorted by connections.
func (r *Report) series() (lines []line, data map[string]map[line][]point) {
	data = map[string]map[line][]point{}
	seen := map[line]bool{}
	for _, c := range r.Cases {
		if c.Series == "" {
			continue
		}
		l := line{c.Proto, c.Series}
		if !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
		for t, res := range c.Results {
			if data[t] == nil {
				data[t] = map[line][]point{}
			}
			lat := res.Latency
			data[t][l] = append(data[t][l], point{float64(res.Conns), res.OpsPerSec, lat.P50, lat.P99, lat.P999})
		}
	}
	for _, m := range data {
		for _, ps := range m {
			sort.Slice(ps, func(i, j int) bool { return ps[i].conns < ps[j].conns })
		}
	}
	return lines, data
}

// Chart draws throughput against connections (left) for every chart line of every
// target, one colour per target and protocol, one dash per series of a protocol; and
// (right) the latency percentiles of each target's own protocol in its last series. The
// extension of path picks the format: .png or .svg.
func (r *Report) Chart(path string) error {
	tput, tputLegend, lat, err := r.plots()
	if err != nil {
		return err
	}
	const w, h = 14 * vg.Inch, 5 * vg.Inch
	var canvas vg.CanvasWriterTo
	switch filepath.Ext(path) {
	case ".svg":
		canvas = vgsvg.New(w, h)
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("chart %s: want a .png or .svg file", path)
	}
	// Throughput, its legend, latency: 5.5, 2.6 and 5.5 inches of the 14.
	dc := draw.Crop(draw.New(canvas), vg.Inch/8, -vg.Inch/8, vg.Inch/8, -vg.Inch/8)
	width := dc.Max.X - dc.Min.X
	tput.Draw(draw.Crop(dc, 0, -width*8.5/13.75, 0, 0))
	tputLegend.Draw(draw.Crop(dc, width*5.6/13.75, -width*5.6/13.75, 0, -vg.Inch/4))
	lat.Draw(draw.Crop(dc, width*8.25/13.75, 0, 0, 0))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %v", path, err)
	}
	return f.Close()
}

// plots builds the chart's two panels and the throughput panel's legend.
func (r *Report) plots() (tput *plot.Plot, tputLegend plot.Legend, lat *plot.Plot, err error) {
	lines, data := r.series()
	if len(lines) == 0 {
		return nil, tputLegend, nil, fmt.Errorf("no chart series in the report")
	}
	// The x axes are marked at the connection counts the cases ran with: a short run's
	// counts may not span the power of ten that a log axis labels.
	var conns connTicks
	for _, m := range data {
		for _, ps := range m {
			for _, p := range ps {
				conns.add(p.conns)
			}
		}
	}

	var own *line       // the latency panel's: the targets' own protocol, else the last line
	var protos []string // in order of first appearance
	dash := map[line]int{}
	perProto := map[string]int{}
	for _, l := range lines {
		if _, ok := perProto[l.proto]; !ok {
			protos = append(protos, l.proto)
		}
		dash[l] = perProto[l.proto]
		perProto[l.proto]++
		if l.proto == "" {
			own = &l
		}
	}
	if own == nil {
		own = &lines[len(lines)-1]
	}
	tput = plot.New()
	tput.Title.Text = "Throughput"
	tput.X.Label.Text = "connections"
	tput.Y.Label.Text = "ops/s (acquire+release pairs)"
	tput.X.Scale, tput.X.Tick.Marker = plot.LogScale{}, conns
	// Log scale: pipelined pairs near 1M and two-round-trip locks near 40k both show.
	tput.Y.Scale, tput.Y.Tick.Marker = plot.LogScale{}, siTicks{log: true}
	tput.Add(plotter.NewGrid())
	// Its legend has a column of its own: it has a line for every protocol and series.
	tputLegend = plot.NewLegend()
	tputLegend.Top, tputLegend.Left = true, true

	lat = plot.New()
	lat.Title.Text = "Latency (" + own.series + ")"
	if own.proto != "" {
		lat.Title.Text = "Latency (" + own.proto + ", " + own.series + ")"
	}
	lat.X.Label.Text = "connections"
	lat.Y.Label.Text = "latency"
	lat.X.Scale, lat.X.Tick.Marker = plot.LogScale{}, conns
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, usTicks{}
	lat.Legend.Top = true
	lat.Legend.Left = true
	lat.Add(plotter.NewGrid())

	colour := 0
	for _, t := range r.Targets {
		ownCol := palette[colour%len(palette)]
		for _, proto := range protos {
			name := proto
			if name == "" {
				name = t.Proto
			}
			drawn := false
			for _, l := range lines {
				ps := data[t.Name][l]
				if l.proto != proto || len(ps) == 0 {
					continue
				}
				// A log axis has no place for 0: a run that completed no op (a stall longer
				// than a short run) is in the table, not on the chart.
				var xy plotter.XYs
				for _, p := range ps {
					if p.ops > 0 && p.conns > 0 {
						xy = append(xy, plotter.XY{X: p.conns, Y: p.ops})
					}
				}
				if len(xy) == 0 {
					continue
				}
				col := palette[colour%len(palette)]
				if err := addLine(tput, &tputLegend, xy, t.Name+" "+name+", "+l.series, col, dashes[dash[l]%len(dashes)]); err != nil {
					return nil, tputLegend, nil, err
				}
				if proto == own.proto {
					ownCol = col
				}
				drawn = true
			}
			if drawn {
				colour++
			}
		}
		ps := data[t.Name][*own]
		for pi, pc := range []struct {
			name string
			get  func(point) float64
		}{{"p50", func(p point) float64 { return p.p50 }}, {"p99", func(p point) float64 { return p.p99 }},
			{"p99.9", func(p point) float64 { return p.p999 }}} {
			var xy plotter.XYs
			for _, p := range ps {
				if v := pc.get(p); v > 0 && p.conns > 0 {
					xy = append(xy, plotter.XY{X: p.conns, Y: v})
				}
			}
			if len(xy) == 0 {
				continue
			}
			if err := addLine(lat, &lat.Legend, xy, t.Name+" "+pc.name, ownCol, dashes[pi%len(dashes)]); err != nil {
				return nil, tputLegend, nil, err
			}
		}
	}

	if !(tput.Y.Min > 0 && tput.Y.Max >= tput.Y.Min) {
		return nil, tputLegend, nil, fmt.Errorf("no case in a chart series completed an op")
	}
	widen(&tput.Y)
	widen(&tput.X)
	if !(lat.Y.Min > 0 && lat.Y.Max >= lat.Y.Min) { // no latency to draw: an empty panel
		lat.X.Min, lat.X.Max, lat.Y.Min, lat.Y.Max = tput.X.Min, tput.X.Max, 1, 1000
	}
	widen(&lat.X)
	widen(&lat.Y)
	return tput, tputLegend, lat, nil
}

// addLine draws xy on p as a line with points, named in leg.
func addLine(p *plot.Plot, leg *plot.Legend, xy plotter.XYs, name string, col color.Color, dash []vg.Length) error {
	l, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return fmt.Errorf("chart line %s: %v", name, err)
	}
	l.Color, l.Dashes, l.Width = col, dash, vg.Points(1.5)
	pts.Color, pts.Shape = col, draw.CircleGlyph{}
	p.Add(l, pts)
	leg.Add(name, l, pts)
	return nil
}

// widen gives a log axis whose data is a single value some room around it.
func widen(a *plot.Axis) {
	if a.Min >= a.Max && a.Max > 0 {
		a.Min, a.Max = a.Max/2, a.Max*2
	}
}

// siTicks labels an axis with k and M; on a log axis, 2 and 5 times each power of ten
// too.
type siTicks struct{ log bool }

func (t siTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	if t.log {
		ticks = plot.LogTicks{Prec: -1}.Ticks(min, max)
	} else {
		ticks = plot.DefaultTicks{}.Ticks(min, max)
	}
	for i := range ticks {
		v := ticks[i].Value
		if t.log && v > 0 {
			if m := v / math.Pow(10, math.Floor(math.Log10(v)+1e-9)); math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6 {
				ticks[i].Label = "x" // labelled below
			}
		}
		if ticks[i].Label == "" {
			continue
		}
		switch {
		case v == 0:
			ticks[i].Label = "0"
		case math.Abs(v) >= 1e6:
			ticks[i].Label = fmt.Sprintf("%gM", v/1e6)
		case math.Abs(v) >= 1e3:
			ticks[i].Label = fmt.Sprintf("%gk", v/1e3)
		}
	}
	return ticks
}

// connTicks marks a log axis of connections at the counts the cases ran with, each
// labelled (powers of ten only when no count is in view), with minor ticks between.
type connTicks struct{ at []float64 }

func (t *connTicks) add(v float64) {
	for _, x := range t.at {
		if x == v {
			return
		}
	}
	t.at = append(t.at, v)
}

func (t connTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, v := range t.at {
		if v >= min && v <= max {
			ticks = append(ticks, plot.Tick{Value: v, Label: connLabel(v)})
		}
	}
	labelled := len(ticks) > 0
	for _, lt := range (plot.LogTicks{Prec: -1}).Ticks(min, max) {
		dup := false
		for _, c := range ticks {
			dup = dup || math.Abs(c.Value-lt.Value) <= 1e-9*lt.Value
		}
		switch {
		case dup:
		case lt.Label != "" && !labelled:
			ticks = append(ticks, plot.Tick{Value: lt.Value, Label: connLabel(lt.Value)})
		default:
			ticks = append(ticks, plot.Tick{Value: lt.Value}) // a minor tick
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// connLabel writes a connection count: 64, 1k, 18k.
func connLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%gk", v/1000)
	}
	return fmt.Sprintf("%g", v)
}

// usTicks marks a log axis of microseconds with µs, ms and s labels.
type usTicks struct{}

func (usTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		v := ticks[i].Value
		switch {
		case v >= 1e6:
			ticks[i].Label = fmt.Sprintf("%gs", v/1e6)
		case v >= 1e3:
			ticks[i].Label = fmt.Sprintf("%gms", v/1e3)
		default:
			ticks[i].Label = fmt.Sprintf("%gµs", v)
		}
	}
	return ticks
}
