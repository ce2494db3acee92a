package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultTimeout bounds a forwarded request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

var (
	// ErrNoOwner means nobody serves the subject right now (the partition
	// is moving): the request was not handled, and may be retried. It wraps
	// nats.ErrNoResponders.
	ErrNoOwner = fmt.Errorf("forward: no owner serves the subject: %w", nats.ErrNoResponders)

	// ErrTimeout means no reply came before the context's deadline. The
	// owner may have handled the request all the same. The error returned
	// also wraps the cause (context.DeadlineExceeded).
	ErrTimeout = errors.New("forward: no reply before the deadline")

	// ErrTooLarge means a request does not fit the connection's max
	// payload; it was not sent. The error returned is a *TooLargeError.
	ErrTooLarge = errors.New("forward: larger than the NATS max payload")

	// ErrLoop means the request was forwarded to this node already and
	// must be handled here, not forwarded a second time.
	ErrLoop = errors.New("forward: request was already forwarded once")

	// ErrBadReply means the reply is not a forwarded response.
	ErrBadReply = errors.New("forward: malformed reply")
)

// TooLargeError is a request that does not fit the max payload.
type TooLargeError struct {
	Size int64 // bytes the request needs: body and headers
	Max  int64 // the connection's max payload
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("forward: request of %d bytes (body and headers) is larger than the NATS max payload of %d bytes", e.Size, e.Max)
}

// Unwrap makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// Response is the owner's response to a forwarded request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Write sends the response to w: the headers (replacing any w already
// holds under the same names), the status and the body. It sets
// Content-Length when the handler did not.
func (r *Response) Write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range r.Header {
		h[k] = slices.Clone(vs)
	}
	if _, ok := h["Content-Length"]; !ok && len(r.Body) > 0 {
		h.Set("Content-Length", strconv.Itoa(len(r.Body)))
	}
	w.WriteHeader(r.Status)
	if len(r.Body) > 0 {
		_, _ = w.Write(r.Body)
	}
}

// Client forwards requests over one NATS connection. The zero values of the
// optional fields are their defaults.
type Client struct {
	// Conn is the connection requests go out on. Required.
	Conn *nats.Conn

	// Node names this node in the mark a forwarded request carries.
	// Default: the connection's name (nats.Name).
	Node string

	// Timeout bounds a request whose context has no deadline. Default
	// DefaultTimeout (30 s).
	Timeout time.Duration
}

// Do forwards r, whose body the caller has already read into body, to the
// subscriber of subject, and waits for its response until ctx ends. It is
// Client{Conn: nc}.Do.
func Do(ctx context.Context, nc *nats.Conn, subject string, r *http.Request, body []byte) (*Response, error) {
	c := Client{Conn: nc}
	return c.Do(ctx, subject, r, body)
}

// Do forwards r, whose body the caller has already read into body, to the
// subscriber of subject, and waits for its response until ctx ends (or for
// Timeout when ctx has no deadline).
//
// Errors: ErrNoOwner when nobody serves subject (the request was not
// handled); ErrTimeout when ctx's deadline passed first, and ctx's error
// when it was cancelled (in both the request may have been handled);
// ErrTooLarge when the request does not fit the max payload (it was not
// sent); ErrLoop when r was itself forwarded; ErrBadHeader when a header
// name is not an HTTP token.
func (c *Client) Do(ctx context.Context, subject string, r *http.Request, body []byte) (*Response, error) {
	if Forwarded(r) {
		return nil, ErrLoop
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := c.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, c.fail(subject, err)
	}
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left < time.Millisecond {
		return nil, c.fail(subject, context.DeadlineExceeded)
	}
	m, err := c.encode(subject, r, body, left)
	if err != nil {
		return nil, err
	}
	if size, limit := payloadSize(m), c.Conn.MaxPayload(); limit > 0 && size > limit {
		return nil, &TooLargeError{Size: size, Max: limit}
	}
	reply, err := c.Conn.RequestMsgWithContext(ctx, m)
	if err != nil {
		if errors.Is(err, nats.ErrMaxPayload) { // the limit changed on a reconnect
			return nil, &TooLargeError{Size: payloadSize(m), Max: c.Conn.MaxPayload()}
		}
		return nil, c.fail(subject, err)
	}
	return decodeResponse(reply)
}

// Ping asks whether a Server serves subject, without serving a request:
// nil when one answered; an error wrapping ErrNoOwner when nobody serves
// subject; ErrTimeout (or ctx's error) when no answer came before ctx
// ended, which says nothing either way (a Server answers a ping on its
// subscription's delivery goroutine, which may be slow to get to it).
func Ping(ctx context.Context, nc *nats.Conn, subject string) error {
	c := Client{Conn: nc}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	m := nats.NewMsg(subject)
	m.Header.Set(hdrPing, "1")
	reply, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return c.fail(subject, err)
	}
	resp, err := decodeResponse(reply)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusNoContent {
		return fmt.Errorf("%w: a ping of %s was answered %d", ErrBadReply, subject, resp.Status)
	}
	return nil
}

// fail wraps an error of a request sent (or about to be) to subject.
func (c *Client) fail(subject string, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w (%s)", ErrNoOwner, subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w (%s): %w", ErrTimeout, subject, err)
	}
	return fmt.Errorf("forward: %s: %w", subject, err)
}

// encode builds the request message (see the package doc).
func (c *Client) encode(subject string, r *http.Request, body []byte, timeout time.Duration) (*nats.Msg, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	uri := r.RequestURI // as received, when r came from a server
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	node := c.Node
	if node == "" {
		node = c.Conn.Opts.Name
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: body}
	h := m.Header
	h.Set(hdrMethod, method)
	h.Set(hdrURI, uri)
	h.Set(hdrHost, host)
	if r.RemoteAddr != "" {
		h.Set(hdrRemote, r.RemoteAddr)
	}
	if r.TLS != nil {
		h.Set(hdrScheme, "https")
	}
	h.Set(hdrTimeout, strconv.FormatInt(timeout.Milliseconds(), 10))
	h.Set(hdrFrom, node)
	drop := dropped(r.Header, signedHeaders(r))
	drop["Host"] = true // carried by hdrHost
	if err := putHeaders(h, r.Header, drop); err != nil {
		return nil, err
	}
	return m, nil
}
