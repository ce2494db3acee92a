package cli

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/charts"
)

const simScenario = `
name = "small"
seed = 7
duration = "10m"
sample = "1m"

[queue]
VisibilityTimeout = 10
RetryDelays = "2s,10s"

[[tenant]]
name = "a"
rate = 5

[[tenant]]
name = "b"
arrivals = "constant"
rate = 2
stop = "8m"

[consumers]
count = 3
failure = 0.05
outages = [["2m", "4m"]]
[consumers.service]
distribution = "exponential"
mean = "300ms"
`

func runSim(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"sim"}, args...), Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	return out.String(), errb.String(), code
}

// TestSim: a scenario file runs, prints its summary and writes its time
// series; twice, the same bytes.
func TestSim(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "small.toml")
	if err := os.WriteFile(file, []byte(simScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	var sums, csvs []string
	for i := range 2 {
		csvFile := filepath.Join(dir, "series"+string(rune('0'+i))+".csv")
		out, errs, code := runSim(file, "--csv", csvFile)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if !strings.Contains(errs, "messages a second of wall time") {
			t.Errorf("stderr: %q", errs)
		}
		data, err := os.ReadFile(csvFile)
		if err != nil {
			t.Fatal(err)
		}
		sums, csvs = append(sums, out), append(csvs, string(data))
	}
	if sums[0] != sums[1] || csvs[0] != csvs[1] {
		t.Fatalf("two runs differ:\n%s\n%s", sums[0], sums[1])
	}
	for _, want := range []string{"scenario small (seed 7)", "TENANT", "WAIT P99"} {
		if !strings.Contains(sums[0], want) {
			t.Errorf("summary does not say %q:\n%s", want, sums[0])
		}
	}
	lines := strings.Split(strings.TrimSpace(csvs[0]), "\n")
	if !strings.HasPrefix(lines[0], "time_s,tenant,") || len(lines) != 1+10*2 {
		t.Fatalf("csv: %d lines, header %q", len(lines), lines[0])
	}
	// --chart draws both charts, each as PNG and SVG, the same bytes as
	// the same run's.
	var pngs [2][]byte
	for i := range 2 {
		base := filepath.Join(dir, "chart"+string(rune('0'+i)))
		if _, errs, code := runSim(file, "--chart", base); code != 0 {
			t.Fatalf("--chart: exit %d: %s", code, errs)
		}
		for _, f := range []string{"-wait-p50.png", "-wait-p99.svg", "-oldest.png", "-backlog.png", "-backlog.svg"} {
			data, err := os.ReadFile(base + f)
			if err != nil || len(data) < 1000 {
				t.Fatalf("--chart wrote %s%s: %d bytes, %v", base, f, len(data), err)
			}
			if f == "-wait-p50.png" {
				pngs[i] = data
			}
		}
	}
	if !bytes.Equal(pngs[0], pngs[1]) {
		t.Fatal("two runs drew different charts")
	}
	out, _, code := runSim(file, "--seed", "8")
	if code != 0 || out == sums[0] || !strings.Contains(out, "(seed 8)") {
		t.Fatalf("--seed 8: exit %d, same summary %v", code, out == sums[0])
	}
}

func TestSimList(t *testing.T) {
	out, errs, code := runSim("--list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"consumer-outage ", "default,fair,fifo,sideline", "consumer-outage-1.1x ", "healthy ", "shuffle-sharding ", "slow-handlers "} {
		if !strings.Contains(out, want) {
			t.Fatalf("--list does not say %q:\n%s", want, out)
		}
	}
}

// TestSimCompare: --compare runs each file as a variant named by its
// scenario, in one table, one CSV with a variant column, and charts of
// panels; a file's own [[variant]]s run the same way, or one of them
// with --variant.
func TestSimCompare(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	os.WriteFile(a, []byte(strings.Replace(simScenario, `name = "small"`, `name = "plain"`, 1)), 0o644)
	os.WriteFile(b, []byte(strings.Replace(strings.Replace(simScenario, `name = "small"`, `name = "limited"`, 1), "[queue]", "[queue]\nTenantSendRate = 2", 1)), 0o644)
	csvFile := filepath.Join(dir, "cmp.csv")
	out, errs, code := runSim("--compare", a, b, "--csv", csvFile, "--chart", filepath.Join(dir, "cmp"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"plain (seed 7)", "limited (seed 7)", "VARIANT", "\n    plain       a", "\n  limited       a"} {
		if !strings.Contains(out, want) {
			t.Errorf("--compare does not say %q:\n%s", want, out)
		}
	}
	data, _ := os.ReadFile(csvFile)
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); !strings.HasPrefix(lines[0], "variant,time_s,tenant,") || len(lines) != 1+2*10*2 {
		t.Errorf("csv: %d lines, header %q", len(lines), lines[0])
	}
	if st, err := os.Stat(filepath.Join(dir, "cmp-wait-p99.png")); err != nil || st.Size() < 1000 {
		t.Errorf("--chart: %v", err)
	}

	variants := simScenario + "\n[[variant]]\nname = \"loose\"\n[[variant]]\nname = \"tight\"\n[variant.queue]\nTenantSendRate = 2\n"
	v := filepath.Join(dir, "v.toml")
	os.WriteFile(v, []byte(variants), 0o644)
	out, errs, code = runSim(v)
	if code != 0 || !strings.Contains(out, "small/loose") || !strings.Contains(out, "small/tight") {
		t.Fatalf("variants: exit %d: %s\n%s", code, errs, out)
	}
	out, errs, code = runSim("--variant", "tight", v)
	if code != 0 || !strings.Contains(out, "scenario small/tight (seed 7)") || strings.Contains(out, "loose") {
		t.Fatalf("--variant tight: exit %d: %s\n%s", code, errs, out)
	}
	if _, errs, code = runSim("--variant", "nope", v); code != 1 || !strings.Contains(errs, `no variant "nope"`) {
		t.Fatalf("--variant nope: exit %d: %s", code, errs)
	}
	if _, errs, code = runSim("--compare", a); code != 1 || !strings.Contains(errs, "two scenarios or more") {
		t.Fatalf("--compare of one: exit %d: %s", code, errs)
	}
}

// TestSimCompareVariants: --compare of scenarios with variants names each
// run by its scenario and variant, runs those --variant names (in its
// order) and draws them side by side: two panels in a row, four in two
// rows of two.
func TestSimCompareVariants(t *testing.T) {
	dir := t.TempDir()
	variants := "\n[[variant]]\nname = \"loose\"\n[[variant]]\nname = \"tight\"\n[variant.queue]\nTenantSendRate = 2\n"
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	os.WriteFile(a, []byte(strings.Replace(simScenario, `name = "small"`, `name = "plain"`, 1)+variants), 0o644)
	os.WriteFile(b, []byte(strings.Replace(strings.Replace(simScenario, `name = "small"`, `name = "slow"`, 1), "mean = \"300ms\"", "mean = \"600ms\"", 1)+variants), 0o644)
	size := func(file string) (int, int) {
		t.Helper()
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		return img.Bounds().Dx(), img.Bounds().Dy()
	}
	panel, row := int(charts.PanelWidth.Dots(charts.DPI)), int(charts.Height.Dots(charts.DPI))
	out, errs, code := runSim("--compare", a, b, "--variant", "tight", "--chart", filepath.Join(dir, "two"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"plain/tight (seed 7)", "slow/tight (seed 7)", "\n  plain/tight       a", "\n   slow/tight       b", "\nplain/tight: received"} {
		if !strings.Contains(out, want) {
			t.Errorf("--compare --variant tight does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "loose") {
		t.Errorf("--variant tight ran loose:\n%s", out)
	}
	for _, c := range []string{"-wait-p99", "-sent-wait-p99", "-oldest", "-backlog"} {
		if w, h := size(filepath.Join(dir, "two"+c+".png")); w != 2*panel || h != row {
			t.Errorf("two runs: %s is %dx%d, want %dx%d", c, w, h, 2*panel, row)
		}
	}
	out, errs, code = runSim("--compare", a, b, "--variant", "tight,loose", "--chart", filepath.Join(dir, "four"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if i, j := strings.Index(out, "plain/tight (seed 7)"), strings.Index(out, "plain/loose (seed 7)"); i < 0 || j < i {
		t.Errorf("--variant tight,loose: want tight first:\n%s", out)
	}
	if w, h := size(filepath.Join(dir, "four-wait-p50.png")); w != 2*panel || h != 2*row {
		t.Errorf("four runs: %dx%d, want two rows of two panels, %dx%d", w, h, 2*panel, 2*row)
	}
	if _, errs, code = runSim("--compare", a, b, "--variant", "tight,nope"); code != 1 || !strings.Contains(errs, `no variant "nope"`) {
		t.Fatalf("--variant tight,nope: exit %d: %s", code, errs)
	}
}

// TestSimErrors: a bad file, an unknown name, no argument: exit 1 with
// the reason.
func TestSimErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(strings.Replace(simScenario, "rate = 5", "rate = -5", 1)), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{bad}, []string{"bad.toml", "line 13", "tenant[0].rate"}},
		{[]string{"no-such-scenario"}, []string{`no shipped scenario "no-such-scenario"`, "--list"}},
		{[]string{filepath.Join(dir, "missing.toml")}, []string{"missing.toml"}},
		{nil, []string{"want one scenario"}},
	} {
		_, errs, code := runSim(tc.args...)
		if code != 1 {
			t.Errorf("%v: exit %d", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q does not say %q", tc.args, errs, w)
			}
		}
	}
}
