package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

// What the admin address refuses, over real HTTP: a stranger without the
// token, another site's page in an operator's browser (a text/plain or
// cross-origin POST, a DNS-rebound Host), and what /metrics bounds.

func guarded(t *testing.T, o admin.GuardOptions) (*broker.Broker, *httptest.Server) {
	t.Helper()
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", admin.New(b, admin.Options{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := httptest.NewServer(admin.Guard(mux, o))
	t.Cleanup(func() { srv.Close(); b.Close() })
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := b.Send(ctx, "q", st.SendInput{Body: fmt.Sprint("secret ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return b, srv
}

type answer struct {
	status int
	header http.Header
	code   string
	body   string
}

func do(t *testing.T, srv *httptest.Server, method, path string, hdr map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return sendFor(t, srv, req)
}

// sendFor sends req to srv and reads its answer.
func sendFor(t *testing.T, srv *httptest.Server, req *http.Request) answer {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct{ Code string }
	_ = json.Unmarshal(raw, &e)
	return answer{status: resp.StatusCode, header: resp.Header, code: e.Code, body: string(raw)}
}

func visible(t *testing.T, b *broker.Broker) string {
	t.Helper()
	a, err := b.GetQueueAttributes("q", []string{"ApproximateNumberOfMessages"})
	if err != nil {
		t.Fatal(err)
	}
	return a["ApproximateNumberOfMessages"]
}

// TestAdminToken: with a token, nothing but /healthz answers without it;
// Bearer and Basic (the token as password, for a browser's prompt) do.
func TestAdminToken(t *testing.T) {
	_, srv := guarded(t, admin.GuardOptions{Token: "s3cret-token"})
	for _, path := range []string{"/api/queues/q/messages", "/api/queues", "/api/topics", "/metrics", "/ui/"} {
		a := do(t, srv, "GET", path, nil)
		if a.status != 401 || !strings.Contains(a.header.Get("WWW-Authenticate"), "Basic") || strings.Contains(a.body, "secret") {
			t.Errorf("GET %s without the token: %d %q %q", path, a.status, a.header.Get("WWW-Authenticate"), a.body)
		}
	}
	if a := do(t, srv, "GET", "/api/queues/q/messages", map[string]string{"Authorization": "Bearer wrong"}); a.status != 401 {
		t.Errorf("a wrong token: %d", a.status)
	}
	if a := do(t, srv, "GET", "/api/queues/q/messages", map[string]string{"Authorization": "Bearer s3cret-token"}); a.status != 200 || !strings.Contains(a.body, "secret 0") {
		t.Errorf("Bearer: %d %s", a.status, a.body)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/queues/q/messages", nil)
	req.SetBasicAuth("operator", "s3cret-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("Basic: %d", resp.StatusCode)
	}
	if a := do(t, srv, "GET", "/healthz", nil); a.status != 200 {
		t.Errorf("/healthz without the token: %d", a.status)
	}
}

// TestCrossSiteWritesRefused: a change needs a JSON body (a form or
// text/plain POST, which another site's page may send without asking, is
// refused), and a browser's Origin or Sec-Fetch-Site must not name another
// site. The queue keeps its messages; the same request from the dashboard
// itself goes through.
func TestCrossSiteWritesRefused(t *testing.T) {
	b, srv := guarded(t, admin.GuardOptions{})
	for name, hdr := range map[string]map[string]string{
		"text/plain":           {"Content-Type": "text/plain"},
		"form":                 {"Content-Type": "application/x-www-form-urlencoded"},
		"no content type":      {},
		"cross origin":         {"Content-Type": "application/json", "Origin": "http://evil.example"},
		"cross site (fetch)":   {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
		"origin of other port": {"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"},
	} {
		a := do(t, srv, "POST", "/api/queues/q/purge", hdr)
		if a.status != 415 && a.status != 403 || a.code == "" {
			t.Errorf("%s purge: %d %s", name, a.status, a.body)
		}
		if n := visible(t, b); n != "3" {
			t.Fatalf("%s purge went through: %s messages left", name, n)
		}
	}
	a := do(t, srv, "POST", "/api/queues/q/purge", map[string]string{"Content-Type": "application/json", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"})
	if a.status != 200 || visible(t, b) != "0" {
		t.Fatalf("same-origin JSON purge: %d %s, %s left", a.status, a.body, visible(t, b))
	}
}

// TestForeignHostRefused: without a token only loopback Host names (and
// --admin-allowed-hosts) are answered, so a page whose DNS name is rebound
// to 127.0.0.1 reads nothing; with a token the token is the guard.
func TestForeignHostRefused(t *testing.T) {
	_, srv := guarded(t, admin.GuardOptions{})
	if a := do(t, srv, "GET", "/api/queues/q/messages", map[string]string{"Host": "evil.example"}); a.status != 403 || strings.Contains(a.body, "secret") {
		t.Errorf("foreign Host: %d %s", a.status, a.body)
	}
	for _, h := range []string{"localhost:9325", "127.0.0.1", "[::1]:9325"} {
		if a := do(t, srv, "GET", "/api/queues", map[string]string{"Host": h}); a.status != 200 {
			t.Errorf("Host %s: %d", h, a.status)
		}
	}
	_, srv = guarded(t, admin.GuardOptions{AllowedHosts: []string{"sluice.internal"}})
	if a := do(t, srv, "GET", "/api/queues", map[string]string{"Host": "sluice.internal:9325"}); a.status != 200 {
		t.Errorf("an allowed host: %d", a.status)
	}
	if a := do(t, srv, "GET", "/api/queues", map[string]string{"Host": "evil.example"}); a.status != 403 {
		t.Errorf("foreign Host with an allow list: %d", a.status)
	}
	_, srv = guarded(t, admin.GuardOptions{Token: "t"})
	if a := do(t, srv, "GET", "/api/queues", map[string]string{"Host": "sluice.example.com", "Authorization": "Bearer t"}); a.status != 200 {
		t.Errorf("any Host with the token: %d", a.status)
	}
}

// TestMetricsBounded: past the bound, queues are summed under
// queue="_others" (the largest backlogs keep their own series), and the
// sums are kept.
func TestMetricsBounded(t *testing.T) {
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := httptest.NewServer(admin.New(b, admin.Options{MaxQueueSeries: 10}))
	defer srv.Close()
	total := 0
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("q%02d", i)
		if _, err := b.CreateQueue(ctx, name, nil, nil); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < i%7; j++ {
			b.Send(ctx, name, st.SendInput{Body: "x"})
			total++
		}
	}
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	queues, visibleSum := map[string]bool{}, 0
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, `sluice_queue_messages{queue="`); ok {
			q, tail, _ := strings.Cut(rest, `"`)
			queues[q] = true
			if strings.Contains(tail, `state="visible"`) {
				var n int
				fmt.Sscanf(tail[strings.LastIndex(tail, " ")+1:], "%d", &n)
				visibleSum += n
			}
		}
	}
	if len(queues) != 11 || !queues["_others"] {
		t.Errorf("%d queues with series (want 10 and _others): %v", len(queues), queues)
	}
	if visibleSum != total {
		t.Errorf("visible messages over the series: %d, want %d", visibleSum, total)
	}
	if !strings.Contains(string(raw), "sluice_queues_without_series 50") || !strings.Contains(string(raw), "sluice_store_disk_alarm 0") {
		t.Errorf("missing the summed-queue count or the disk alarm")
	}
}
