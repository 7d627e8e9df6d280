// Package charts draws a kira bench report as SVG charts (gonum/plot): the
// lateness curve against fires a second, each failover and handover trial,
// and a soak's database and memory over time. It draws only what the run
// measured; a report without lateness rows has no lateness chart.
package charts

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/internal/bench"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The files Write writes, each only when the report has its figures.
const (
	LatenessFile = "lateness.svg"
	FailoverFile = "failover.svg"
	SoakFile     = "soak.svg"
)

// Write writes into dir (made if missing) the charts r has figures for and
// returns their paths. Held by TestBenchPlotWritesCharts (cmd/kira) and
// TestChartsDrawWhatWasMeasured.
func Write(dir string, r *bench.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range []struct {
		file  string
		plots []*plot.Plot
	}{
		{LatenessFile, latenessPlots(r.Lateness)},
		{FailoverFile, failoverPlots(r.Failover, r.Handover)},
		{SoakFile, soakPlots(r.Soak)},
	} {
		if c.plots == nil {
			continue
		}
		path := filepath.Join(dir, c.file)
		if err := save(path, c.plots); err != nil {
			return written, fmt.Errorf("charts: %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}

// save draws plots one above the other into one SVG file.
func save(path string, plots []*plot.Plot) error {
	w, h := 16*vg.Centimeter, vg.Length(len(plots))*9*vg.Centimeter
	canvas := vgsvg.New(w, h)
	col := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		col[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2, PadY: vg.Millimeter * 6}
	for i, row := range plot.Align(col, tiles, draw.New(canvas)) {
		plots[i].Draw(row[0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// shape names a lateness row's load: its executor and whether its fires
// were spread over the second or came at one instant.
func shape(l bench.Lateness) string {
	when := "one instant"
	if l.Jitter > 0 {
		when = "spread over " + l.Jitter.String()
	}
	return l.Executor + ", " + when
}

// latenessPlots are the lateness curve: p50 and p99 (log scale), then the
// share of the fires that started, against fires a second (one slot fires
// once a second), one line per load shape. Nil without lateness rows.
func latenessPlots(rows []bench.Lateness) []*plot.Plot {
	groups := map[string][]bench.Lateness{}
	var names []string
	for _, l := range rows {
		if l.NoScheduler || l.Expected == 0 {
			continue
		}
		name := shape(l)
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], l)
	}
	if len(names) == 0 {
		return nil
	}
	late, share := plot.New(), plot.New()
	late.Title.Text = "Lateness (start − scheduled time)"
	late.Y.Label.Text = "ms (log scale)"
	late.Y.Scale, late.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	share.Title.Text = "Fires started"
	share.Y.Label.Text = "% of the fires due"
	share.Y.Min, share.Y.Max = 0, 100
	for _, p := range []*plot.Plot{late, share} {
		p.X.Label.Text = "fires a second"
		p.X.Min = 0
		p.Legend.Top = p == late
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
	}
	for i, name := range names {
		ls := groups[name]
		slices.SortFunc(ls, func(a, b bench.Lateness) int { return cmp.Compare(a.Slots, b.Slots) })
		var p50, p99, started plotter.XYs
		for _, l := range ls {
			x := float64(l.Slots)
			if l.Started > 0 {
				p50 = append(p50, plotter.XY{X: x, Y: positive(ms(l.P50))})
				p99 = append(p99, plotter.XY{X: x, Y: positive(ms(l.P99))})
			}
			started = append(started, plotter.XY{X: x, Y: 100 * float64(l.Started) / float64(l.Expected)})
		}
		addLine(late, "p50, "+name, p50, i, true)
		addLine(late, "p99, "+name, p99, i, false)
		addLine(share, name, started, i, false)
	}
	return []*plot.Plot{late, share}
}

// failoverPlots are every trial's time from the owner's end to the slot's
// next owner (a crash: its first execution elsewhere; a graceful stop: the
// next leader), trial by trial, with each lease TTL as a dashed line. Nil
// without trials.
func failoverPlots(fs []bench.Failover, h *bench.Handover) []*plot.Plot {
	if len(fs) == 0 && (h == nil || len(h.Samples) == 0) {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Failover and handover, trial by trial"
	p.X.Label.Text = "trial"
	p.Y.Label.Text = "seconds to the next owner (log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	trials := 0
	for i, f := range fs {
		addPoints(p, "crash, lease TTL "+f.TTL.String(), samples(f.Samples), i)
		trials = max(trials, len(f.Samples))
	}
	if h != nil && len(h.Samples) > 0 {
		addPoints(p, "graceful handover (SIGTERM)", samples(h.Samples), len(fs))
		trials = max(trials, len(h.Samples))
	}
	for i, f := range fs {
		ttl, err := plotter.NewLine(plotter.XYs{{X: 1, Y: f.TTL.Seconds()}, {X: float64(max(trials, 2)), Y: f.TTL.Seconds()}})
		if err != nil {
			continue
		}
		ttl.Color, ttl.Dashes = colorOf(i), []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ttl)
	}
	p.X.Min, p.X.Max = 0.5, float64(max(trials, 2))+0.5
	p.X.Tick.Marker = trialTicks(trials)
	return []*plot.Plot{p}
}

// trialTicks label trials 1 to n, every one up to 10 trials, every fifth
// past that.
func trialTicks(n int) plot.ConstantTicks {
	step := 1
	if n > 10 {
		step = 5
	}
	var ticks plot.ConstantTicks
	for i := 1; i <= n; i++ {
		label := ""
		if i == 1 || i%step == 0 {
			label = strconv.Itoa(i)
		}
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: label})
	}
	return ticks
}

// soakPlots are a soak's samples over time: etcd's database file and the
// part of it in use, then each member's resident memory. Nil without
// samples.
func soakPlots(s *bench.Soak) []*plot.Plot {
	if s == nil || len(s.Samples) == 0 {
		return nil
	}
	db, mem := plot.New(), plot.New()
	db.Title.Text = fmt.Sprintf("etcd's database, %d slots every second (quota %.0f MB)", s.Slots, s.QuotaBytes/1e6)
	db.Y.Label.Text = "MB (largest etcd member)"
	mem.Title.Text = "Members' resident memory"
	mem.Y.Label.Text = "MB"
	for _, p := range []*plot.Plot{db, mem} {
		p.X.Label.Text = "minutes"
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
	}
	var file, inUse plotter.XYs
	members := len(s.Samples[0].RSSBytes)
	rss := make([]plotter.XYs, members)
	for _, x := range s.Samples {
		at := x.At.Minutes()
		file = append(file, plotter.XY{X: at, Y: x.DBBytes / 1e6})
		inUse = append(inUse, plotter.XY{X: at, Y: x.DBInUseBytes / 1e6})
		for i := range min(members, len(x.RSSBytes)) {
			rss[i] = append(rss[i], plotter.XY{X: at, Y: x.RSSBytes[i] / 1e6})
		}
	}
	mem.Legend.Top = false // the members' lines run along the top
	addLine(db, "database file", file, 0, false)
	addLine(db, "in use", inUse, 1, false)
	for i, xys := range rss {
		addLine(mem, fmt.Sprintf("member %d", i+1), xys, i, false)
	}
	return []*plot.Plot{db, mem}
}

// addLine adds xys to p as a line with points, in the i-th colour (dashed
// when dashed), named in the legend.
func addLine(p *plot.Plot, name string, xys plotter.XYs, i int, dashed bool) {
	if len(xys) == 0 {
		return
	}
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return
	}
	l.Color, pts.Color = colorOf(i), colorOf(i)
	pts.Shape = draw.CircleGlyph{}
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		pts.Shape = draw.BoxGlyph{}
	}
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
}

// addPoints adds xys to p as points in the i-th colour, named in the legend.
func addPoints(p *plot.Plot, name string, xys plotter.XYs, i int) {
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return
	}
	s.Color, s.Shape = colorOf(i), draw.CircleGlyph{}
	p.Add(s)
	p.Legend.Add(name, s)
}

// samples are durations as (trial, seconds), trials from 1.
func samples(d []time.Duration) plotter.XYs {
	xys := make(plotter.XYs, 0, len(d))
	for i, s := range d {
		xys = append(xys, plotter.XY{X: float64(i + 1), Y: positive(s.Seconds())})
	}
	return xys
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// positive keeps a value drawable on a log scale: a lateness of 0 (below
// the clock's resolution) is drawn at a thousandth of its unit.
func positive(v float64) float64 { return math.Max(v, 1e-3) }

// palette is the Okabe–Ito colours, told apart with colour blindness too.
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, {0xD5, 0x5E, 0x00, 0xff}, {0x00, 0x9E, 0x73, 0xff},
	{0xCC, 0x79, 0xA7, 0xff}, {0xE6, 0x9F, 0x00, 0xff}, {0x56, 0xB4, 0xE9, 0xff}, {0x00, 0x00, 0x00, 0xff},
}

func colorOf(i int) color.Color { return palette[i%len(palette)] }
