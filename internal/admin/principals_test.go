package admin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sigv4"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Two principals and an operator on one admin address, over real HTTP
// with requests signed as the AWS SDK signs them: each principal reaches
// only its own queues and topics through every endpoint (anything else
// answered as missing, and left as it was), the operator's token sees
// both, and what is not properly signed is refused before its body is
// read.

const operatorToken = "operator-token-0123456789"

var principalsJSON = `{"principals": [
  {"name": "team-a", "access_key_id": "AKIDTEAMA", "secret_access_key": "secret-a", "queues": ["a-*"]},
  {"name": "team-b", "access_key_id": "AKIDTEAMB", "secret_access_key": "secret-b", "queues": ["b-*"]}
]}`

type principalsSetup struct {
	b   *broker.Broker
	srv *httptest.Server
	// refusals counts the purges the address refused (4xx).
	refusals atomic.Int64
}

// statusWriter keeps the status an answer was written with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

func setupPrincipals(t *testing.T) *principalsSetup {
	t.Helper()
	creds, err := sigv4.ParseCredentials([]byte(principalsJSON))
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", admin.New(b, admin.Options{}))
	p := &principalsSetup{b: b}
	guard := admin.Guard(mux, admin.GuardOptions{Token: operatorToken, Credentials: creds})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		guard.ServeHTTP(sw, r)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/purge") && sw.status >= 400 && sw.status < 500 {
			p.refusals.Add(1)
		}
	}))
	t.Cleanup(func() { p.srv.Close(); b.Close() })
	for _, team := range []string{"a", "b"} {
		dlq := team + "-dlq"
		info, err := b.CreateQueue(ctx, dlq, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"1"}`, info.ARN)
		if _, err := b.CreateQueue(ctx, team+"-q", map[string]string{"RedrivePolicy": policy}, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := b.Send(ctx, dlq, st.SendInput{Body: fmt.Sprintf("%s dead %d", team, i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Send(ctx, team+"-q", st.SendInput{Body: fmt.Sprintf("%s live %d", team, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := b.CreateTopic(ctx, st.TopicInfo{Name: team + "-t"}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// as is who sends a request: a principal's keys, the operator's token,
// or nobody.
type as struct {
	key, secret, token string
	at                 time.Time // the signature's date (zero: now)
}

var (
	teamA    = as{key: "AKIDTEAMA", secret: "secret-a"}
	teamB    = as{key: "AKIDTEAMB", secret: "secret-b"}
	operator = as{token: operatorToken}
	nobody   = as{}
)

// request builds a request as who, signed (SigV4, as the SDK signs) when
// who has keys.
func (p *principalsSetup) request(t *testing.T, who as, method, path, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case who.token != "":
		req.Header.Set("Authorization", "Bearer "+who.token)
	case who.key != "":
		sum := sha256.Sum256([]byte(body))
		hash := hex.EncodeToString(sum[:])
		req.Header.Set("X-Amz-Content-Sha256", hash)
		at := who.at
		if at.IsZero() {
			at = time.Now()
		}
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: who.key, SecretAccessKey: who.secret}, req, hash, "sluice", "us-east-1", at)
		if err != nil {
			t.Fatal(err)
		}
	}
	return req
}

func (p *principalsSetup) send(t *testing.T, req *http.Request) answer {
	t.Helper()
	return sendFor(t, p.srv, req)
}

func (p *principalsSetup) do(t *testing.T, who as, method, path, body string) answer {
	t.Helper()
	return p.send(t, p.request(t, who, method, path, body))
}

// names lists the "name" of each object of a JSON array answer.
func names(t *testing.T, r answer) []string {
	t.Helper()
	var items []struct{ Name string }
	if err := json.Unmarshal([]byte(r.body), &items); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

// endpoints are every admin endpoint about one team's resources, as
// that team would call them.
func endpoints(team string) []struct{ method, path, body string } {
	q, dlq, topic := team+"-q", team+"-dlq", team+"-t"
	return []struct{ method, path, body string }{
		{"GET", "/api/queues/" + q, ""},
		{"GET", "/api/queues/" + q + "/history", ""},
		{"GET", "/api/queues/" + q + "/tenants", ""},
		{"GET", "/api/queues/" + q + "/tenants/x", ""},
		{"PUT", "/api/queues/" + q + "/tenants/x", `{"weight": 2}`},
		{"POST", "/api/queues/" + q + "/drop-before", `{"before": "2000-01-01T00:00:00Z"}`},
		{"GET", "/api/queues/" + dlq + "/messages", ""},
		{"POST", "/api/queues/" + dlq + "/purge", `{"contains": "nothing matches this"}`},
		{"POST", "/api/queues/" + dlq + "/redrive", `{"contains": "nothing matches this"}`},
		{"GET", "/api/movetasks?source=" + dlq, ""},
		{"GET", "/api/topics/" + topic, ""},
	}
}

func TestPrincipalsSeeOnlyTheirOwn(t *testing.T) {
	p := setupPrincipals(t)
	// Each team's own: every endpoint answers.
	for _, team := range []struct {
		name string
		who  as
	}{{"a", teamA}, {"b", teamB}} {
		for _, e := range endpoints(team.name) {
			if r := p.do(t, team.who, e.method, e.path, e.body); r.status >= 300 {
				t.Errorf("team %s: %s %s on its own: %d %s", team.name, e.method, e.path, r.status, r.body)
			}
		}
	}
	// The other team's: answered as what team a's own names that do not
	// exist get, every one, byte for byte.
	missing := endpoints("a-none")
	for i, e := range endpoints("b") {
		r := p.do(t, teamA, e.method, e.path, e.body)
		m := missing[i]
		want := p.do(t, teamA, m.method, m.path, m.body)
		if r.status != want.status || r.status < 400 || r.body != want.body {
			t.Errorf("team a: %s %s on team b's: %d %s, want what a missing one gets: %d %s", e.method, e.path, r.status, r.body, want.status, want.body)
		}
	}
	// A redrive or a move into the other team's queue, out of its own.
	for _, body := range []string{`{"to": "b-q"}`, `{"to": "b-q", "contains": "dead"}`, `{"to": "b-q", "contains": "dead", "rate": 5}`} {
		if r := p.do(t, teamA, "POST", "/api/queues/a-dlq/redrive", body); r.status != http.StatusNotFound {
			t.Errorf("team a: redrive %s into team b's queue: %d %s, want 404", body, r.status, r.body)
		}
	}
	for _, q := range []string{"b-q", "b-dlq"} {
		if n := visibleIn(t, p.b, q); n != "3" {
			t.Errorf("%s holds %s messages after team a's tries, want 3 (nothing moved, purged or dropped)", q, n)
		}
	}
	// Lists: each team its own; the operator both.
	for _, c := range []struct {
		who       as
		wantQ     string
		wantTopic string
	}{{teamA, "a-dlq a-q", "a-t"}, {teamB, "b-dlq b-q", "b-t"}, {operator, "a-dlq a-q b-dlq b-q", "a-t b-t"}} {
		if got := strings.Join(names(t, p.do(t, c.who, "GET", "/api/queues", "")), " "); got != c.wantQ {
			t.Errorf("%+v lists queues %q, want %q", c.who, got, c.wantQ)
		}
		if got := strings.Join(names(t, p.do(t, c.who, "GET", "/api/topics", "")), " "); got != c.wantTopic {
			t.Errorf("%+v lists topics %q, want %q", c.who, got, c.wantTopic)
		}
	}
	// The operator's alone: server-wide views.
	for _, path := range []string{"/metrics", "/api/store", "/api/cluster", "/debug/pprof/"} {
		if r := p.do(t, teamA, "GET", path, ""); r.status != http.StatusForbidden || r.code != "OperatorOnly" {
			t.Errorf("team a: GET %s: %d %s, want 403 OperatorOnly", path, r.status, r.body)
		}
	}
	if r := p.do(t, operator, "GET", "/api/store", ""); r.status != http.StatusOK {
		t.Errorf("operator: GET /api/store: %d %s", r.status, r.body)
	}
}

func visibleIn(t *testing.T, b *broker.Broker, q string) string {
	t.Helper()
	a, err := b.GetQueueAttributes(q, []string{"ApproximateNumberOfMessages"})
	if err != nil {
		t.Fatal(err)
	}
	return a["ApproximateNumberOfMessages"]
}

// TestBadlySignedRefused: unsigned, wrongly signed, by an unknown key,
// expired and replayed requests are refused, and change nothing.
func TestBadlySignedRefused(t *testing.T) {
	p := setupPrincipals(t)
	purge := func(who as) *http.Request { return p.request(t, who, "POST", "/api/queues/a-dlq/purge", `{}`) }
	cases := []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"unsigned", purge(nobody), http.StatusUnauthorized, "Unauthorized"},
		{"wrong secret", purge(as{key: "AKIDTEAMA", secret: "not-secret-a"}), http.StatusForbidden, "SignatureDoesNotMatch"},
		{"unknown key", purge(as{key: "AKIDNOBODY", secret: "x"}), http.StatusForbidden, "InvalidClientTokenId"},
		{"dated 20 minutes ago", purge(as{key: "AKIDTEAMA", secret: "secret-a", at: time.Now().Add(-20 * time.Minute)}), http.StatusForbidden, "RequestExpired"},
		{"dated 20 minutes ahead", purge(as{key: "AKIDTEAMA", secret: "secret-a", at: time.Now().Add(20 * time.Minute)}), http.StatusForbidden, "RequestExpired"},
		{"wrong token", purge(as{token: "not-the-token"}), http.StatusUnauthorized, "Unauthorized"},
	}
	// A body changed after signing.
	tampered := p.request(t, teamA, "POST", "/api/queues/a-dlq/purge", `{"contains": "x"}`)
	tampered.Body = io.NopCloser(strings.NewReader(`{"contains": "y"}`))
	cases = append(cases, struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{"body changed after signing", tampered, http.StatusBadRequest, "XAmzContentSHA256Mismatch"})
	for _, c := range cases {
		if r := p.send(t, c.req); r.status != c.status || r.code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}
	if n := visibleIn(t, p.b, "a-dlq"); n != "3" {
		t.Errorf("a-dlq holds %s messages after the refused purges, want 3", n)
	}
	// The same signed request twice: the second is a replay.
	req := p.request(t, teamA, "GET", "/api/queues/a-q", "")
	again := req.Clone(context.Background())
	if r := p.send(t, req); r.status != http.StatusOK {
		t.Fatalf("the first time: %d %s", r.status, r.body)
	}
	if r := p.send(t, again); r.status != http.StatusForbidden || r.code != "RequestReplayed" {
		t.Errorf("the same signed request again: %d %s, want 403 RequestReplayed", r.status, r.body)
	}
}

// countingBody is a large body that counts what was read of it.
type countingBody struct {
	left, read atomic.Int64
}

func (c *countingBody) Read(b []byte) (int, error) {
	n := min(int64(len(b)), c.left.Load())
	if n == 0 {
		return 0, io.EOF
	}
	clear(b[:n])
	c.left.Add(-n)
	c.read.Add(n)
	return int(n), nil
}

// TestRefusedBeforeTheBody: a 256 MiB body, unsigned, signed by an
// unknown key, expired, or wrongly signed (its signature covers the
// body's hash, in X-Amz-Content-Sha256, as the SDKs send it), is refused
// without being read: the client gets its answer having sent no more
// than the socket buffers hold.
func TestRefusedBeforeTheBody(t *testing.T) {
	p := setupPrincipals(t)
	const size = 256 << 20
	for _, who := range []as{nobody, {key: "AKIDNOBODY", secret: "x"}, {key: "AKIDTEAMA", secret: "secret-a", at: time.Now().Add(-time.Hour)},
		{key: "AKIDTEAMA", secret: "not-secret-a"}} { // wrongly signed: its signature covers the body's hash, checked first
		body := &countingBody{}
		body.left.Store(size)
		req := p.request(t, who, "POST", "/api/queues/a-dlq/purge", "")
		req.Body, req.ContentLength = io.NopCloser(body), size
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("%+v: %s, want a refusal", who, resp.Status)
			}
		}
		if n := body.read.Load(); n > 32<<20 {
			t.Errorf("%+v: the client sent %d MiB of a refused 256 MiB body", who, n>>20)
		}
	}
	// A replay: a signed request handed to the address again as it was,
	// with a body that fails the test if anything reads it: its signature
	// covers the body's hash, so it is refused as a replay unread.
	first := p.request(t, teamA, "POST", "/api/queues/a-dlq/purge", `{"contains":"nothing matches"}`)
	again := first.Clone(context.Background())
	if r := p.send(t, first); r.status != http.StatusOK {
		t.Fatalf("the first time: %d %s", r.status, r.body)
	}
	again.RequestURI, again.Body = "", io.NopCloser(unreadable{t})
	again.Host = strings.TrimPrefix(p.srv.URL, "http://")
	rec := httptest.NewRecorder()
	p.srv.Config.Handler.ServeHTTP(rec, again)
	if !strings.Contains(rec.Body.String(), "RequestReplayed") {
		t.Errorf("the replay: %d %s, want RequestReplayed", rec.Code, rec.Body)
	}
	// A signed request over the body limit is refused, not read whole.
	big := bytes.Repeat([]byte(" "), 1<<20)
	req := p.request(t, teamA, "POST", "/api/queues/a-dlq/purge", `{}`+string(big))
	if r := p.send(t, req); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a signed 1 MiB body: %d %s, want 413", r.status, r.body)
	}
}

// unreadable is a body no one may read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("a refused request's body was read")
	return 0, io.EOF
}
