package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// svgTexts parses an SVG document to its end and returns the text of its
// <text> and <title> elements; any error of XML fails the test.
func svgTexts(t *testing.T, doc []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var texts []string
	var in []string
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Space + " " + tok.Name.Local
			}
			in = append(in, tok.Name.Local)
		case xml.EndElement:
			in = in[:len(in)-1]
		case xml.CharData:
			if len(in) > 0 && (in[len(in)-1] == "text" || in[len(in)-1] == "title") {
				texts = append(texts, string(tok))
			}
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Errorf("the root element is %q, want svg in the SVG namespace", root)
	}
	return texts
}

func TestWriteSVGIsWellFormedAndNamesEverySeries(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4, 5}
	f := figure{
		title: "memory <&> \"quotes\"", xLabel: "minutes", cols: 2,
		xRefs: []refLine{{at: 1.5, label: "warm-up ends"}},
		panels: []panel{
			{title: "linear", yLabel: "MiB", yRefs: []refLine{{at: 90, label: "1.2 × baseline"}}, series: []series{
				{name: "VmRSS", x: x, y: []float64{70, 72, 74, math.NaN(), 75, 75}},
				{name: "RssAnon & <co>", x: x, y: []float64{40, 41, 42, 43, 44, 45}},
				{name: "a lone point", x: x, y: []float64{math.NaN(), math.NaN(), 3, math.NaN(), math.NaN(), math.NaN()}},
				{name: "nothing at all", x: x, y: []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}},
			}},
			{title: "log", yLabel: "ms", logY: true, series: []series{
				{name: "p50", x: x, y: []float64{0.2, 0.3, 0, -1, 0.25, 0.3}},
				{name: "p99", x: x, y: []float64{4, 5, 120, 6, 5, 4}},
			}},
			{title: "empty", yLabel: "count"},
		},
	}
	var buf bytes.Buffer
	if err := writeSVG(&buf, f); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, buf.Bytes())
	for _, want := range []string{f.title, "linear", "log", "empty", "MiB", "minutes", "warm-up ends", "1.2 × baseline",
		"VmRSS", "RssAnon & <co>", "a lone point", "nothing at all", "p50", "p99"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; texts: %q", want, texts)
		}
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(buf.String(), bad) {
			t.Errorf("the SVG holds %q: a value not drawable reached it", bad)
		}
	}
}

// Each series of a panel is drawn in its own dash pattern and marker, so
// that a plot in grey still tells them apart.
func TestWriteSVGStylesSeriesApartWithoutColour(t *testing.T) {
	var ss []series
	for i := range 8 {
		ss = append(ss, series{name: string(rune('a' + i)), x: []float64{0, 1}, y: []float64{float64(i), float64(i + 1)}})
	}
	for i := range ss {
		for j := range i {
			if lineDashes[i%len(lineDashes)] == lineDashes[j%len(lineDashes)] && markerNames[i%len(markerNames)] == markerNames[j%len(markerNames)] {
				t.Errorf("series %d and %d share both dash and marker", i, j)
			}
		}
	}
	var buf bytes.Buffer
	if err := writeSVG(&buf, figure{title: "t", panels: []panel{{series: ss}}}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "stroke-dasharray="); n < 2*7 { // a line and its legend sample, all but the solid one
		t.Errorf("%d dashed strokes for 7 dashed series", n)
	}
}

func TestTicksAreRound(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 60, []float64{0, 20, 40, 60}},
		{0, 47, []float64{0, 10, 20, 30, 40, 50}},
		{0, 1_000_000, []float64{0, 200000, 400000, 600000, 800000, 1000000}},
		{0, 0, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
	} {
		if got := linearTicks(c.lo, c.hi).ticks; !slices.Equal(got, c.want) {
			t.Errorf("ticks of %v..%v: %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got := logTicks(0.3, 8).ticks; !slices.Equal(got, []float64{0.1, 0.2, 0.5, 1, 2, 5, 10}) {
		t.Errorf("log ticks of 0.3..8: %v", got)
	}
	if got := logTicks(0.01, 5000).ticks; !slices.Equal(got, []float64{0.01, 0.1, 1, 10, 100, 1000, 10000}) {
		t.Errorf("log ticks of 0.01..5000: %v", got)
	}
	a := linearTicks(0, 1_000_000)
	if got := tickLabel(400000, a); got != "400k" {
		t.Errorf("400,000 reads %q, want 400k", got)
	}
	if got := tickLabel(1e6, a); got != "1.0M" && got != "1M" {
		t.Errorf("1,000,000 reads %q, want 1M", got)
	}
	if got := tickLabel(0.6000000000000001, linearTicks(0, 1)); got != "0.6" {
		t.Errorf("0.6000000000000001 reads %q, want 0.6", got)
	}
}
