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
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}

// point is one case of a chart series.
type point struct {
	conns float64
	ops   float64
	p50   float64
	p99   float64
	p999  float64
}

// series returns, for each target and series name, its points sorted by connections.
func (r *Report) series() (names []string, data map[string]map[string][]point) {
	data = map[string]map[string][]point{}
	seen := map[string]bool{}
	for _, c := range r.Cases {
		if c.Series == "" {
			continue
		}
		if !seen[c.Series] {
			seen[c.Series] = true
			names = append(names, c.Series)
		}
		for t, res := range c.Results {
			if data[t] == nil {
				data[t] = map[string][]point{}
			}
			l := res.Latency
			data[t][c.Series] = append(data[t][c.Series],
				point{float64(res.Conns), res.OpsPerSec, l.P50, l.P99, l.P999})
		}
	}
	for _, m := range data {
		for _, ps := range m {
			sort.Slice(ps, func(i, j int) bool { return ps[i].conns < ps[j].conns })
		}
	}
	return names, data
}

// Chart draws throughput against connections (left) and latency percentiles against
// connections (right) for every chart series and target, into path; the extension
// picks the format: .png or .svg.
func (r *Report) Chart(path string) error {
	names, data := r.series()
	if len(names) == 0 {
		return fmt.Errorf("no chart series in the report")
	}
	tput := plot.New()
	tput.Title.Text = "Throughput"
	tput.X.Label.Text = "connections"
	tput.Y.Label.Text = "ops/s (acquire+release pairs)"
	tput.X.Scale, tput.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	tput.Y.Tick.Marker = siTicks{}
	tput.Legend.Top = true
	tput.Legend.Left = true
	tput.Add(plotter.NewGrid())

	lat := plot.New()
	lat.Title.Text = "Latency (" + names[len(names)-1] + ")"
	lat.X.Label.Text = "connections"
	lat.Y.Label.Text = "latency"
	lat.X.Scale, lat.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, usTicks{}
	lat.Legend.Top = true
	lat.Legend.Left = true
	lat.Add(plotter.NewGrid())

	for ti, t := range r.Targets {
		col := palette[ti%len(palette)]
		for si, s := range names {
			ps := data[t.Name][s]
			if len(ps) == 0 {
				continue
			}
			xy := make(plotter.XYs, len(ps))
			for i, p := range ps {
				xy[i] = plotter.XY{X: p.conns, Y: p.ops}
			}
			if err := addLine(tput, xy, t.Name+", "+s, col, dashes[si%len(dashes)]); err != nil {
				return err
			}
		}
		ps := data[t.Name][names[len(names)-1]]
		for pi, pc := range []struct {
			name string
			get  func(point) float64
		}{{"p50", func(p point) float64 { return p.p50 }}, {"p99", func(p point) float64 { return p.p99 }},
			{"p99.9", func(p point) float64 { return p.p999 }}} {
			var xy plotter.XYs
			for _, p := range ps {
				if v := pc.get(p); v > 0 {
					xy = append(xy, plotter.XY{X: p.conns, Y: v})
				}
			}
			if len(xy) == 0 {
				continue
			}
			if err := addLine(lat, xy, t.Name+" "+pc.name, col, dashes[pi%len(dashes)]); err != nil {
				return err
			}
		}
	}

	tput.Y.Min = 0
	widen(&tput.X)
	widen(&lat.X)
	widen(&lat.Y)

	const w, h = 12 * vg.Inch, 5 * vg.Inch
	var canvas vg.CanvasWriterTo
	switch filepath.Ext(path) {
	case ".svg":
		canvas = vgsvg.New(w, h)
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("chart %s: want a .png or .svg file", path)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 3, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8,
		PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	tput.Draw(tiles.At(dc, 0, 0))
	lat.Draw(tiles.At(dc, 1, 0))
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

func addLine(p *plot.Plot, xy plotter.XYs, name string, col color.Color, dash []vg.Length) error {
	l, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return fmt.Errorf("chart line %s: %v", name, err)
	}
	l.Color, l.Dashes, l.Width = col, dash, vg.Points(1.5)
	pts.Color, pts.Shape = col, draw.CircleGlyph{}
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}

// widen gives a log axis whose data is a single value some room around it.
func widen(a *plot.Axis) {
	if a.Min >= a.Max && a.Max > 0 {
		a.Min, a.Max = a.Max/2, a.Max*2
	}
}

// siTicks labels a linear axis with k and M.
type siTicks struct{}

func (siTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		v := ticks[i].Value
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
