package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The plots are SVG written here, with nothing but the standard library: a
// figure is a grid of panels sharing one time axis, each panel a set of
// series drawn as lines. A series is told apart by its colour, its dash
// pattern and its marker together, and named in the panel's legend, so a
// plot printed in grey still reads.

// series is one line of a panel: y over x. A NaN y (or, on a log scale, one
// not above 0) is no point: the line breaks there.
type series struct {
	name string
	x, y []float64
}

// refLine is a reference drawn across a panel: a horizontal line at a y
// value, or a vertical line at an x value, with a label.
type refLine struct {
	at    float64
	label string
}

type panel struct {
	title  string
	yLabel string
	logY   bool
	series []series
	yRefs  []refLine
}

type figure struct {
	title  string
	xLabel string
	cols   int
	panels []panel
	xRefs  []refLine // in every panel: the end of the warm-up, say
}

const (
	panelW      = 540
	plotLeft    = 72 // room for the y axis' tick labels and its label
	plotRight   = 24
	panelTitleH = 24
	plotH       = 190
	xAxisH      = 40
	legendRowH  = 18
	legendItemW = 172
	figTitleH   = 36
)

var (
	lineColours = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#7F7F7F", "#8C564B", "#332288"}
	lineDashes  = []string{"", "8 4", "2 3", "10 3 2 3", "5 5", "14 4", "1 3", "6 2 2 2 2 2", "12 3 4 3", "3 7"}
	markerNames = []string{"circle", "square", "triangle", "diamond", "cross", "plus", "tridown", "bar"}
)

// writeSVG writes figure f as an SVG document.
func writeSVG(w io.Writer, f figure) error {
	bw := bufio.NewWriter(w)
	cols := max(1, min(f.cols, len(f.panels)))
	rows := (len(f.panels) + cols - 1) / cols
	legendRows := 0
	perRow := (panelW - plotLeft - plotRight) / legendItemW
	for _, p := range f.panels {
		legendRows = max(legendRows, (len(p.series)+perRow-1)/perRow)
	}
	panelH := panelTitleH + plotH + xAxisH + legendRows*legendRowH + 12
	width, height := cols*panelW, figTitleH+rows*panelH
	xlo, xhi := dataRange(f.panels, func(s series) []float64 { return s.x }, false)
	xt := linearTicks(min(xlo, 0), xhi)
	if xhi > xlo && xhi < xt.hi {
		// Time ends where the run did, not at the next round tick.
		xt.hi = xhi
		for len(xt.ticks) > 0 && xt.ticks[len(xt.ticks)-1] > xhi*(1+1e-9) {
			xt.ticks = xt.ticks[:len(xt.ticks)-1]
		}
	}

	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(bw, "<title>%s</title>\n", esc(f.title))
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="%d" y="24" font-size="16" font-weight="bold" text-anchor="middle">%s</text>`+"\n", width/2, esc(f.title))
	for i, p := range f.panels {
		ox, oy := (i%cols)*panelW, figTitleH+(i/cols)*panelH
		writePanel(bw, p, f, xt, ox, oy)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// axis maps data values to pixels along one side of a plot.
type axis struct {
	lo, hi float64 // in data units, or their log10 on a log axis
	log    bool
	ticks  []float64
}

func (a axis) pos(v float64, from, to float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	if a.log {
		if v <= 0 {
			return 0, false
		}
		v = math.Log10(v)
	}
	return from + (v-a.lo)/(a.hi-a.lo)*(to-from), true
}

func writePanel(w io.Writer, p panel, f figure, xt axis, ox, oy int) {
	left, right := float64(ox+plotLeft), float64(ox+panelW-plotRight)
	top := float64(oy + panelTitleH)
	bottom := top + plotH
	var yt axis
	if p.logY {
		lo, hi := dataRange([]panel{p}, func(s series) []float64 { return s.y }, true)
		yt = logTicks(lo, hi)
	} else {
		lo, hi := dataRange([]panel{p}, func(s series) []float64 { return s.y }, false)
		for _, r := range p.yRefs {
			hi = max(hi, r.at)
		}
		yt = linearTicks(min(lo, 0), hi)
	}
	fmt.Fprintf(w, "<g>\n<text x=\"%.0f\" y=\"%d\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"middle\">%s</text>\n",
		(left+right)/2, oy+panelTitleH-8, esc(p.title))
	// Grid and tick labels.
	for _, t := range yt.ticks {
		y, _ := yt.pos(t, bottom, top)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", left, y, right, y)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y+4, esc(tickLabel(t, yt)))
	}
	for _, t := range xt.ticks {
		x, _ := xt.pos(t, left, right)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", x, top, x, bottom)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+4)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, bottom+16, esc(tickLabel(t, xt)))
	}
	fmt.Fprintf(w, `<path d="M%.1f %.1f V%.1f H%.1f" fill="none" stroke="black"/>`+"\n", left, top, bottom, right)
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (left+right)/2, bottom+32, esc(f.xLabel))
	fmt.Fprintf(w, `<text transform="translate(%d %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", ox+14, (top+bottom)/2, esc(p.yLabel))
	// References.
	for _, r := range f.xRefs {
		if x, ok := xt.pos(r.at, left, right); ok && x >= left && x <= right {
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555555" stroke-dasharray="4 3"/>`+"\n", x, top, x, bottom)
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="#555555">%s</text>`+"\n", x+3, top+10, esc(r.label))
		}
	}
	for _, r := range p.yRefs {
		if y, ok := yt.pos(r.at, bottom, top); ok && y >= top && y <= bottom {
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555555" stroke-dasharray="1 3"/>`+"\n", left, y, right, y)
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="#555555">%s</text>`+"\n", left+4, y-3, esc(r.label))
		}
	}
	// Lines, markers, legend.
	legendTop := bottom + xAxisH
	perRow := (panelW - plotLeft - plotRight) / legendItemW
	for i, s := range p.series {
		colour, dash, marker := lineColours[i%len(lineColours)], lineDashes[i%len(lineDashes)], markerNames[i%len(markerNames)]
		dashAttr := ""
		if dash != "" {
			dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		var pts [][2]float64
		var runs [][][2]float64
		for j := range s.x {
			if j >= len(s.y) {
				break
			}
			x, okx := xt.pos(s.x[j], left, right)
			y, oky := yt.pos(s.y[j], bottom, top)
			if !okx || !oky {
				if len(pts) > 0 {
					runs, pts = append(runs, pts), nil
				}
				continue
			}
			pts = append(pts, [2]float64{x, min(max(y, top), bottom)})
		}
		if len(pts) > 0 {
			runs = append(runs, pts)
		}
		fmt.Fprintf(w, "<g><title>%s</title>\n", esc(s.name))
		total := 0
		for _, run := range runs {
			total += len(run)
			var b strings.Builder
			for k, pt := range run {
				if k > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%.1f,%.1f", pt[0], pt[1])
			}
			if len(run) == 1 {
				continue // a lone point shows as its marker
			}
			fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"%s/>`+"\n", b.String(), colour, dashAttr)
		}
		// About eight markers a line, staggered between series so that
		// lines lying on each other still show each marker.
		step := max(1, total/8)
		k := 0
		for _, run := range runs {
			for _, pt := range run {
				if (k+i*step/max(1, len(p.series)))%step == 0 || len(run) == 1 {
					writeMarker(w, marker, pt[0], pt[1], colour)
				}
				k++
			}
		}
		fmt.Fprintln(w, "</g>")
		lx := left + float64(i%perRow*legendItemW)
		ly := legendTop + float64(i/perRow*legendRowH)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.6"%s/>`+"\n", lx, ly, lx+30, ly, colour, dashAttr)
		writeMarker(w, marker, lx+15, ly, colour)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+36, ly+4, esc(s.name))
	}
	fmt.Fprintln(w, "</g>")
}

func writeMarker(w io.Writer, name string, x, y float64, colour string) {
	const r = 3.5
	style := fmt.Sprintf(`fill="white" stroke="%s" stroke-width="1.4"`, colour)
	switch name {
	case "circle":
		fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="%.1f" %s/>`+"\n", x, y, r, style)
	case "square":
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" %s/>`+"\n", x-r, y-r, 2*r, 2*r, style)
	case "triangle":
		fmt.Fprintf(w, `<path d="M%.1f %.1f L%.1f %.1f L%.1f %.1f Z" %s/>`+"\n", x, y-r-1, x+r+0.5, y+r, x-r-0.5, y+r, style)
	case "tridown":
		fmt.Fprintf(w, `<path d="M%.1f %.1f L%.1f %.1f L%.1f %.1f Z" %s/>`+"\n", x, y+r+1, x+r+0.5, y-r, x-r-0.5, y-r, style)
	case "diamond":
		fmt.Fprintf(w, `<path d="M%.1f %.1f L%.1f %.1f L%.1f %.1f L%.1f %.1f Z" %s/>`+"\n", x, y-r-1, x+r+1, y, x, y+r+1, x-r-1, y, style)
	case "cross":
		fmt.Fprintf(w, `<path d="M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f" stroke="%s" stroke-width="1.6"/>`+"\n", x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, colour)
	case "plus":
		fmt.Fprintf(w, `<path d="M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f" stroke="%s" stroke-width="1.6"/>`+"\n", x-r-1, y, x+r+1, y, x, y-r-1, x, y+r+1, colour)
	default: // bar
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x-1.2, y-r-1, 2.4, 2*r+2, colour)
	}
}

// dataRange is the smallest and largest finite value of what pick takes
// from every series (only those above 0 if positive), 0 and 1 for none.
func dataRange(ps []panel, pick func(series) []float64, positive bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		for _, s := range p.series {
			for _, v := range pick(s) {
				if math.IsNaN(v) || math.IsInf(v, 0) || (positive && v <= 0) {
					continue
				}
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if lo > hi {
		if positive {
			return 1, 10
		}
		return 0, 1
	}
	return lo, hi
}

// linearTicks is an axis from lo to hi widened to round ticks, about five
// of them, 1, 2 or 5 times a power of ten apart.
func linearTicks(lo, hi float64) axis {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	a := axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
	for i := 0; ; i++ {
		t := a.lo + float64(i)*step
		if t > a.hi+step/2 {
			break
		}
		a.ticks = append(a.ticks, t)
	}
	return a
}

// logTicks is a log axis from the decade below lo to the one above hi,
// with a tick at each power of ten and, over two decades or fewer, at 2
// and 5 times each too.
func logTicks(lo, hi float64) axis {
	a := axis{log: true, lo: math.Floor(math.Log10(lo)), hi: math.Ceil(math.Log10(hi))}
	if a.hi <= a.lo {
		a.hi = a.lo + 1
	}
	mults := []float64{1}
	if a.hi-a.lo <= 2 {
		mults = []float64{1, 2, 5}
	}
	for d := a.lo; d <= a.hi; d++ {
		for _, m := range mults {
			if t := m * math.Pow(10, d); math.Log10(t) <= a.hi+1e-9 {
				a.ticks = append(a.ticks, t)
			}
		}
	}
	return a
}

// tickLabel writes a tick's value as short as it reads: 250, 0.5, 20k,
// 1.5M.
func tickLabel(v float64, a axis) string {
	if v == 0 {
		return "0"
	}
	suffix := ""
	switch av := math.Abs(v); {
	case av >= 1e6:
		v, suffix = v/1e6, "M"
	case av >= 1e4:
		v, suffix = v/1e3, "k"
	}
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if len(a.ticks) > 0 && !a.log {
		// At most the decimals of the tick step: 0.30000000004 is 0.3.
		step := 0.0
		if len(a.ticks) > 1 {
			step = a.ticks[1] - a.ticks[0]
		}
		if suffix == "M" {
			step /= 1e6
		} else if suffix == "k" {
			step /= 1e3
		}
		if step > 0 {
			dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
			s = strconv.FormatFloat(v, 'f', dec, 64)
		}
	}
	return s + suffix
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
