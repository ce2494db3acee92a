package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// poster sends one AWS JSON 1.0 request (op, body) and returns the HTTP
// status and the response body.
type poster interface {
	post(ctx context.Context, op string, body []byte) (int, []byte, error)
}

// stdPoster goes through net/http's client.
type stdPoster struct {
	hc       *http.Client
	endpoint string
}

func (p *stdPoster) post(ctx context.Context, op string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", p.endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// connPoster keeps its own keep-alive connections, one request at a time
// on each, for the load generators: net/http's Transport runs a reader
// and a writer goroutine per connection and hands every request and
// response between them, which on a two-core machine costs the client
// about as much CPU per request as the server's whole handling of it.
// Bench and scenario share the machine with the server they measure; the
// less the client costs, the more the figures are the server's. The
// server still sees plain HTTP/1.1 requests, and responses are read with
// net/http's parser.
type connPoster struct {
	addr, host string
	free       chan *rawConn
}

type rawConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// newPoster returns a connPoster for an http:// endpoint, and net/http's
// client (hc) for anything else.
func newPoster(endpoint string, hc *http.Client, maxIdle int) (poster, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" || (u.Path != "" && u.Path != "/") {
		return &stdPoster{hc: hc, endpoint: endpoint}, nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &connPoster{addr: addr, host: u.Host, free: make(chan *rawConn, maxIdle)}, nil
}

func (p *connPoster) get(ctx context.Context) (*rawConn, bool, error) {
	select {
	case rc := <-p.free:
		return rc, true, nil
	default:
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	// Buffers that hold a whole batch: one write per request.
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 64<<10)}, false, nil
}

func (p *connPoster) put(rc *rawConn) {
	select {
	case p.free <- rc:
	default:
		rc.c.Close()
	}
}

func (p *connPoster) post(ctx context.Context, op string, body []byte) (int, []byte, error) {
	for {
		// context.AfterFunc cuts the connection's deadline short from
		// another goroutine, perhaps only after the exchange: a context
		// already done must fail here, before any request is written.
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		rc, reused, err := p.get(ctx)
		if err != nil {
			return 0, nil, err
		}
		status, out, keep, err := p.exchange(ctx, rc, op, body)
		if keep {
			p.put(rc)
		} else {
			rc.c.Close()
		}
		// A kept-alive connection the server closed while it was idle
		// fails before any answer: the request never reached a handler.
		if err != nil && reused && status == 0 && ctx.Err() == nil &&
			(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			continue
		}
		return status, out, err
	}
}

// exchange writes one request and reads its response; keep says the
// connection can carry the next one.
func (p *connPoster) exchange(ctx context.Context, rc *rawConn, op string, body []byte) (status int, out []byte, keep bool, err error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = rc.c.SetDeadline(dl)
	} else {
		_ = rc.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = rc.c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			keep = false // the deadline was cut short under us
		}
	}()
	w := rc.bw
	w.WriteString("POST / HTTP/1.1\r\nHost: ")
	w.WriteString(p.host)
	w.WriteString("\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.")
	w.WriteString(op)
	w.WriteString("\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	if resp.ContentLength >= 0 {
		out = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, out)
	} else {
		out, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return resp.StatusCode, nil, false, err
	}
	return resp.StatusCode, out, !resp.Close, nil
}
