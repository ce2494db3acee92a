package forward_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/sqs/respconn"
)

// startNATS starts an in-process NATS server on a free loopback port;
// maxPayload 0 keeps the server's default.
func startNATS(t testing.TB, maxPayload int32) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// connect connects to s as a client named name, closed when the test ends.
func connect(t testing.TB, s *server.Server, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// serve serves subject in queue group "owners" on nc with h, stopped when
// the test ends.
func serve(t testing.TB, nc *nats.Conn, subject string, h http.HandlerFunc) *forward.Server {
	t.Helper()
	srv, err := forward.Serve(nc, subject, "owners", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// pair is a NATS server with an owner's connection and a forwarder's.
func pair(t testing.TB, maxPayload int32) (owner, fwd *nats.Conn) {
	t.Helper()
	s := startNATS(t, maxPayload)
	return connect(t, s, "node-owner"), connect(t, s, "node-a")
}

func within(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// seen is what the owner's handler saw of a request.
type seen struct {
	Method, RequestURI, Path, RawQuery, Host, RemoteAddr string
	Header                                               http.Header
	Body                                                 []byte
	ContentLength                                        int64
	NoBody, TLS, Forwarded                               bool
	From                                                 string
}

func see(t testing.TB, r *http.Request) seen {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
	}
	from, fwd := forward.ForwardedFrom(r)
	return seen{
		Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Host: r.Host, RemoteAddr: r.RemoteAddr, Header: r.Header.Clone(), Body: body,
		ContentLength: r.ContentLength, NoBody: r.Body == http.NoBody, TLS: r.TLS != nil,
		Forwarded: fwd || forward.Forwarded(r), From: from,
	}
}

func TestRoundTrip(t *testing.T) {
	owner, fwd := pair(t, 0)
	got := make(chan seen, 1)
	serve(t, owner, "sluice.test.p.1", func(w http.ResponseWriter, r *http.Request) {
		got <- see(t, r)
		h := w.Header()
		h["X-Resp"] = []string{"1", "2"}
		h.Set("Status", "404")             // NATS's no-responders header name
		h.Set("Nats-Msg-Id", "dup")        // a JetStream header name
		h.Set("Sluice-Fwd-Status", "599")  // ours
		h.Set("Connection", "close")       // hop-by-hop
		h.Set("Transfer-Encoding", "gzip") // hop-by-hop
		h.Set("Content-Type", "text/xml")
		h["x-amzn-RequestId"] = []string{"req-1"} // canonicalised on the way
		w.WriteHeader(http.StatusCreated)
		h.Set("X-Late", "after the status") // not sent, as with net/http
		_, _ = w.Write([]byte("<ok>"))
		_, _ = w.Write([]byte("\x00\r\n</ok>"))
	})

	body := []byte("Action=SendMessage&MessageBody=a%2Bb\x00\r\n\xff")
	r := httptest.NewRequest("PATCH", "/123456789012/q%20name/x?Action=SendMessage&Empty=&Dup=1&Dup=2&Esc=a%2Fb", bytes.NewReader(body))
	r.Host = "sqs.example.com:9324"
	r.RemoteAddr = "192.0.2.7:53122"
	r.TLS = &tls.ConnectionState{}
	r.Header = http.Header{
		"Content-Type":        {"application/x-www-form-urlencoded"},
		"Content-Length":      {fmt.Sprint(len(body))},
		"X-Amz-Date":          {"20250101T000000Z"},
		"X-Multi":             {"a", "b, c", ""},
		"x-lower-case":        {"v"},
		"X-Utf8":              {"héllo wörld"},
		"X-Inner":             {"a   b"},
		"Status":              {"503"},
		"Description":         {"d"},
		"Nats-Trace-Dest":     {"trace.stolen"},
		"Nats-Trace-Only":     {"true"}, // would stop delivery, if it reached NATS as such
		"Sluice-Fwd-Method":   {"DELETE"},
		"Sluice-Fwd-Hdr-X":    {"y"},
		"Host":                {"evil.example.com"},
		"Connection":          {"keep-alive, X-Conn-Named"},
		"X-Conn-Named":        {"gone"},
		"Keep-Alive":          {"timeout=5"},
		"Te":                  {"trailers"},
		"Upgrade":             {"h2c"},
		"Proxy-Authorization": {"Basic eDp5"},
	}
	resp, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.1", r, body)
	if err != nil {
		t.Fatal(err)
	}

	want := seen{
		Method: "PATCH", RequestURI: "/123456789012/q%20name/x?Action=SendMessage&Empty=&Dup=1&Dup=2&Esc=a%2Fb",
		Path: "/123456789012/q name/x", RawQuery: "Action=SendMessage&Empty=&Dup=1&Dup=2&Esc=a%2Fb",
		Host: "sqs.example.com:9324", RemoteAddr: "192.0.2.7:53122",
		Header: http.Header{
			"Content-Type":      {"application/x-www-form-urlencoded"},
			"Content-Length":    {fmt.Sprint(len(body))},
			"X-Amz-Date":        {"20250101T000000Z"},
			"X-Multi":           {"a", "b, c", ""},
			"X-Lower-Case":      {"v"},
			"X-Utf8":            {"héllo wörld"},
			"X-Inner":           {"a   b"},
			"Status":            {"503"},
			"Description":       {"d"},
			"Nats-Trace-Dest":   {"trace.stolen"},
			"Nats-Trace-Only":   {"true"},
			"Sluice-Fwd-Method": {"DELETE"},
			"Sluice-Fwd-Hdr-X":  {"y"},
		},
		Body: body, ContentLength: int64(len(body)), TLS: true, Forwarded: true, From: "node-a",
	}
	if g := <-got; !reflect.DeepEqual(g, want) {
		t.Errorf("the owner saw\n%+v\nwant\n%+v", g, want)
	}
	wantResp := &forward.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"X-Resp":            {"1", "2"},
			"Status":            {"404"},
			"Nats-Msg-Id":       {"dup"},
			"Sluice-Fwd-Status": {"599"},
			"Content-Type":      {"text/xml"},
			"X-Amzn-Requestid":  {"req-1"},
		},
		Body: []byte("<ok>\x00\r\n</ok>"),
	}
	if !reflect.DeepEqual(resp, wantResp) {
		t.Errorf("response\n%+v\nwant\n%+v", resp, wantResp)
	}

	rec := httptest.NewRecorder()
	rec.Header().Set("X-Resp", "local") // replaced
	rec.Header().Set("X-Local", "kept")
	resp.Write(rec)
	if rec.Code != http.StatusCreated || rec.Body.String() != "<ok>\x00\r\n</ok>" {
		t.Errorf("written: %d %q", rec.Code, rec.Body.String())
	}
	if h := rec.Header(); !reflect.DeepEqual(h["X-Resp"], []string{"1", "2"}) || h.Get("X-Local") != "kept" || h.Get("Content-Length") != "12" {
		t.Errorf("written headers: %v", h)
	}
}

func TestRoundTripEmptyAndDefaults(t *testing.T) {
	owner, fwd := pair(t, 0)
	got := make(chan seen, 1)
	serve(t, owner, "sluice.test.p.2", func(w http.ResponseWriter, r *http.Request) {
		got <- see(t, r)
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "42")
			if _, err := w.Write([]byte("no body for HEAD")); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("HEAD write: %v", err)
			}
		}
		// Writes nothing: a 200, as with net/http.
	})
	for _, tc := range []struct {
		name   string
		client forward.Client
		method string
		from   string
	}{
		{"get", forward.Client{Conn: fwd}, "GET", "node-a"},
		{"head with node", forward.Client{Conn: fwd, Node: "n7"}, "HEAD", "n7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/", nil)
			resp, err := tc.client.Do(within(t, 10*time.Second), "sluice.test.p.2", r, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := <-got
			if g.Method != tc.method || g.ContentLength != 0 || !g.NoBody || g.TLS || g.From != tc.from || g.RequestURI != "/" || g.Host != "example.com" {
				t.Errorf("the owner saw %+v", g)
			}
			if resp.Status != http.StatusOK || len(resp.Body) != 0 {
				t.Errorf("response %+v", resp)
			}
			if tc.method == "HEAD" && resp.Header.Get("Content-Length") != "42" {
				t.Errorf("HEAD response headers %v", resp.Header)
			}
		})
	}
}

// A request that was forwarded to this node is never forwarded again.
func TestNoSecondHop(t *testing.T) {
	owner, _ := pair(t, 0)
	serve(t, owner, "sluice.test.p.3", func(w http.ResponseWriter, r *http.Request) {
		_, err := forward.Do(r.Context(), owner, "sluice.test.p.3", r, nil)
		if !errors.Is(err, forward.ErrLoop) {
			t.Errorf("forwarding a forwarded request: %v, want ErrLoop", err)
		}
	})
	if forward.Forwarded(httptest.NewRequest("GET", "/", nil)) {
		t.Error("a direct request counts as forwarded")
	}
	if _, err := forward.Do(within(t, 10*time.Second), owner, "sluice.test.p.3", httptest.NewRequest("GET", "/", nil), nil); err != nil {
		t.Fatal(err)
	}
}

// A Server on a wildcard subject sees the subject each request came on.
func TestSubject(t *testing.T) {
	owner, fwd := pair(t, 0)
	serve(t, owner, "sluice.test.n.a.*", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, forward.Subject(r))
	})
	if s := forward.Subject(httptest.NewRequest("GET", "/", nil)); s != "" {
		t.Errorf("a direct request's subject: %q, want none", s)
	}
	for _, subject := range []string{"sluice.test.n.a.3", "sluice.test.n.a.12"} {
		resp, err := forward.Do(within(t, 10*time.Second), fwd, subject, httptest.NewRequest("GET", "/", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.Body) != subject {
			t.Errorf("the handler saw subject %q, want %q", resp.Body, subject)
		}
	}
}

// The NATS client's default request timeout (nats.DefaultTimeout, 2 s)
// plays no part: a request lasts as long as its context allows.
func TestLongerThanNATSDefaultTimeout(t *testing.T) {
	t.Parallel()
	owner, fwd := pair(t, 0)
	serve(t, owner, "sluice.test.p.4", func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		if left := time.Until(dl); !ok || left < 8*time.Second || left > 10*time.Second {
			t.Errorf("owner's deadline in %v (set %v), want about 10 s", left, ok)
		}
		select {
		case <-time.After(nats.DefaultTimeout + time.Second): // a long poll
			_, _ = io.WriteString(w, "waited")
		case <-r.Context().Done():
			t.Error("the owner's context ended early")
		}
	})
	resp, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.4", httptest.NewRequest("POST", "/", nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "waited" {
		t.Errorf("body %q", resp.Body)
	}
}

func TestDeadline(t *testing.T) {
	owner, fwd := pair(t, 0)
	ended, release := make(chan error, 1), make(chan struct{})
	serve(t, owner, "sluice.test.p.5", func(w http.ResponseWriter, r *http.Request) {
		<-release
		<-r.Context().Done() // the deadline travelled with the request
		ended <- r.Context().Err()
	})
	_, err := forward.Do(within(t, 300*time.Millisecond), fwd, "sluice.test.p.5", httptest.NewRequest("POST", "/", nil), nil)
	close(release)
	if !errors.Is(err, forward.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, forward.ErrNoOwner) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("owner's context ended with %v", err)
	}
	// A context already past its deadline is not sent.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := forward.Do(ctx, fwd, "sluice.test.p.5", httptest.NewRequest("POST", "/", nil), nil); !errors.Is(err, forward.ErrTimeout) {
		t.Fatalf("expired context: %v, want ErrTimeout", err)
	}
}

func TestCancel(t *testing.T) {
	owner, fwd := pair(t, 0)
	entered, release := make(chan struct{}), make(chan struct{})
	serve(t, owner, "sluice.test.p.6", func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		if left := time.Until(dl); !ok || left < forward.DefaultTimeout-5*time.Second || left > forward.DefaultTimeout {
			t.Errorf("a context without a deadline: owner's deadline in %v (set %v), want about %v", left, ok, forward.DefaultTimeout)
		}
		close(entered)
		<-release
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := forward.Do(ctx, fwd, "sluice.test.p.6", httptest.NewRequest("POST", "/", nil), nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, forward.ErrTimeout) || errors.Is(err, forward.ErrNoOwner) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestNoOwner(t *testing.T) {
	_, fwd := pair(t, 0)
	_, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.7", httptest.NewRequest("POST", "/", nil), nil)
	if !errors.Is(err, forward.ErrNoOwner) || !errors.Is(err, nats.ErrNoResponders) || errors.Is(err, forward.ErrTimeout) {
		t.Fatalf("err = %v, want ErrNoOwner", err)
	}
	if !errors.Is(forward.ErrNoOwner, nats.ErrNoResponders) {
		t.Error("ErrNoOwner does not wrap nats.ErrNoResponders")
	}
}

// A ping is answered by the Server itself while a request holds its
// handler, reaches no handler, and finds nobody once the Server stopped.
func TestPing(t *testing.T) {
	owner, fwd := pair(t, 0)
	if err := forward.Ping(within(t, 10*time.Second), fwd, "sluice.test.p.8"); !errors.Is(err, forward.ErrNoOwner) {
		t.Fatalf("ping before anyone serves the subject: %v, want ErrNoOwner", err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var handled sync.WaitGroup
	srv := serve(t, owner, "sluice.test.p.*", func(w http.ResponseWriter, r *http.Request) {
		handled.Done()
		close(entered)
		<-release
	})
	handled.Add(1)
	done := make(chan error, 1)
	go func() {
		_, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.8", httptest.NewRequest("POST", "/", nil), nil)
		done <- err
	}()
	<-entered
	if err := forward.Ping(within(t, 10*time.Second), fwd, "sluice.test.p.8"); err != nil {
		t.Errorf("ping while a request is served: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	handled.Wait() // the handler ran once: the ping did not reach it
	if m := srv.Metrics(); m.Pings != 1 || m.Requests != 1 {
		t.Errorf("metrics %+v, want 1 ping and 1 request", m)
	}
	srv.Stop()
	if err := forward.Ping(within(t, 10*time.Second), fwd, "sluice.test.p.8"); !errors.Is(err, forward.ErrNoOwner) {
		t.Errorf("ping after the server stopped: %v, want ErrNoOwner", err)
	}
}

// Two owners in one queue group: each request is handled exactly once.
func TestQueueGroupHandlesOnce(t *testing.T) {
	s := startNATS(t, 0)
	fwd := connect(t, s, "node-a")
	const n = 300
	var mu sync.Mutex
	handled := map[string]int{}
	bySrv := map[string]int{}
	for _, name := range []string{"node-b", "node-c"} {
		serve(t, connect(t, s, name), "sluice.test.p.8", func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Id")
			mu.Lock()
			handled[id]++
			bySrv[name]++
			mu.Unlock()
			_, _ = io.WriteString(w, id)
		})
	}
	var wg sync.WaitGroup
	ctx := within(t, 10*time.Second)
	for i := range n {
		wg.Go(func() {
			r := httptest.NewRequest("POST", "/", nil)
			id := fmt.Sprint(i)
			r.Header.Set("X-Id", id)
			resp, err := forward.Do(ctx, fwd, "sluice.test.p.8", r, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if string(resp.Body) != id {
				t.Errorf("request %s answered %q", id, resp.Body)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != n {
		t.Errorf("%d requests handled, want %d", len(handled), n)
	}
	for id, c := range handled {
		if c != 1 {
			t.Errorf("request %s handled %d times", id, c)
		}
	}
	t.Logf("handled by server: %v", bySrv)
}

func TestStop(t *testing.T) {
	owner, fwd := pair(t, 0)
	ctx := within(t, 10*time.Second)
	// do forwards a request on its own goroutine; the channel gets its result.
	do := func(subject string) <-chan *forward.Response {
		out := make(chan *forward.Response, 1)
		go func() {
			resp, err := forward.Do(ctx, fwd, subject, httptest.NewRequest("POST", "/", nil), nil)
			if err != nil {
				t.Error(err)
			}
			out <- resp
		}()
		return out
	}
	stop := func(f func()) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			f()
			close(done)
		}()
		return done
	}

	t.Run("in-flight requests are answered", func(t *testing.T) {
		entered, cancelled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
		srv := serve(t, owner, "sluice.test.stop.1", func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done() // Stop cancels the context...
			close(cancelled)
			<-release // ...but waits for a handler that does not care
			fmt.Fprintf(w, "done, context: %v", r.Context().Err())
		})
		reply := do("sluice.test.stop.1")
		<-entered
		stopped := stop(srv.Stop)
		<-cancelled
		select {
		case <-stopped:
			t.Fatal("Stop returned before the request in flight was answered")
		case <-reply:
			t.Fatal("answered before the handler returned")
		default:
		}
		close(release)
		if resp := <-reply; resp == nil || string(resp.Body) != "done, context: context canceled" {
			t.Errorf("reply %+v", resp)
		}
		<-stopped
		srv.Stop() // twice: returns at once
		_, err := forward.Do(ctx, fwd, "sluice.test.stop.1", httptest.NewRequest("POST", "/", nil), nil)
		if !errors.Is(err, forward.ErrNoOwner) {
			t.Errorf("after Stop: %v, want ErrNoOwner", err)
		}
		if m := srv.Metrics(); m.Requests != 1 || m.InFlight != 0 {
			t.Errorf("metrics %+v", m)
		}
	})

	t.Run("long polls end at once", func(t *testing.T) {
		entered := make(chan struct{})
		srv := serve(t, owner, "sluice.test.stop.2", func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
			_, _ = io.WriteString(w, "<ReceiveMessageResult/>")
		})
		reply := do("sluice.test.stop.2")
		<-entered
		srv.Stop()
		if resp := <-reply; resp == nil || string(resp.Body) != "<ReceiveMessageResult/>" {
			t.Errorf("reply %+v", resp)
		}
	})

	t.Run("shutdown waits without cancelling", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		srv := serve(t, owner, "sluice.test.stop.3", func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			fmt.Fprintf(w, "context: %v", r.Context().Err())
		})
		reply := do("sluice.test.stop.3")
		<-entered
		var err error
		stopped := stop(func() { err = srv.Shutdown(context.Background()) })
		close(release)
		if resp := <-reply; resp == nil || string(resp.Body) != "context: <nil>" {
			t.Errorf("reply %+v", resp)
		}
		<-stopped
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})

	t.Run("shutdown cancels when its context ends", func(t *testing.T) {
		entered := make(chan struct{})
		srv := serve(t, owner, "sluice.test.stop.4", func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
			_, _ = io.WriteString(w, "cancelled")
		})
		reply := do("sluice.test.stop.4")
		<-entered
		sctx, cancel := context.WithCancel(context.Background())
		var err error
		stopped := stop(func() { err = srv.Shutdown(sctx) })
		cancel()
		<-stopped
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown: %v, want context.Canceled", err)
		}
		if resp := <-reply; resp == nil || string(resp.Body) != "cancelled" {
			t.Errorf("reply %+v", resp)
		}
	})
}

func TestTooLarge(t *testing.T) {
	const maxPayload = 64 << 10
	owner, fwd := pair(t, maxPayload)
	big := bytes.Repeat([]byte("x"), maxPayload+1)
	writeErr := make(chan error, 1)
	srv := serve(t, owner, "sluice.test.p.9", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Respond-Big") == "" {
			t.Error("an oversize request reached the handler")
			return
		}
		var err error
		for i := 0; i < 2*maxPayload && err == nil; i += 1 << 10 {
			_, err = w.Write(big[:1<<10])
		}
		writeErr <- err
	})

	t.Run("request refused up front", func(t *testing.T) {
		for _, subject := range []string{"sluice.test.p.9", "sluice.test.nobody"} {
			_, err := forward.Do(within(t, 10*time.Second), fwd, subject, httptest.NewRequest("POST", "/", nil), big)
			var tl *forward.TooLargeError
			if !errors.Is(err, forward.ErrTooLarge) || !errors.As(err, &tl) || tl.Max != maxPayload || tl.Size <= maxPayload {
				t.Errorf("%s: err = %v, want ErrTooLarge", subject, err)
			}
		}
	})
	t.Run("response replaced by a 500", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("X-Respond-Big", "1")
		resp, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.9", r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusInternalServerError || !strings.Contains(string(resp.Body), "larger than the NATS max payload") {
			t.Errorf("response %d %q", resp.Status, resp.Body)
		}
		if err := <-writeErr; err == nil {
			t.Error("writing past the max payload did not fail")
		}
		if m := srv.Metrics(); m.TooLarge != 1 {
			t.Errorf("metrics %+v", m)
		}
	})
}

// The SQS handler writes large bodies with respconn.WriteLarge; a forwarded
// request's writer is not a connection it can hold, so it falls back to
// Write.
func TestWriteLargeAndFlush(t *testing.T) {
	owner, fwd := pair(t, 0)
	body := bytes.Repeat([]byte("<Message>m</Message>"), 3000) // 60 KB
	serve(t, owner, "sluice.test.p.10", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		respconn.WriteLarge(r.Context(), w, body)
		w.(http.Flusher).Flush()
	})
	resp, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.10", httptest.NewRequest("POST", "/", nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || !bytes.Equal(resp.Body, body) || resp.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Errorf("response %d, %d bytes, headers %v", resp.Status, len(resp.Body), resp.Header)
	}
}

func TestHandlerPanic(t *testing.T) {
	owner, fwd := pair(t, 0)
	srv := serve(t, owner, "sluice.test.p.11", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		panic("boom")
	})
	resp, err := forward.Do(within(t, 10*time.Second), fwd, "sluice.test.p.11", httptest.NewRequest("POST", "/", nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", resp.Status)
	}
	if m := srv.Metrics(); m.Panics != 1 {
		t.Errorf("metrics %+v", m)
	}
}

// A message that is not a forwarded request is answered 502, not handled.
func TestMalformedRequest(t *testing.T) {
	owner, fwd := pair(t, 0)
	srv := serve(t, owner, "sluice.test.p.12", func(w http.ResponseWriter, r *http.Request) {
		t.Error("a malformed request reached the handler")
	})
	reply, err := fwd.RequestWithContext(within(t, 10*time.Second), "sluice.test.p.12", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if st := reply.Header.Get("Sluice-Fwd-Status"); st != "502" {
		t.Errorf("status %q, want 502", st)
	}
	if m := srv.Metrics(); m.Malformed != 1 {
		t.Errorf("metrics %+v", m)
	}
}

func TestServeConfig(t *testing.T) {
	nc := connect(t, startNATS(t, 0), "n")
	h := http.NotFoundHandler()
	for _, tc := range []struct {
		name string
		cfg  forward.Config
	}{
		{"no subject", forward.Config{Queue: "q", Handler: h}},
		{"no queue", forward.Config{Subject: "s", Handler: h}},
		{"no handler", forward.Config{Subject: "s", Queue: "q"}},
	} {
		if _, err := forward.Start(nc, tc.cfg); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	nc.Close()
	if _, err := forward.Serve(nc, "s", "q", h); err == nil {
		t.Error("serving on a closed connection: no error")
	}
}

// Stopping after the connection closed does not hang.
func TestStopAfterClose(t *testing.T) {
	nc := connect(t, startNATS(t, 0), "n")
	srv, err := forward.Serve(nc, "s", "q", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Stop()
	srv.Stop()
}
