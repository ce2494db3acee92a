package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicemq/sluice/examples/scenarios"
	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/internal/sim"
)

const simUsage = `Usage: sluice sim [--csv FILE] [--chart PREFIX] [--seed N] [--variant NAME,...] FILE|NAME
       sluice sim --compare [flags] FILE|NAME FILE|NAME...
       sluice sim --list

Replays a backlog scenario on the server's own queue code, on a virtual
clock: tenants sending at given rates, consumers with a service time,
failures and outages. FILE is a scenario in TOML (docs/simulator.md);
NAME one of the shipped scenarios (--list). It prints a summary per
tenant (and per [[window]] of send times); --csv writes the time series
(a row per sample per tenant), --chart draws it (PREFIX-wait-p50,
-wait-p99, -sent-wait-p50, -sent-wait-p99, -oldest, -backlog, and
-ahead or -duplicates when there are any; PNG and SVG each).
A scenario with [[variant]]s runs once per variant (or only those
--variant names) and prints them in one table; --compare runs several
scenarios (their variants, or the variants --variant names of each)
the same way, each run named by its scenario and variant. Charts of
several runs draw them side by side, on one scale.
The same scenario and seed give the same figures on every run.

Flags:
`

func simulate(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, simUsage)
		fs.PrintDefaults()
	}
	list := fs.Bool("list", false, "list the shipped scenarios")
	csvFile := fs.String("csv", "", "write the time series to this CSV file")
	chart := fs.String("chart", "", "draw the time series: PREFIX-wait-p50, -wait-p99, -sent-wait-p50, -sent-wait-p99, -oldest, -backlog (...), .png and .svg")
	seed := fs.Uint64("seed", 0, "seed the run with this instead of the scenario's seed")
	variant := fs.String("variant", "", "run only these variants of the scenario (NAME,NAME...)")
	compare := fs.Bool("compare", false, "run each scenario given (and each of their variants) and compare them")
	pos, err := cmdkit.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *list {
		all, err := sim.Shipped(scenarios.FS())
		if err != nil {
			return err
		}
		var rows [][]string
		for _, sc := range all {
			var vs []string
			for _, v := range sc.Variants {
				vs = append(vs, v.Name)
			}
			rows = append(rows, []string{sc.Name, sc.Duration.D().String(), strings.Join(vs, ","), sc.Description})
		}
		cmdkit.Table(env.Stdout, []string{"NAME", "DURATION", "VARIANTS", "DESCRIPTION"}, rows)
		return nil
	}
	switch {
	case *compare && len(pos) < 2:
		return fmt.Errorf("sim: --compare wants two scenarios or more, FILEs or NAMEs (see sluice sim -h)")
	case !*compare && len(pos) != 1:
		return fmt.Errorf("sim: want one scenario, a FILE or a NAME (see sluice sim -h)")
	}
	var want []string // the variants to run, in the order given (none: all)
	if *variant != "" {
		want = strings.Split(*variant, ",")
	}
	found := map[string]bool{}
	var runs []*sim.Scenario
	for _, arg := range pos {
		sc, err := loadScenario(arg)
		if err != nil {
			return err
		}
		if *seed != 0 {
			sc.Seed = *seed
		}
		all := sc.Expand()
		if want == nil || len(sc.Variants) == 0 {
			runs = append(runs, all...) // a scenario without variants runs as it is
			continue
		}
		for _, name := range want {
			for _, v := range all {
				if v.Variant == name {
					runs = append(runs, v)
					found[name] = true
				}
			}
		}
	}
	for _, name := range want {
		if !found[name] {
			return fmt.Errorf("sim: no variant %q (sluice sim --list)", name)
		}
	}
	start := time.Now()
	var results []*sim.Result
	var msgs int64
	for _, sc := range runs {
		res, err := sim.Run(ctx, sc, sim.Options{})
		if err != nil {
			return err
		}
		results = append(results, res)
		msgs += res.Messages
	}
	wall := time.Since(start)
	if *csvFile != "" {
		var b bytes.Buffer
		if err := sim.WriteCSV(&b, results); err != nil {
			return err
		}
		if err := os.WriteFile(*csvFile, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	if *chart != "" {
		if _, err := sim.WriteCharts(*chart, results); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	if len(results) == 1 {
		err = results[0].WriteSummary(env.Stdout)
	} else {
		err = sim.WriteComparison(env.Stdout, results)
	}
	if err != nil {
		return err
	}
	// The wall time goes to stderr: the summary is the same on every run.
	fmt.Fprintf(env.Stderr, "simulated %d run(s) in %s: %.0f messages a second of wall time\n", len(results), wall.Round(time.Millisecond),
		float64(msgs)/wall.Seconds())
	return nil
}

// loadScenario reads a scenario file, or a shipped scenario by name (a
// name has no .toml suffix and no path separator).
func loadScenario(arg string) (*sim.Scenario, error) {
	if !strings.HasSuffix(arg, ".toml") && !strings.ContainsAny(arg, `/\`) {
		return sim.Load(scenarios.FS(), arg)
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return sim.Parse(arg, data)
}
