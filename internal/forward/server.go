package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type (
	fromKey    struct{}
	subjectKey struct{}
)

// Forwarded reports whether r came through a Server, that is from another
// node: such a request is handled where it arrived, never forwarded again.
// The mark lives in r's context, where only a Server puts it, so a client
// cannot fake it with a header.
func Forwarded(r *http.Request) bool {
	_, ok := ForwardedFrom(r)
	return ok
}

// ForwardedFrom returns the name of the node that forwarded r, and whether
// r was forwarded at all.
func ForwardedFrom(r *http.Request) (node string, ok bool) {
	node, ok = r.Context().Value(fromKey{}).(string)
	return node, ok
}

// Subject returns the NATS subject a forwarded request arrived on ("" for
// one that was not forwarded), so that a Server on a wildcard subject can
// tell its requests apart by the subject's tokens.
func Subject(r *http.Request) string {
	s, _ := r.Context().Value(subjectKey{}).(string)
	return s
}

// Config configures a Server. The zero values of the optional fields are
// their defaults.
type Config struct {
	// Subject is the subject served, e.g. the partition's. Required.
	Subject string

	// Queue is the queue group: of the subscribers in it, one gets each
	// request. Required.
	Queue string

	// Handler handles the requests. Required.
	Handler http.Handler

	// Logger receives what goes wrong outside the handler: a panic, a reply
	// that could not be sent. Default: discards.
	Logger *slog.Logger
}

// Server serves forwarded requests on a subject until stopped.
type Server struct {
	nc  *nats.Conn
	cfg Config
	sub *nats.Subscription

	// ctx is the parent of every request's context; stopping cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	// running counts the subscription's delivery loop (one, until the
	// subscription has ended) and every request not yet answered. The
	// loop's count is what lets each delivery Add while Shutdown Waits.
	running  sync.WaitGroup
	loopDone func()

	stopOnce sync.Once
	idle     chan struct{} // closed once stopped and every request answered

	requests, pings, inFlight, panics, malformed, tooLarge, replyErrors atomic.Int64
}

// Serve serves subject in queueGroup with h, with the default Config.
func Serve(nc *nats.Conn, subject, queueGroup string, h http.Handler) (*Server, error) {
	return Start(nc, Config{Subject: subject, Queue: queueGroup, Handler: h})
}

// Start subscribes to cfg.Subject in cfg.Queue and serves each request it
// receives on a goroutine of its own, with no limit on how many: admission
// control is the handler's. It returns once the NATS server it is connected
// to has the subscription (unless the connection is down).
func Start(nc *nats.Conn, cfg Config) (*Server, error) {
	switch {
	case nc == nil:
		return nil, errors.New("forward: no NATS connection")
	case cfg.Subject == "":
		return nil, errors.New("forward: no subject to serve")
	case cfg.Queue == "":
		return nil, errors.New("forward: no queue group: every subscriber would handle every request")
	case cfg.Handler == nil:
		return nil, errors.New("forward: no handler")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{nc: nc, cfg: cfg, idle: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loopDone = sync.OnceFunc(s.running.Done)
	s.running.Add(1)
	sub, err := nc.QueueSubscribe(cfg.Subject, cfg.Queue, s.deliver)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("forward: subscribing to %s: %w", cfg.Subject, err)
	}
	// The loop ends when the subscription is drained or the connection
	// closed; it calls this after its last delivery has returned.
	sub.SetClosedHandler(func(string) { s.loopDone() })
	if nc.IsClosed() {
		// Closed before the handler was set: it may never run.
		s.cancel()
		return nil, fmt.Errorf("forward: subscribing to %s: %w", cfg.Subject, nats.ErrConnectionClosed)
	}
	s.sub = sub
	// Make sure the NATS server has the subscription before returning, so
	// that a request sent after Start returns finds this Server (on the
	// same NATS server; others in a cluster learn of it a moment later).
	// While the connection is down there is nothing to wait for: it
	// subscribes again on reconnecting.
	if !nc.IsReconnecting() {
		if err := nc.Flush(); err != nil {
			cfg.Logger.Warn("forward: subscription not confirmed", "subject", cfg.Subject, "error", err)
		}
	}
	return s, nil
}

// Shutdown stops taking requests (new ones get ErrNoOwner, or go to another
// member of the queue group; those already delivered to this one are still
// served) and waits for every request to be answered. When ctx ends first,
// it cancels the requests' contexts (long polls return at once), still
// waits for them to be answered, and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		// An error means the subscription or connection is closed already:
		// the delivery loop ends, or has, all the same.
		_ = s.sub.Drain()
		go func() {
			// Drain delivers what the client holds already, then ends the
			// subscription: wait for that (bounded, should the connection
			// be gone) before waiting for the handlers, or a request
			// delivered meanwhile would be answered after the caller
			// closed the connection, that is never.
			for deadline := time.Now().Add(5 * time.Second); s.sub.IsValid() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			s.running.Wait()
			s.cancel()
			close(s.idle)
		}()
	})
	select {
	case <-s.idle:
		return nil
	default:
	}
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.idle
		return ctx.Err()
	}
}

// Stop stops taking requests, cancels the contexts of those in flight (long
// polls return at once) and returns once every one has been answered. It
// is safe to call more than once, and with Shutdown.
func (s *Server) Stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Shutdown(ctx)
}

// Metrics is a snapshot of a Server's counters.
type Metrics struct {
	Requests    int64 // requests received
	Pings       int64 // pings answered (Ping)
	InFlight    int64 // requests not yet answered
	Panics      int64 // handler panics, answered 500
	Malformed   int64 // messages that were no forwarded request (answered 502 when they had a reply subject)
	TooLarge    int64 // responses over the max payload, replaced by a 500
	ReplyErrors int64 // replies that could not be sent
}

// Metrics returns the counters.
func (s *Server) Metrics() Metrics {
	return Metrics{
		Requests:    s.requests.Load(),
		Pings:       s.pings.Load(),
		InFlight:    s.inFlight.Load(),
		Panics:      s.panics.Load(),
		Malformed:   s.malformed.Load(),
		TooLarge:    s.tooLarge.Load(),
		ReplyErrors: s.replyErrors.Load(),
	}
}

// deliver runs on the subscription's delivery loop: it must not block.
func (s *Server) deliver(m *nats.Msg) {
	if m.Header.Get(hdrPing) != "" {
		// Ping: the subscription is alive. Answered here, in order
		// with the requests delivered before it.
		s.pings.Add(1)
		if m.Reply != "" {
			s.reply(m, http.StatusNoContent, nil, nil)
		}
		return
	}
	s.running.Add(1)
	s.requests.Add(1)
	s.inFlight.Add(1)
	go s.handle(m)
}

func (s *Server) handle(m *nats.Msg) {
	defer s.running.Done()
	defer s.inFlight.Add(-1)
	if m.Reply == "" {
		s.malformed.Add(1) // nobody to answer: better not to act
		return
	}
	r, cancel, err := s.request(m)
	if err != nil {
		s.malformed.Add(1)
		s.reply(m, http.StatusBadGateway, textHeader(), []byte(err.Error()+"\n"))
		return
	}
	defer cancel()
	w := &capture{header: http.Header{}, head: r.Method == http.MethodHead, limit: s.nc.MaxPayload()}
	if s.serve(w, r) {
		s.reply(m, http.StatusInternalServerError, textHeader(), []byte("forward: the handler panicked\n"))
		return
	}
	w.finish()
	if w.overflow {
		s.replyTooLarge(m, w.size)
		return
	}
	s.reply(m, w.status, w.sent, w.body.Bytes())
}

// serve runs the handler and reports whether it panicked.
func (s *Server) serve(w *capture, r *http.Request) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			s.panics.Add(1)
			s.cfg.Logger.Error("forward: panic serving a forwarded request", "subject", s.cfg.Subject, "method", r.Method, "uri", r.RequestURI, "panic", fmt.Sprint(v))
		}
	}()
	s.cfg.Handler.ServeHTTP(w, r)
	return false
}

// request rebuilds the forwarded request, with a context that ends at its
// timeout or when the Server stops.
func (s *Server) request(m *nats.Msg) (*http.Request, context.CancelFunc, error) {
	h := m.Header
	method, uri := h.Get(hdrMethod), h.Get(hdrURI)
	if !validName(method) {
		return nil, nil, fmt.Errorf("forward: malformed request: method %q", method)
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, nil, fmt.Errorf("forward: malformed request: uri %q", uri)
	}
	ctx := context.WithValue(context.WithValue(s.ctx, fromKey{}, h.Get(hdrFrom)), subjectKey{}, m.Subject)
	cancel := context.CancelFunc(func() {})
	if t := h.Get(hdrTimeout); t != "" {
		ms, err := strconv.ParseInt(t, 10, 64)
		if err != nil || ms < 0 {
			return nil, nil, fmt.Errorf("forward: malformed request: timeout %q", t)
		}
		ctx, cancel = context.WithTimeout(ctx, time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond)
	}
	header := getHeaders(h)
	delete(header, "Host")
	r := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          http.NoBody,
		ContentLength: int64(len(m.Data)),
		Host:          h.Get(hdrHost),
		RemoteAddr:    h.Get(hdrRemote),
		RequestURI:    uri,
	}
	if len(m.Data) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(m.Data))
	}
	if h.Get(hdrScheme) == "https" {
		// So that URLs the handler builds keep the client's scheme; the
		// connection's details stayed with the forwarding node.
		r.TLS = &tls.ConnectionState{}
	}
	return r.WithContext(ctx), cancel, nil
}

// reply answers m with a response, or with a 500 when it does not fit.
func (s *Server) reply(m *nats.Msg, status int, header http.Header, body []byte) {
	out, err := encodeResponse(status, header, body)
	if err != nil { // a header name the handler made up
		out, _ = encodeResponse(http.StatusInternalServerError, textHeader(), []byte(err.Error()+"\n"))
	}
	if size, limit := payloadSize(out), s.nc.MaxPayload(); limit > 0 && size > limit {
		s.replyTooLarge(m, size)
		return
	}
	err = m.RespondMsg(out)
	if errors.Is(err, nats.ErrMaxPayload) { // the limit changed on a reconnect
		s.replyTooLarge(m, payloadSize(out))
		return
	}
	if err != nil {
		s.replyErrors.Add(1)
		s.cfg.Logger.Warn("forward: cannot reply", "subject", s.cfg.Subject, "error", err)
	}
}

// replyTooLarge answers m with a 500 saying the response (size bytes) did
// not fit the max payload.
func (s *Server) replyTooLarge(m *nats.Msg, size int64) {
	s.tooLarge.Add(1)
	msg := fmt.Sprintf("forward: the response of %d bytes (body and headers, at least) is larger than the NATS max payload of %d bytes\n", size, s.nc.MaxPayload())
	s.cfg.Logger.Warn("forward: response too large", "subject", s.cfg.Subject, "size", size, "max_payload", s.nc.MaxPayload())
	out, _ := encodeResponse(http.StatusInternalServerError, textHeader(), []byte(msg))
	if err := m.RespondMsg(out); err != nil {
		s.replyErrors.Add(1)
		s.cfg.Logger.Warn("forward: cannot reply", "subject", s.cfg.Subject, "error", err)
	}
}

func textHeader() http.Header {
	return http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
}

// capture is the http.ResponseWriter of a forwarded request: it keeps the
// status, the headers as they were when the status was written (as net/http
// sends them) and the body, up to limit bytes.
type capture struct {
	header   http.Header
	head     bool // a HEAD request: no body
	limit    int64
	status   int
	sent     http.Header
	body     bytes.Buffer
	size     int64 // body bytes written, kept or not
	overflow bool  // more than limit bytes written
}

// errTooLarge is what a write past the max payload returns: the response
// cannot be sent, so the handler may as well stop.
var errTooLarge = errors.New("forward: response larger than the NATS max payload")

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http
	}
	if c.status != 0 || (code <= 199 && code != http.StatusSwitchingProtocols) {
		return // informational responses do not cross
	}
	c.status = code
	c.sent = c.header.Clone()
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.head || c.status == http.StatusNoContent || c.status == http.StatusNotModified {
		return 0, http.ErrBodyNotAllowed
	}
	c.size += int64(len(p))
	if c.limit > 0 && c.size > c.limit {
		c.overflow = true
		c.body.Reset()
		return 0, errTooLarge
	}
	return c.body.Write(p)
}

// Flush implements http.Flusher: the response goes out whole when the
// handler returns, so there is nothing to flush early.
func (c *capture) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
}

// finish completes a response the handler wrote nothing of, as net/http
// does.
func (c *capture) finish() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
}
