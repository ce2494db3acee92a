package loadgen

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/sluicemq/sluice/internal/charts"
	"github.com/sluicemq/sluice/internal/peers"
)

// benchChart draws the charts from `sluice bench --json` reports.
func benchChart(args []string, env cmdkit.Env) error {
	fs := flag.NewFlagSet("bench chart", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	in := fs.String("in", "", "reports written by sluice bench --json, comma-separated")
	out := fs.String("out", "docs/bench", "directory to write the PNG and SVG charts to")
	if _, err := cmdkit.ParseFlags(fs, args); err != nil {
		return err
	}
	files := splitList(*in)
	if len(files) == 0 {
		return fmt.Errorf("bench chart: --in is required")
	}
	var reps []peers.Report
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var rep peers.Report
		if err := json.Unmarshal(raw, &rep); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if len(rep.Results) == 0 {
			return fmt.Errorf("%s: no results", f)
		}
		reps = append(reps, rep)
	}
	written, err := charts.Render(reps, *out)
	if err != nil {
		return err
	}
	if len(written) == 0 {
		return fmt.Errorf("bench chart: nothing to draw (a chart needs two or more peers, sizes or queue counts in one report)")
	}
	for _, f := range written {
		fmt.Fprintln(env.Stdout, f)
	}
	return nil
}
