package eval

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is a curve of results, e.g. one codec design across budgets.
type Series struct {
	Label   string
	Results []Result
}

// PlotKL draws KL divergence (log scale) against bytes per token: each series
// as a line through its points, and each single result (the plain encodings)
// as a labelled point. Results with KL <= 0 (f32) cannot sit on a log axis
// and are left out. The image format follows path's extension (.png, .svg,
// .pdf, ...).
func PlotKL(path, title string, curves []Series, points []Result) error {
	p := plot.New()
	// gonum centres a vertical axis label at the linear middle of the data
	// range, which a log axis puts near its top, and pads the plot for it;
	// so the KL axis is named in the title instead.
	p.Title.Text = title + "\nmean KL(whole || split) per position, nats, against bytes per token"
	p.X.Label.Text = "bytes per token (payload, without the 52-byte frame header)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = decadeTicks{}
	// The curves fall from the upper left; the lower left stays empty.
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range curves {
		xys := positive(s.Results)
		if len(xys) == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Label, err)
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(line, pts)
		p.Legend.Add(s.Label, line, pts)
		drawn += len(xys)
	}
	if xys := positive(points); len(xys) > 0 {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("plot baselines: %w", err)
		}
		sc.Shape = draw.BoxGlyph{}
		sc.Color = color.Black
		sc.Radius = vg.Points(3.5)
		var names []string
		for _, r := range points {
			if drawable(r) {
				names = append(names, r.Wire)
			}
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: names})
		if err != nil {
			return fmt.Errorf("plot labels: %w", err)
		}
		lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-4)}
		p.Add(sc, lb)
		p.Legend.Add("single encodings (labelled)", sc)
		drawn += len(xys)
	}
	if drawn == 0 {
		return errors.New("plot: no result with a KL above 0 to draw")
	}
	// Leave room right of the last label.
	p.X.Min = 0
	p.X.Max = p.X.Max * 1.12
	p.X.Tick.Marker = byteTicks{}
	// Whole decades on the KL axis, so no point sits on its ends.
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(p.Y.Max)))
	if err := p.Save(8*vg.Inch, 5.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// positive returns the (bytes, KL) points of the results whose KL can be
// drawn on a log axis.
func positive(rs []Result) plotter.XYs {
	var xys plotter.XYs
	for _, r := range rs {
		if drawable(r) {
			xys = append(xys, plotter.XY{X: r.BytesPerToken, Y: r.KL})
		}
	}
	return xys
}

func drawable(r Result) bool { return r.KL > 0 && !math.IsInf(r.KL, 0) }

// byteTicks marks whole byte counts at a step of 8 times a power of two
// (word-sized budgets), about eight labels across the axis.
type byteTicks struct{}

func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 8.0
	for (hi-lo)/step > 8 {
		step *= 2
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ts
}

// decadeTicks marks the powers of ten on a log axis, labelled 0.01, 0.1, 1
// near 1 and 1e-05 further out, with unlabelled minor ticks between.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) {
		return nil
	}
	var ts []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		// Parsing "1e<k>" gives the double nearest 10^k, which prints back short.
		v, _ := strconv.ParseFloat(fmt.Sprintf("1e%d", k), 64)
		label := strconv.FormatFloat(v, 'g', -1, 64)
		if k >= -3 && k <= 3 {
			label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
		for m := 2; m <= 9; m++ {
			if mv := float64(m) * v; mv >= lo && mv <= hi {
				ts = append(ts, plot.Tick{Value: mv})
			}
		}
	}
	return ts
}
