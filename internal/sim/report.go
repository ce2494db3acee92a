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
	if len(res.Windows) > 0 {
		b.WriteString("\n")
		writeWindows(b, []*Result{res}, false)
	}
	q := res.Queue
	fmt.Fprintf(b, "\nqueue %s: sent %d, received %d, deleted %d, throttled %d, empty receives %d, sidelined %d, spilled %d, dead-lettered %d, retried %d",
		q.Name, q.Sent, q.Received, q.Deleted, q.Throttled, q.EmptyReceives, q.Sidelined, q.Spilled, q.DeadLettered, q.Retried)
	for _, k := range slices.Sorted(maps.Keys(q.Dropped)) {
		if q.Dropped[k] > 0 {
			fmt.Fprintf(b, ", dropped (%s) %d", k, q.Dropped[k])
		}
	}
	fmt.Fprintf(b, "\nat the end: %d visible, %d in flight, %d delayed, oldest %s; %s\n", q.Visible, q.InFlight, q.Delayed, fmtDur(q.OldestAge), caughtUp(res))
	b.WriteString(legend([]*Result{res}))
	_, err := io.WriteString(w, b.String())
	return err
}

// caughtUp says when the run's backlog last stopped standing.
func caughtUp(r *Result) string {
	switch {
	case r.CaughtUp == 0:
		return fmt.Sprintf("the oldest message under %s at every sample", fmtDur(Standing))
	case r.CaughtUp < 0:
		return fmt.Sprintf("not caught up (the oldest message over %s at the end)", fmtDur(Standing))
	}
	return fmt.Sprintf("caught up at %s (the oldest message under %s at every sample from then on)", fmtDur(r.CaughtUp), fmtDur(Standing))
}

// legend explains the columns of the runs' table that need it.
func legend(rs []*Result) string {
	anyRun := func(f func(sc *Scenario) bool) bool {
		return slices.ContainsFunc(rs, func(r *Result) bool { return f(r.Scenario) })
	}
	s := "\nWAIT: from send to first receive (the owner's timestamps). AHEAD: first receives served ahead of an older message\n" +
		"of the same tenant not yet received (out of its send order), and their share of its first receives.\n" +
		"DRAINED: from the tenant's last send until each of its messages was deleted (-: not within the run).\n" +
		"LATE: served after the message was delivered again.\n" +
		"DROPPED: sent, never deleted, and gone at the end (an age limit, a retry ladder without a dead-letter queue).\n"
	if anyRun(func(sc *Scenario) bool { return sc.Queue["RedrivePolicy"] != "" }) {
		s += "DLQ: in the dead-letter queue at the end.\n"
	}
	if showSidelined(rs) {
		s += "SIDELINED: the most of the tenant's messages in the backlog lane at one sample (the backlog mode, SidelineAgeSeconds).\n"
	}
	if slices.ContainsFunc(rs, func(r *Result) bool { return len(r.Windows) > 0 }) {
		s += "WINDOW: the messages sent from FROM to TO; RECEIVED: those first received by the end, and their WAIT.\n" +
			"ALL SERVED AT: when the last of them was first received (-: not all were, within the run).\n"
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

// showSidelined: the SIDELINED column is shown when a run sets
// SidelineAgeSeconds or sidelined anything (the backlog mode).
func showSidelined(rs []*Result) bool {
	return slices.ContainsFunc(rs, func(r *Result) bool {
		return r.Scenario.Queue["SidelineAgeSeconds"] != "" || r.Queue.Sidelined > 0
	})
}

// labels name each run of a table or chart of several: its variant, or,
// when they are runs of several scenarios (--compare), its scenario and
// variant.
func labels(rs []*Result) []string {
	several := slices.ContainsFunc(rs, func(r *Result) bool { return r.Scenario.Name != rs[0].Scenario.Name })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Scenario.Variant
		if several || out[i] == "" {
			out[i] = r.Scenario.Title()
		}
	}
	return out
}

// share writes n of total as a percentage ("-" of none).
func share(n, total int64) string {
	switch {
	case total == 0:
		return "-"
	case n == 0:
		return "0%"
	case n*10000 < total:
		return "<0.01%"
	}
	return strconv.FormatFloat(100*float64(n)/float64(total), 'f', 2, 64) + "%"
}

// writeTenants writes the table of tenants of each run (with a VARIANT
// column first when variants is set).
func writeTenants(b io.Writer, rs []*Result, variants bool) {
	dup, hurt, dlq, side := showDup(rs), false, false, showSidelined(rs)
	for _, r := range rs {
		hurt = hurt || r.Scenario.Hurt > 0
		dlq = dlq || r.Scenario.Queue["RedrivePolicy"] != ""
	}
	names := labels(rs)
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
	head += "WAIT P50\tWAIT P99\tWAIT MAX\tAHEAD\tAHEAD %\tDRAINED\tBACKLOG\t"
	if hurt {
		head += "HURT\t"
	}
	fmt.Fprintln(tw, head)
	for ri, r := range rs {
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
				row = names[ri] + "\t" + row
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
			row += fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%d\t", fmtDur(t.Wait.P50), fmtDur(t.Wait.P99), fmtDur(t.Wait.Max), t.Ahead, share(t.Ahead, t.FirstReceives), drained, t.Backlog)
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

// writeWindows writes the table of the runs' windows: a row per window
// (per run, with a VARIANT column after the window's name when variants
// is set).
func writeWindows(b io.Writer, rs []*Result, variants bool) {
	names := labels(rs)
	tenants := slices.ContainsFunc(rs, func(r *Result) bool {
		return slices.ContainsFunc(r.Windows, func(w WindowResult) bool { return len(w.Tenants) > 0 })
	})
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "WINDOW\t"
	if variants {
		head += "VARIANT\t"
	}
	if tenants {
		head += "TENANTS\t"
	}
	fmt.Fprintln(tw, head+"FROM\tTO\tSENT\tRECEIVED\tWAIT P50\tWAIT P99\tWAIT MAX\tALL SERVED AT\t")
	// Window by window, each run's row under the other's: the runs of a
	// scenario have the same windows.
	var order []string
	for _, r := range rs {
		for _, w := range r.Windows {
			if !slices.Contains(order, w.Name) {
				order = append(order, w.Name)
			}
		}
	}
	for _, name := range order {
		for ri, r := range rs {
			i := slices.IndexFunc(r.Windows, func(w WindowResult) bool { return w.Name == name })
			if i < 0 {
				continue
			}
			w := r.Windows[i]
			row := w.Name + "\t"
			if variants {
				row += names[ri] + "\t"
			}
			if tenants {
				ts := strings.Join(w.Tenants, ",")
				if ts == "" {
					ts = "all"
				}
				row += ts + "\t"
			}
			served := "-"
			if w.AllServed >= 0 {
				served = fmtDur(w.AllServed)
			}
			row += fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t", fmtDur(w.From.D()), fmtDur(w.To.D()), w.Sent, w.FirstReceives,
				fmtDur(w.Wait.P50), fmtDur(w.Wait.P99), fmtDur(w.Wait.Max), served)
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
	if slices.ContainsFunc(rs, func(r *Result) bool { return len(r.Windows) > 0 }) {
		b.WriteString("\n")
		writeWindows(b, rs, true)
	}
	b.WriteString("\n")
	names := labels(rs)
	for ri, r := range rs {
		q := r.Queue
		fmt.Fprintf(b, "%s: received %d, empty receives %d, sidelined %d, retried %d, dead-lettered %d; at the end %d visible, %d in flight, %d delayed; %s\n",
			names[ri], q.Received, q.EmptyReceives, q.Sidelined, q.Retried, q.DeadLettered, q.Visible, q.InFlight, q.Delayed, caughtUp(r))
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
		"first_receives", "wait_p50_s", "wait_p99_s", "wait_max_s", "duplicates", "ahead",
		"sent_wait_p50_s", "sent_wait_p99_s", "sent_wait_max_s", "sent_unreceived"}
	if len(rs) > 1 {
		head = append([]string{"variant"}, head...)
	}
	cw.Write(head)
	// known writes a wait of the messages sent, "" when unknown (some
	// were not received).
	known := func(d time.Duration) string {
		if d < 0 {
			return ""
		}
		return secsStr(d)
	}
	names := labels(rs)
	for ri, res := range rs {
		for _, s := range res.Samples {
			row := []string{secsStr(s.At), s.Tenant, itoa(s.Sent), itoa(s.Received), itoa(s.Deleted), strconv.Itoa(s.Backlog),
				strconv.Itoa(s.InFlight), strconv.Itoa(s.Sidelined), secsStr(s.Oldest), itoa(s.FirstReceives),
				secsStr(s.Wait.P50), secsStr(s.Wait.P99), secsStr(s.Wait.Max), itoa(s.Duplicates), itoa(s.Ahead),
				known(s.SentWait.P50), known(s.SentWait.P99), known(s.SentWait.Max), itoa(s.SentOpen)}
			if len(rs) > 1 {
				row = append([]string{names[ri]}, row...)
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

// shortDur writes d as fmtDur does, without zero minutes or seconds at
// its end ("1m", not "1m0s").
func shortDur(d time.Duration) string {
	s := fmtDur(d)
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = s[:len(s)-2]
		}
	}
	return s
}

// WriteCharts draws the run's time series, per tenant, with the
// consumers' outages, the dependency periods and the bursts shaded:
// base-wait-p50 and base-wait-p99, how long the messages first received
// in each sample had waited since their send; base-sent-wait-p50 and
// base-sent-wait-p99, how long the messages sent in each sample waited
// for their first receive; base-oldest, the age of the oldest message
// waiting; base-backlog, the messages ready and in flight; base-ahead
// (when a run has any), the first receives served ahead of an older
// message of the same tenant; base-duplicates (when shown), the
// deliveries of a message already in service (PNG and SVG each). It
// returns the files written.
func (res *Result) WriteCharts(base string) ([]string, error) {
	return WriteCharts(base, []*Result{res})
}

// timeUnit is a unit to draw durations in: its name and length.
type timeUnit struct {
	name string
	d    time.Duration
}

// unitFor is the unit that draws durations up to longest best: seconds
// under two minutes, minutes up to five hours, hours beyond.
func unitFor(longest time.Duration) timeUnit {
	switch {
	case longest < 2*time.Minute:
		return timeUnit{"seconds", time.Second}
	case longest <= 5*time.Hour:
		return timeUnit{"minutes", time.Minute}
	}
	return timeUnit{"hours", time.Hour}
}

func (u timeUnit) of(d time.Duration) float64 { return float64(d) / float64(u.d) }

// WriteCharts draws the charts of Result.WriteCharts for several runs (a
// scenario's variants, or the scenarios of --compare), a panel per run
// side by side, on one scale.
func WriteCharts(base string, rs []*Result) ([]string, error) {
	const unknown = time.Duration(math.MinInt64) // nothing to draw
	type chart struct {
		file, title, y string
		// wait: the values are durations, drawn in the unit that fits the
		// longest of them; else counts, value's nanoseconds.
		wait  bool
		value func(Sample) time.Duration
	}
	firstRecv := func(q func(Quantiles) time.Duration) func(Sample) time.Duration {
		return func(s Sample) time.Duration {
			if s.FirstReceives == 0 {
				return unknown // nothing first received in the sample
			}
			return q(s.Wait)
		}
	}
	bySend := func(q func(Quantiles) time.Duration) func(Sample) time.Duration {
		return func(s Sample) time.Duration {
			if s.Sent == 0 || q(s.SentWait) < 0 {
				return unknown // nothing sent, or not received by the end
			}
			return q(s.SentWait)
		}
	}
	p50 := func(q Quantiles) time.Duration { return q.P50 }
	p99 := func(q Quantiles) time.Duration { return q.P99 }
	count := func(f func(Sample) int64) func(Sample) time.Duration {
		return func(s Sample) time.Duration { return time.Duration(f(s)) }
	}
	all := []chart{
		{"-wait-p50", "Wait from send to first receive (median of each sample's first receives)", "wait", true, firstRecv(p50)},
		{"-wait-p99", "Wait from send to first receive (p99 of each sample's first receives)", "wait", true, firstRecv(p99)},
		{"-sent-wait-p50", "Wait from send to first receive, by send time (median of the messages sent in each sample)", "wait", true, bySend(p50)},
		{"-sent-wait-p99", "Wait from send to first receive, by send time (p99 of the messages sent in each sample)", "wait", true, bySend(p99)},
		{"-oldest", "Age of the oldest message waiting", "age", true, func(s Sample) time.Duration { return s.Oldest }},
		{"-backlog", "Backlog (messages ready and in flight)", "messages", false, count(func(s Sample) int64 { return int64(s.Backlog) })},
	}
	if slices.ContainsFunc(rs, func(r *Result) bool {
		return slices.ContainsFunc(r.Tenants, func(t TenantResult) bool { return t.Ahead > 0 })
	}) {
		all = append(all, chart{"-ahead", "First receives ahead of an older message of the same tenant (each sample)", "first receives", false, count(func(s Sample) int64 { return s.Ahead })})
	}
	if showDup(rs) {
		all = append(all, chart{"-duplicates", "Deliveries of a message already in service (each sample)", "deliveries", false, count(func(s Sample) int64 { return s.Duplicates })})
	}
	var longest time.Duration
	for _, r := range rs {
		longest = max(longest, r.Scenario.Duration.D())
	}
	xu := unitFor(longest)
	names := labels(rs)
	var files []string
	for _, c := range all {
		yu, ylabel := timeUnit{"", 1}, c.y
		if c.wait {
			var top time.Duration
			for _, r := range rs {
				for _, s := range r.Samples {
					top = max(top, c.value(s))
				}
			}
			yu = unitFor(top)
			ylabel = fmt.Sprintf("%s (%s)", c.y, yu.name)
		}
		var panels []charts.Panel
		for ri, res := range rs {
			sc := res.Scenario
			pn := charts.Panel{Title: c.title, Sub: fmt.Sprintf("scenario %s, seed %d, %s simulated (sluice sim)", sc.Title(), sc.Seed, fmtDur(sc.Duration.D())), Spans: spans(sc, xu)}
			if len(rs) > 1 {
				pn.Title, pn.Sub = names[ri], c.title
			}
			index := map[string]int{}
			for _, s := range res.Samples {
				i, ok := index[s.Tenant]
				if !ok {
					i = len(pn.Series)
					index[s.Tenant] = i
					pn.Series = append(pn.Series, charts.Series{Name: s.Tenant})
				}
				y := math.NaN()
				if v := c.value(s); v != unknown {
					y = yu.of(v)
				}
				pn.Series[i].X = append(pn.Series[i].X, xu.of(s.At))
				pn.Series[i].Y = append(pn.Series[i].Y, y)
			}
			panels = append(panels, pn)
		}
		written, err := charts.Panels(base+c.file, "time ("+xu.name+")", ylabel, false, panels)
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

// spans are what a chart of sc shades: the consumers' outages, the
// tenants' bursts (a repeating one's first labelled) and the dependency
// periods, in unit u.
func spans(sc *Scenario, u timeUnit) []charts.Span {
	var out []charts.Span
	for _, o := range sc.Consumers.Outages {
		if len(o) == 2 {
			out = append(out, charts.Span{From: u.of(o[0].D()), To: u.of(o[1].D()), Label: "consumers out"})
		}
	}
	for _, t := range sc.Tenants {
		for _, b := range t.Bursts {
			label := fmt.Sprintf("%s at %g/s", t.Name, b.Rate)
			if b.Every == 0 {
				out = append(out, charts.Span{From: u.of(b.At.D()), To: u.of((b.At + b.Duration).D()), Label: label})
				continue
			}
			label += fmt.Sprintf(" for %s every %s", shortDur(b.Duration.D()), shortDur(b.Every.D()))
			for at := b.At; at < t.Stop; at += b.Every {
				out = append(out, charts.Span{From: u.of(at.D()), To: u.of(min(at+b.Duration, t.Stop).D()), Label: label})
				label = ""
			}
		}
	}
	for _, d := range sc.Consumers.Dependency {
		label := "dependency slow"
		if d.Failure != nil {
			label = "dependency failing"
		}
		out = append(out, charts.Span{From: u.of(d.From.D()), To: u.of(d.To.D()), Label: label})
	}
	return out
}

// tenantsChart draws every tenant's p99 wait, worst first, a line per
// run, against the scenario's hurt line: how many tenants a noisy one
// hurt under each configuration.
func tenantsChart(base string, rs []*Result) ([]string, error) {
	var series []charts.Series
	n := 0
	names := labels(rs)
	for ri, r := range rs {
		ws := make([]float64, 0, len(r.Members))
		for _, m := range r.Members {
			ws = append(ws, max(m.Wait.P99.Seconds(), 0.001)) // a log scale needs more than 0
		}
		slices.SortFunc(ws, func(a, b float64) int { return cmp.Compare(b, a) })
		s := charts.Series{Name: names[ri]}
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
