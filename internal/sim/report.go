package sim

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/internal/charts"
)

// WriteSummary prints the run's figures: a line about the run, a row per
// tenant (or class of tenants), and the queue's own counters. Nothing in
// it depends on the machine or the wall clock, so a scenario and seed
// print the same bytes.
func (res *Result) WriteSummary(w io.Writer) error {
	sc := res.Scenario
	b := &strings.Builder{}
	fmt.Fprintf(b, "scenario %s (seed %d): %s simulated, %d messages sent, %d events\n", sc.Title(), sc.Seed, fmtDur(sc.Duration.D()), res.Messages, res.Events)
	if sc.Description != "" {
		fmt.Fprintf(b, "%s\n", strings.TrimSpace(sc.Description))
	}
	b.WriteString("\n")
	writeTenants(b, []*Result{res}, false)
	q := res.Queue
	fmt.Fprintf(b, "\nqueue %s: sent %d, received %d, deleted %d, throttled %d, empty receives %d, sidelined %d, spilled %d, dead-lettered %d, retried %d",
		q.Name, q.Sent, q.Received, q.Deleted, q.Throttled, q.EmptyReceives, q.Sidelined, q.Spilled, q.DeadLettered, q.Retried)
	for _, k := range slices.Sorted(maps.Keys(q.Dropped)) {
		if q.Dropped[k] > 0 {
			fmt.Fprintf(b, ", dropped (%s) %d", k, q.Dropped[k])
		}
	}
	fmt.Fprintf(b, "\nat the end: %d visible, %d in flight, %d delayed, oldest %s\n", q.Visible, q.InFlight, q.Delayed, fmtDur(q.OldestAge))
	b.WriteString(legend([]*Result{res}))
	_, err := io.WriteString(w, b.String())
	return err
}

// legend explains the columns of the runs' table that need it.
func legend(rs []*Result) string {
	anyRun := func(f func(sc *Scenario) bool) bool {
		return slices.ContainsFunc(rs, func(r *Result) bool { return f(r.Scenario) })
	}
	s := "\nWAIT: from send to first receive (the owner's timestamps). DRAINED: from the tenant's last send until each of\nits messages was deleted (-: not within the run). LATE: served after the message was delivered again.\n" +
		"DROPPED: sent, never deleted, and gone at the end (an age limit, a retry ladder without a dead-letter queue).\n"
	if anyRun(func(sc *Scenario) bool { return sc.Queue["RedrivePolicy"] != "" }) {
		s += "DLQ: in the dead-letter queue at the end.\n"
	}
	if anyRun(func(sc *Scenario) bool { return sc.Queue["SidelineAgeSeconds"] != "" }) {
		s += "SIDELINED: the most of the tenant's messages in the backlog lane at one sample.\n"
	}
	if showDup(rs) {
		s += "DUP: deliveries made while another delivery of the same message was still in service.\n"
	}
	if i := slices.IndexFunc(rs, func(r *Result) bool { return r.Scenario.Hurt > 0 }); i >= 0 {
		s += fmt.Sprintf("HURT: tenants whose p99 wait exceeded %s, of the class's tenants.\n", fmtDur(rs[i].Scenario.Hurt.D()))
	}
	return s
}

// showDup: the DUP column is shown when a run's consumers may serve a
// message twice at once and say how they prevent it.
func showDup(rs []*Result) bool {
	for _, r := range rs {
		if r.Scenario.Consumers.Heartbeat > 0 {
			return true
		}
		for _, t := range r.Tenants {
			if t.Duplicates > 0 {
				return true
			}
		}
	}
	return false
}

// writeTenants writes the table of tenants of each run (with a VARIANT
// column first when variants is set).
func writeTenants(b io.Writer, rs []*Result, variants bool) {
	dup, hurt, dlq, side := showDup(rs), false, false, false
	for _, r := range rs {
		hurt = hurt || r.Scenario.Hurt > 0
		dlq = dlq || r.Scenario.Queue["RedrivePolicy"] != ""
		side = side || r.Scenario.Queue["SidelineAgeSeconds"] != ""
	}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "TENANT\tSENT\tTHROTTLED\tREFUSED\tRECEIVED\tDELETED\tFAILED\tLATE\t"
	if variants {
		head = "VARIANT\t" + head
	}
	if dup {
		head += "DUP\t"
	}
	if dlq {
		head += "DLQ\t"
	}
	head += "DROPPED\t"
	if side {
		head += "SIDELINED\t"
	}
	head += "WAIT P50\tWAIT P99\tWAIT MAX\tDRAINED\tBACKLOG\t"
	if hurt {
		head += "HURT\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rs {
		for _, t := range r.Tenants {
			drained := "-"
			if t.Drained >= 0 {
				drained = fmtDur(t.Drained)
			}
			name := t.Name
			if t.Members > 1 {
				name = fmt.Sprintf("%s (%d)", t.Name, t.Members)
			}
			row := fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t", name, t.Sent, t.Throttled, t.Refused, t.Received, t.Deleted, t.Failed, t.Late)
			if variants {
				row = r.Scenario.Variant + "\t" + row
			}
			if dup {
				row += fmt.Sprintf("%d\t", t.Duplicates)
			}
			if dlq {
				row += fmt.Sprintf("%d\t", t.DeadLettered)
			}
			row += fmt.Sprintf("%d\t", t.Dropped)
			if side {
				row += fmt.Sprintf("%d\t", t.SidelinedPeak)
			}
			row += fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t", fmtDur(t.Wait.P50), fmtDur(t.Wait.P99), fmtDur(t.Wait.Max), drained, t.Backlog)
			if hurt {
				if r.Scenario.Hurt > 0 {
					row += fmt.Sprintf("%d/%d\t", t.Hurt, t.Members)
				} else {
					row += "-\t"
				}
			}
			fmt.Fprintln(tw, row)
		}
	}
	tw.Flush()
}

// WriteComparison prints the runs of one scenario under several
// configurations (its variants, or the files of --compare) in one table,
// a row per variant per tenant, after a line per run.
func WriteComparison(w io.Writer, rs []*Result) error {
	b := &strings.Builder{}
	for _, r := range rs {
		sc := r.Scenario
		fmt.Fprintf(b, "%s (seed %d): %s simulated, %d messages sent", sc.Title(), sc.Seed, fmtDur(sc.Duration.D()), r.Messages)
		if sc.Description != "" {
			fmt.Fprintf(b, ": %s", strings.TrimSpace(sc.Description))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	writeTenants(b, rs, true)
	b.WriteString("\n")
	for _, r := range rs {
		q := r.Queue
		fmt.Fprintf(b, "%s: received %d, empty receives %d, sidelined %d, retried %d, dead-lettered %d; at the end %d visible, %d in flight, %d delayed\n",
			r.Scenario.Variant, q.Received, q.EmptyReceives, q.Sidelined, q.Retried, q.DeadLettered, q.Visible, q.InFlight, q.Delayed)
	}
	b.WriteString(legend(rs))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes the time series: a row per sample per tenant. Times and
// ages are in seconds.
func (res *Result) WriteCSV(w io.Writer) error { return WriteCSV(w, []*Result{res}) }

// WriteCSV writes the time series of several runs of one scenario, with
// a first column naming each row's variant (when there is more than one
// run).
func WriteCSV(w io.Writer, rs []*Result) error {
	cw := csv.NewWriter(w)
	head := []string{"time_s", "tenant", "sent", "received", "deleted", "backlog", "in_flight", "sidelined", "oldest_age_s",
		"first_receives", "wait_p50_s", "wait_p99_s", "wait_max_s", "duplicates"}
	if len(rs) > 1 {
		head = append([]string{"variant"}, head...)
	}
	cw.Write(head)
	for _, res := range rs {
		for _, s := range res.Samples {
			row := []string{secsStr(s.At), s.Tenant, itoa(s.Sent), itoa(s.Received), itoa(s.Deleted), strconv.Itoa(s.Backlog),
				strconv.Itoa(s.InFlight), strconv.Itoa(s.Sidelined), secsStr(s.Oldest), itoa(s.FirstReceives),
				secsStr(s.Wait.P50), secsStr(s.Wait.P99), secsStr(s.Wait.Max), itoa(s.Duplicates)}
			if len(rs) > 1 {
				row = append([]string{res.Scenario.Variant}, row...)
			}
			cw.Write(row)
		}
	}
	cw.Flush()
	return cw.Error()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// secsStr writes d in seconds, to the millisecond.
func secsStr(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// fmtDur writes d rounded to what a reader needs: milliseconds under a
// second, tenths of a second under a minute, seconds above.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// WriteCharts draws the run's time series, per tenant, with the
// consumers' outages shaded: base-wait-p50 and base-wait-p99, how long the
// messages first received in each sample had waited since their send;
// base-oldest, the age of the oldest message waiting; base-backlog, the
// messages ready and in flight (PNG and SVG each). It returns the files
// written.
func (res *Result) WriteCharts(base string) ([]string, error) {
	return WriteCharts(base, []*Result{res})
}

// WriteCharts draws the charts of Result.WriteCharts for several runs of
// one scenario (its variants), a panel per run side by side on one scale.
func WriteCharts(base string, rs []*Result) ([]string, error) {
	type chart struct {
		file, title, y string
		value          func(Sample) float64
	}
	first := func(q func(Sample) time.Duration) func(Sample) float64 {
		return func(s Sample) float64 {
			if s.FirstReceives == 0 {
				return math.NaN() // nothing first received in the sample
			}
			return q(s).Minutes()
		}
	}
	all := []chart{
		{"-wait-p50", "Wait from send to first receive (median of each sample)", "wait (minutes)", first(func(s Sample) time.Duration { return s.Wait.P50 })},
		{"-wait-p99", "Wait from send to first receive (p99 of each sample)", "wait (minutes)", first(func(s Sample) time.Duration { return s.Wait.P99 })},
		{"-oldest", "Age of the oldest message waiting", "age (minutes)", func(s Sample) float64 { return s.Oldest.Minutes() }},
		{"-backlog", "Backlog (messages ready and in flight)", "messages", func(s Sample) float64 { return float64(s.Backlog) }},
	}
	if showDup(rs) {
		all = append(all, chart{"-duplicates", "Deliveries of a message already in service (each sample)", "deliveries", func(s Sample) float64 { return float64(s.Duplicates) }})
	}
	var files []string
	for _, c := range all {
		var panels []charts.Panel
		for _, res := range rs {
			sc := res.Scenario
			var spans []charts.Span
			for _, o := range sc.Consumers.Outages {
				if len(o) == 2 {
					spans = append(spans, charts.Span{From: o[0].D().Minutes(), To: o[1].D().Minutes(), Label: "consumers out"})
				}
			}
			for _, t := range sc.Tenants {
				for _, b := range t.Bursts {
					spans = append(spans, charts.Span{From: b.At.D().Minutes(), To: (b.At + b.Duration).D().Minutes(), Label: fmt.Sprintf("%s at %g/s", t.Name, b.Rate)})
				}
			}
			for _, d := range sc.Consumers.Dependency {
				label := "dependency slow"
				if d.Failure != nil {
					label = "dependency failing"
				}
				spans = append(spans, charts.Span{From: d.From.D().Minutes(), To: d.To.D().Minutes(), Label: label})
			}
			pn := charts.Panel{Title: c.title, Sub: fmt.Sprintf("scenario %s, seed %d, %s simulated (sluice sim)", sc.Title(), sc.Seed, fmtDur(sc.Duration.D())), Spans: spans}
			if len(rs) > 1 {
				pn.Title, pn.Sub = sc.Variant, c.title
			}
			index := map[string]int{}
			for _, s := range res.Samples {
				i, ok := index[s.Tenant]
				if !ok {
					i = len(pn.Series)
					index[s.Tenant] = i
					pn.Series = append(pn.Series, charts.Series{Name: s.Tenant})
				}
				pn.Series[i].X = append(pn.Series[i].X, s.At.Minutes())
				pn.Series[i].Y = append(pn.Series[i].Y, c.value(s))
			}
			panels = append(panels, pn)
		}
		written, err := charts.Panels(base+c.file, "time (minutes)", c.y, false, panels)
		files = append(files, written...)
		if err != nil {
			return files, err
		}
	}
	if len(rs[0].Members) > 0 {
		written, err := tenantsChart(base+"-tenants", rs)
		files = append(files, written...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}

// tenantsChart draws every tenant's p99 wait, worst first, a line per
// run, against the scenario's hurt line: how many tenants a noisy one
// hurt under each configuration.
func tenantsChart(base string, rs []*Result) ([]string, error) {
	var series []charts.Series
	n := 0
	for _, r := range rs {
		ws := make([]float64, 0, len(r.Members))
		for _, m := range r.Members {
			ws = append(ws, max(m.Wait.P99.Seconds(), 0.001)) // a log scale needs more than 0
		}
		slices.SortFunc(ws, func(a, b float64) int { return cmp.Compare(b, a) })
		s := charts.Series{Name: r.Scenario.Variant}
		if s.Name == "" {
			s.Name = r.Scenario.Name
		}
		for i, w := range ws {
			s.X, s.Y = append(s.X, float64(i+1)), append(s.Y, w)
		}
		series = append(series, s)
		n = max(n, len(ws))
	}
	sc := rs[0].Scenario
	hurt := sc.Hurt.D().Seconds()
	series = append(series, charts.Series{Name: "hurt above " + fmtDur(sc.Hurt.D()), X: []float64{1, float64(n)}, Y: []float64{hurt, hurt}})
	return charts.Lines(base, "Each tenant's p99 wait from send to first receive, worst first", fmt.Sprintf("scenario %s, seed %d, %s simulated (sluice sim)", sc.Name, sc.Seed, fmtDur(sc.Duration.D())),
		"tenants, by p99 wait", "p99 wait (seconds)", true, series, nil)
}
