package sim

import (
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
// tenant, and the queue's own counters. Nothing in it depends on the
// machine or the wall clock, so a scenario and seed print the same bytes.
func (res *Result) WriteSummary(w io.Writer) error {
	sc := res.Scenario
	b := &strings.Builder{}
	fmt.Fprintf(b, "scenario %s (seed %d): %s simulated, %d messages sent, %d events\n", sc.Name, sc.Seed, fmtDur(sc.Duration.D()), res.Messages, res.Events)
	if sc.Description != "" {
		fmt.Fprintf(b, "%s\n", strings.TrimSpace(sc.Description))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TENANT\tSENT\tTHROTTLED\tREFUSED\tRECEIVED\tDELETED\tFAILED\tLATE\tWAIT P50\tWAIT P99\tWAIT MAX\tDRAINED\tBACKLOG\t")
	for _, t := range res.Tenants {
		drained := "-"
		if t.Drained >= 0 {
			drained = fmtDur(t.Drained)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", t.Name, t.Sent, t.Throttled, t.Refused, t.Received, t.Deleted,
			t.Failed, t.Late, fmtDur(t.Wait.P50), fmtDur(t.Wait.P99), fmtDur(t.Wait.Max), drained, t.Backlog)
	}
	tw.Flush()
	q := res.Queue
	fmt.Fprintf(b, "\nqueue %s: sent %d, received %d, deleted %d, throttled %d, empty receives %d, sidelined %d, spilled %d, dead-lettered %d, retried %d",
		q.Name, q.Sent, q.Received, q.Deleted, q.Throttled, q.EmptyReceives, q.Sidelined, q.Spilled, q.DeadLettered, q.Retried)
	for _, k := range slices.Sorted(maps.Keys(q.Dropped)) {
		if q.Dropped[k] > 0 {
			fmt.Fprintf(b, ", dropped (%s) %d", k, q.Dropped[k])
		}
	}
	fmt.Fprintf(b, "\nat the end: %d visible, %d in flight, %d delayed, oldest %s\n", q.Visible, q.InFlight, q.Delayed, fmtDur(q.OldestAge))
	b.WriteString("\nWAIT: from send to first receive (the owner's timestamps). DRAINED: from the tenant's last send until each of\nits messages was deleted (-: not within the run). LATE: served after the message was delivered again.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes the time series: a row per sample per tenant. Times and
// ages are in seconds.
func (res *Result) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"time_s", "tenant", "sent", "received", "deleted", "backlog", "in_flight", "sidelined", "oldest_age_s",
		"first_receives", "wait_p50_s", "wait_p99_s", "wait_max_s"})
	for _, s := range res.Samples {
		cw.Write([]string{secsStr(s.At), s.Tenant, itoa(s.Sent), itoa(s.Received), itoa(s.Deleted), strconv.Itoa(s.Backlog),
			strconv.Itoa(s.InFlight), strconv.Itoa(s.Sidelined), secsStr(s.Oldest), itoa(s.FirstReceives),
			secsStr(s.Wait.P50), secsStr(s.Wait.P99), secsStr(s.Wait.Max)})
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
	sc := res.Scenario
	var spans []charts.Span
	for _, o := range sc.Consumers.Outages {
		if len(o) == 2 {
			spans = append(spans, charts.Span{From: o[0].D().Minutes(), To: o[1].D().Minutes(), Label: "consumers out"})
		}
	}
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
	sub := fmt.Sprintf("scenario %s, seed %d, %s simulated (sluice sim)", sc.Name, sc.Seed, fmtDur(sc.Duration.D()))
	var files []string
	for _, c := range all {
		var series []charts.Series
		index := map[string]int{}
		for _, s := range res.Samples {
			i, ok := index[s.Tenant]
			if !ok {
				i = len(series)
				index[s.Tenant] = i
				series = append(series, charts.Series{Name: s.Tenant})
			}
			series[i].X = append(series[i].X, s.At.Minutes())
			series[i].Y = append(series[i].Y, c.value(s))
		}
		written, err := charts.Lines(base+c.file, c.title, sub, "time (minutes)", c.y, false, series, spans)
		files = append(files, written...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
