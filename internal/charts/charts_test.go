package charts

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/sluicemq/sluice/internal/peers"
)

func load(t *testing.T, names ...string) []peers.Report {
	t.Helper()
	var reps []peers.Report
	for _, n := range names {
		raw, err := os.ReadFile(filepath.Join("testdata", n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var r peers.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	return reps
}

// Every chart is drawn, each PNG decodes at the documented size, and the
// same reports give the same bytes.
func TestRender(t *testing.T) {
	reps := load(t, "peers", "sizes", "queues")
	a, b := t.TempDir(), t.TempDir()
	files, err := Render(reps, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(reps, b); err != nil {
		t.Fatal(err)
	}
	want := []string{"throughput-by-peer", "latency-end-to-end", "latency-send", "throughput-by-size", "throughput-by-queues"}
	if len(files) != len(want)*len(Formats()) {
		t.Fatalf("wrote %v, want %d charts in %v", files, len(want), Formats())
	}
	w, h := float64(Width/vg.Inch)*DPI, float64(Height/vg.Inch)*DPI
	wantW, wantH := int(w+0.5), int(h+0.5)
	for _, name := range want {
		for _, f := range Formats() {
			ra, err := os.ReadFile(filepath.Join(a, name+"."+f))
			if err != nil {
				t.Fatal(err)
			}
			rb, err := os.ReadFile(filepath.Join(b, name+"."+f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ra, rb) {
				t.Errorf("%s.%s differs between two renders of the same reports", name, f)
			}
			if f != "png" {
				continue
			}
			img, err := png.Decode(bytes.NewReader(ra))
			if err != nil {
				t.Fatalf("%s.png: %v", name, err)
			}
			if s := img.Bounds().Size(); s.X != wantW || s.Y != wantH {
				t.Errorf("%s.png is %v, want %dx%d", name, s, wantW, wantH)
			}
		}
	}
}

// A report that compares nothing draws nothing.
func TestRenderNothing(t *testing.T) {
	reps := load(t, "peers")
	reps[0].Config.Peers = []string{"sluice"}
	files, err := Render(reps, t.TempDir())
	if err != nil || len(files) != 0 {
		t.Fatalf("Render = %v, %v; want nothing", files, err)
	}
}

// A Lines chart, linear and logarithmic, with a gap and a span: both
// files are written, the PNG decodes at the documented size, and the
// same series give the same bytes.
func TestLines(t *testing.T) {
	nan := math.NaN()
	series := []Series{{Name: "flat", X: []float64{1, 2, 3, 4}, Y: []float64{0.1, 0.1, 0.1, 0.1}},
		{Name: "gap", X: []float64{1, 2, 3, 4}, Y: []float64{0.1, nan, 58, 0.1}}}
	spans := []Span{{From: 1.5, To: 2.5, Label: "away"}}
	for _, logY := range []bool{false, true} {
		var out [2][]byte
		for i := range out {
			base := filepath.Join(t.TempDir(), "c")
			files, err := Lines(base, "title", "sub", "x", "y", logY, series, spans)
			if err != nil || len(files) != 2 {
				t.Fatalf("log %v: %v %v", logY, files, err)
			}
			if out[i], err = os.ReadFile(base + ".png"); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(out[i]))
			if err != nil {
				t.Fatal(err)
			}
			if w := img.Bounds().Dx(); w != int(Width.Dots(DPI)) {
				t.Fatalf("width %d", w)
			}
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Fatalf("log %v: the same series gave different PNGs", logY)
		}
	}
}

// Panels lays out panels in rows of up to three (four in two rows of
// two), each PanelWidth by Height, and the same panels give the same
// bytes.
func TestPanels(t *testing.T) {
	for _, tc := range []struct{ n, rows, cols int }{{1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 2, 2}, {5, 2, 3}, {6, 2, 3}, {7, 3, 3}} {
		if r, c := Grid(tc.n); r != tc.rows || c != tc.cols {
			t.Errorf("Grid(%d) = %d x %d, want %d x %d", tc.n, r, c, tc.rows, tc.cols)
		}
	}
	var panels []Panel
	for i := range 4 {
		// Each panel its own X range: drawn on the union of them.
		x := []float64{float64(i), float64(i) + 10}
		panels = append(panels, Panel{Title: "p", Sub: "sub", Series: []Series{{Name: "a", X: x, Y: []float64{1, float64(i + 2)}}},
			Spans: []Span{{From: 2, To: 3, Label: "labelled"}, {From: 5, To: 6}}})
	}
	var out [2][]byte
	for i := range out {
		base := filepath.Join(t.TempDir(), "c")
		if _, err := Panels(base, "x", "y", false, panels); err != nil {
			t.Fatal(err)
		}
		var err error
		if out[i], err = os.ReadFile(base + ".png"); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatal("the same panels gave different PNGs")
	}
	img, err := png.Decode(bytes.NewReader(out[0]))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != int(max(Width, 2*PanelWidth).Dots(DPI)) || h != int((2*Height).Dots(DPI)) {
		t.Fatalf("%d x %d, want two rows of two panels", w, h)
	}
}

// roundTicks label a time axis at round steps, at most seven labels.
func TestRoundTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 150, []string{"0", "30", "60", "90", "120", "150"}},
		{0, 12, []string{"0", "2", "4", "6", "8", "10", "12"}},
		{0, 30, []string{"0", "5", "10", "15", "20", "25", "30"}},
		{1, 199, []string{"30", "60", "90", "120", "150", "180"}},
		{0, 0.45, []string{"0.0", "0.1", "0.2", "0.3", "0.4"}},
	} {
		var got []string
		for _, tk := range (roundTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%g to %g: %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
}
