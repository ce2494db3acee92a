// Package sqs puts a broker behind the Amazon SQS wire protocols: AWS JSON
// 1.0 (X-Amz-Target) and Query (form or GET, XML answers), chosen per
// request on every path. It only translates: wire format in, broker call,
// wire format out. Queue logic and message validation live in the broker;
// this package checks wire shape (types, required parameters, batch shape)
// and authenticates requests with SigV4. What a request's body may cost
// before it is parsed is intake's; how a large answer leaves, respconn's.
package sqs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sns"
	snswire "github.com/sluicemq/sluice/internal/sns/wire"
	"github.com/sluicemq/sluice/internal/sqs/intake"
	"github.com/sluicemq/sluice/internal/sqs/respconn"
	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// pooledBufMax bounds the buffers a Server recycles.
const pooledBufMax = 256 << 10

// maxQueryParams bounds the parameters of a Query request. The largest
// valid request (a batch of ten with ten attributes each) has about 500.
const maxQueryParams = 4096

// ServerConfig configures a Server.
type ServerConfig struct {
	// Region and AccountID must match the broker's.
	Region    string
	AccountID string
	// BaseURL, when set (for example "https://sqs.example.com"), is used for
	// queue URLs instead of the request's scheme and Host.
	BaseURL string
	// Credentials, when not nil, turns on SigV4 verification.
	Credentials *sigv4.Credentials
	// Logger gets one line per failed request. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for SigV4 skew checks. Default time.Now.
	Now func() time.Time
	// ReadTimeout and WriteTimeout bound one request. Defaults 30 s and
	// 60 s (a long poll lasts up to 20 s).
	ReadTimeout, WriteTimeout time.Duration
	// MaxInflightBytes bounds the request bodies held at once, summed over
	// every request in flight (at least intake.MaxRequestBytes). A request
	// that finds no room within a short wait is refused with
	// ServiceUnavailable (retryable). Default 48 MiB.
	MaxInflightBytes int64
}

// Server is the SQS HTTP front.
type Server struct {
	cfg ServerConfig
	b   Broker
	// clustered: b is a node of a cluster (requests may go to another
	// node); fixed for the broker's life.
	clustered bool
	log       *slog.Logger
	base      context.Context // cancelled at shutdown: long polls return empty
	cancel    context.CancelFunc
	mu        sync.Mutex
	srv       *http.Server
	// metrics times requests by action and counts their errors.
	metrics *requestMetrics
	// bufs recycles request bodies and rendered responses: at thousands
	// of requests a second, allocating (and zeroing) them anew is a
	// visible share of the CPU and of the garbage. Buffers that grew past
	// pooledBufMax (rare, large requests) are left to the collector.
	bufs sync.Pool
	// inflight bounds the memory request bodies hold at once.
	inflight *intake.Budget
	// sns answers the SNS requests that come to the same port (their
	// Version is SNS's).
	sns *sns.Service
}

func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	return new([]byte)
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= pooledBufMax {
		s.bufs.Put(b)
	}
}

// NewServer returns a server for the broker.
func NewServer(cfg ServerConfig, b Broker) *Server {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "000000000000"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = intake.DefaultMaxInflightBytes
	}
	cfg.MaxInflightBytes = max(cfg.MaxInflightBytes, intake.MaxRequestBytes)
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, b: b, clustered: b != nil && b.Clustered(), log: cfg.Logger, base: ctx, cancel: cancel, metrics: newRequestMetrics(),
		inflight: intake.NewBudget(cfg.MaxInflightBytes), sns: sns.New(b, cfg.Region, cfg.AccountID, cfg.Logger)}
}

// Serve serves HTTP on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.base.Err() != nil {
		// Shutdown came first (Serve's goroutine had not started yet).
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadTimeout:       s.cfg.ReadTimeout,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       respconn.ConnContext,
	}
	srv := s.srv
	s.mu.Unlock()
	err := srv.Serve(respconn.Listener{Listener: ln})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, makes long polls in flight return
// empty at once, waits for in-flight requests (until ctx ends), and then
// closes every connection left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.cancel() // under mu: a Serve that has not begun sees it and returns
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	// Then close what is left: a connection accepted but with no request
	// yet (net/http leaves those for 5 s), or requests still running when
	// ctx ended.
	_ = srv.Close()
	return err
}

// request is one decoded call.
type request struct {
	id        string
	action    string
	json      bool
	p         wire.Params
	r         *http.Request
	principal *sigv4.Principal
	pathQueue string        // queue named by the URL path, if any
	release   *intake.Grant // the request's share of the in-flight body budget
	errCode   string        // the error the request was answered with, if any
	body      []byte        // in a cluster: the body, to forward if the queue moves meanwhile
	snsForm   url.Values    // an SNS request's parameters (nil: an SQS request)
	// Set by dispatch before the action runs: the queue the action is on
	// (resolved and authorised; actions on no queue: ""), and the context
	// of its broker calls (request.ctx).
	queue string
	bctx  context.Context
}

// The Content-Type of answers, shared by every response's header (net/http
// reads a header's values and never changes them).
var (
	jsonContentType = []string{"application/x-amz-json-1.0"}
	xmlContentType  = []string{"text/xml"}
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/SimpleNotificationService-") {
		// The certificate that verifies SNS envelopes' signatures: public,
		// as SNS's is.
		if pem, ok := s.b.SNSCertificate(r.Context(), r.URL.Path); ok {
			w.Header().Set("Content-Type", "application/x-pem-file")
			_, _ = w.Write(pem)
			return
		}
		http.NotFound(w, r)
		return
	}
	req := &request{id: uuid.NewString(), r: r}
	w.Header()["X-Amzn-Requestid"] = []string{req.id} // as Set("x-amzn-RequestId") would, without canonicalising the name each time
	start := time.Now()
	defer func() { s.metrics.observe(req.action, time.Since(start), req.errCode) }()
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		defer func() {
			// One line per request, at debug level, with the id the client saw.
			s.log.Debug("request", "request_id", req.id, "action", req.action, "queue", req.pathQueue, "duration", time.Since(start))
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic serving request", "request_id", req.id, "action", req.action, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			s.writeError(w, req, &st.Error{Code: st.CodeInternal, Message: "We encountered an internal error. Please try again."})
		}
	}()
	defer func() { req.release.Done() }()
	body := s.getBuf()
	err := s.decode(w, req, body)
	if err == nil && req.snsForm != nil {
		to, rerr := s.forwardTo(req)
		if rerr == nil && to != "" {
			s.forward(w, req, to, *body) // another node of the cluster owns the topic
			s.putBuf(body)
			return
		}
		if errors.Is(rerr, forward.ErrCutOff) {
			s.putBuf(body)
			snswire.WriteError(w, snswire.Errorf(snswire.CodeServiceUnavailable, "This node cannot reach the other nodes of its cluster; retry, through another node if you can."), req.id)
			return
		}
		s.putBuf(body)
		ctx, cancel := req.ctx(s)
		defer cancel()
		caller := ""
		if req.principal != nil {
			caller = req.principal.Name
		}
		s.sns.Serve(ctx, w, req.id, caller, req.snsForm)
		return
	}
	if err == nil {
		var to string
		if to, err = s.forwardTo(req); err == nil && to != "" {
			s.forward(w, req, to, *body) // another node of the cluster owns the queue
			s.putBuf(body)
			return
		}
		if s.clustered && !forward.Forwarded(r) {
			req.body = append([]byte(nil), *body...) // for a queue that moves meanwhile
		}
	}
	s.putBuf(body) // decoding copies what it keeps
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	out, hasResult, err := s.dispatch(req)
	if err != nil && errors.Is(err, partition.ErrNotOwner) && s.clustered && !forward.Forwarded(r) {
		// The queue moved to another node between routing and serving
		// (nothing was done here): its new owner answers.
		if to, rerr := s.forwardTo(req); rerr == nil && to != "" {
			s.forward(w, req, to, req.body)
			return
		}
	}
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if req.json {
		buf := s.getBuf()
		*buf = wire.AppendJSON(*buf, out)
		h := w.Header()
		h["Content-Type"] = jsonContentType
		h["Content-Length"] = []string{strconv.Itoa(len(*buf))} // one write, not chunks
		w.WriteHeader(http.StatusOK)
		respconn.WriteLarge(r.Context(), w, *buf)
		s.putBuf(buf)
		return
	}
	w.Header()["Content-Type"] = xmlContentType
	w.WriteHeader(http.StatusOK)
	respconn.WriteLarge(r.Context(), w, wire.RenderXML(req.action, out, hasResult, req.id))
}

// decode authenticates, reads and parses the request, reading the body
// into buf. Nothing costly happens before the caller is known: the
// signature's header part is checked before the body is read, the body
// only once the in-flight budget has room for it, and it is parsed only
// after the signature over it holds.
func (s *Server) decode(w http.ResponseWriter, req *request, buf *[]byte) error {
	r := req.r
	target := r.Header.Get("X-Amz-Target")
	req.json = target != "" // errors from here on answer in the request's protocol
	if acct, name, ok := splitQueuePath(r.URL.Path); ok && acct == s.cfg.AccountID {
		req.pathQueue = name
	}
	sig, err := s.identify(req)
	if err != nil {
		return err
	}
	if req.release, err = s.inflight.ReadBody(w, r, buf); err != nil {
		return err
	}
	body := *buf
	if err := s.verify(req, sig, body); err != nil {
		return err
	}
	if req.json {
		op, ok := strings.CutPrefix(target, "AmazonSQS.")
		if !ok || op == "" {
			return st.Errorf(wire.CodeInvalidAction, "The action %s is not valid for this endpoint.", target)
		}
		req.action = op
		if req.p, err = wire.DecodeJSON(body); err != nil {
			return err
		}
	} else {
		vals := r.URL.Query()
		if r.Method == http.MethodPost && len(body) > 0 {
			if n := bytes.Count(body, []byte("&")) + 1; n > maxQueryParams {
				return st.Errorf(wire.CodeMalformedInput, "The request has %d parameters; at most %d are accepted.", n, maxQueryParams)
			}
			form, err := url.ParseQuery(string(body))
			if err != nil {
				return st.Errorf(wire.CodeMalformedInput, "The request body is not a valid form.")
			}
			for k, v := range form {
				vals[k] = v
			}
		}
		if vals.Get("Version") == snswire.Version {
			// SNS on the same port: its actions are its own (some, like
			// AddPermission, share SQS's names).
			req.snsForm, req.action = vals, "SNS."+vals.Get("Action")
			return nil
		}
		req.p = wire.DecodeQuery(vals)
		req.action, _ = req.p.Str("Action")
		if req.action == "" {
			return st.Errorf(wire.CodeMissingAction, "The request must contain the parameter Action.")
		}
	}
	return nil
}

// splitQueuePath parses /<account>/<name>.
func splitQueuePath(p string) (acct, name string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) < 2 {
		return "", "", false
	}
	return parts[len(parts)-2], parts[len(parts)-1], true
}

func (s *Server) writeError(w http.ResponseWriter, req *request, err error) {
	var e *st.Error
	if !errors.As(err, &e) {
		e = &st.Error{Code: st.CodeInternal, Message: "We encountered an internal error. Please try again.", Cause: err}
	}
	we := wire.Lookup(e.Code)
	req.errCode = string(e.Code)
	if errors.Is(err, partition.ErrNotOwner) {
		// Nothing was done: a node that forwarded the request may send
		// it to the queue's new owner.
		w.Header().Set(forward.NotOwnerHeader, "1")
		s.log.Debug("request for a queue that moved", "request_id", req.id, "action", req.action)
	} else if we.Status >= 500 || e.Cause != nil {
		s.log.Error("request failed", "request_id", req.id, "action", req.action, "code", string(e.Code), "err", e)
	} else {
		s.log.Debug("request rejected", "request_id", req.id, "action", req.action, "code", string(e.Code), "message", e.Message)
	}
	msg := e.Message
	if e.Code == st.CodeInternal && e.Cause != nil && msg == "" {
		msg = "We encountered an internal error. Please try again."
	}
	fault := "Sender"
	if !we.Sender {
		fault = "Receiver"
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(e.RetryAfter.Seconds()+0.999)))
	}
	if req.json {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-query-error", we.QueryCode+";"+fault)
		w.WriteHeader(we.Status)
		_, _ = w.Write(wire.RenderJSON(wire.Obj{}.Add("__type", we.JSONType).Add("message", msg)))
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(we.Status)
	_, _ = w.Write(wire.RenderXMLError(fault, we.QueryCode, msg, req.id))
}
