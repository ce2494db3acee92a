package charts

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
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
