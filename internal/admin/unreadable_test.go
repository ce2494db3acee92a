package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

// setupDamaged serves a broker that lost bodies: queue "small" (3
// messages) and "big" (300 of 1 KiB) were written in segments of 64 KiB
// and snapshotted, the broker closed, the second segment (big's bodies
// only) removed, and the broker opened again, as in internal/broker's
// TestUnreadableBodiesAreCounted. It returns how many of big's messages
// broker.Verify found unreadable before the start.
func setupDamaged(t *testing.T) (*broker.Broker, *httptest.Server, int) {
	t.Helper()
	cfg := broker.Config{Dir: t.TempDir(), SegmentBytes: 64 << 10, CheckpointBytes: 128 << 10, NoPreallocate: true,
		Logger: slog.New(slog.DiscardHandler)}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name string
		n    int
	}{{"small", 3}, {"big", 300}} {
		if _, err := b.CreateQueue(ctx, q.name, nil, nil); err != nil {
			t.Fatal(err)
		}
		for i := range q.n {
			if _, err := b.Send(ctx, q.name, st.SendInput{Body: fmt.Sprintf("%s-%06d-%s", q.name, i, strings.Repeat("x", 1000))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(cfg.Dir, "log-*.seg"))
	slices.Sort(segs)
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %v", segs)
	}
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	rep, err := broker.Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lost := rep.Unreadable()
	if lost == 0 || lost == 300 {
		t.Fatalf("setup: %d of 300 unreadable", lost)
	}
	if b, err = broker.Open(cfg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Guard(admin.New(b, admin.Options{}), admin.GuardOptions{}))
	t.Cleanup(func() { srv.Close(); b.Close() })
	return b, srv, lost
}

// scrape returns the value of each sluice_ series of /metrics, by its
// line's name and labels.
func scrape(t *testing.T, srv *httptest.Server) map[string]float64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "sluice_") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q", l)
		}
		out[l[:i]] = v
	}
	return out
}

// TestUnreadableFigures: messages whose bodies were lost are counted on
// /metrics, in /api/store and per queue in /api/queues; none of it is
// silent. A drain then gives segments back, which is counted too.
func TestUnreadableFigures(t *testing.T) {
	b, srv, lost := setupDamaged(t)
	m := scrape(t, srv)
	for series, want := range map[string]float64{
		`sluice_queue_unreadable_total{queue="big"}`:         float64(lost),
		`sluice_queue_unreadable_total{queue="small"}`:       0,
		`sluice_messages_unreadable_total`:                   float64(lost),
		`sluice_store_bad_releases_total`:                    0,
		`sluice_queue_messages{queue="big",state="visible"}`: float64(300 - lost),
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if _, ok := m[`sluice_store_segments_removed_total`]; !ok {
		t.Error("sluice_store_segments_removed_total missing")
	}
	var store map[string]any
	if code := call(t, srv, "GET", "/api/store", "", &store); code != 200 ||
		store["unreadable"] != float64(lost) || store["bad_releases"] != float64(0) || store["segments_removed"] == nil {
		t.Fatalf("/api/store: %d %v", code, store)
	}
	var qs []map[string]any
	call(t, srv, "GET", "/api/queues", "", &qs)
	unreadable := map[string]any{}
	for _, q := range qs {
		unreadable[q["name"].(string)] = q["unreadable"]
	}
	if unreadable["big"] != float64(lost) || unreadable["small"] != float64(0) {
		t.Fatalf("/api/queues unreadable: %v", unreadable)
	}
	var q map[string]any
	if code := call(t, srv, "GET", "/api/queues/big", "", &q); code != 200 || q["unreadable"] != float64(lost) {
		t.Fatalf("/api/queues/big: %d %v", code, q)
	}

	// Drain big: the segments that held only its bodies go.
	removed := store["segments_removed"].(float64)
	for {
		ms, err := b.Receive(ctx, "big", st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, msg := range ms {
			if err := b.Delete(ctx, "big", msg.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	call(t, srv, "GET", "/api/store", "", &store)
	m = scrape(t, srv)
	if got := store["segments_removed"].(float64); got <= removed || m[`sluice_store_segments_removed_total`] != got {
		t.Fatalf("after a drain: segments_removed %v (before %v), metric %v", got, removed, m[`sluice_store_segments_removed_total`])
	}
}
