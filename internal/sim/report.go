package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
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
