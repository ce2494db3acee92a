// Package respconn sends a large HTTP response's header and body in one
// system call. net/http writes a response through a 4 KiB buffer: a
// response larger than that (a ReceiveMessage of ten 1 KiB messages is
// about 13 KiB) goes out in two system calls, the buffer with the header
// and then the rest. On a busy loopback each write costs tens of
// microseconds, about what the whole ReceiveMessage costs the broker. The
// connections a Listener accepts can hold the first write of a large
// response and send it with the second in one writev.
//
// It owns the accepted connections' writes, nothing else: it must not
// read requests, nor change a byte of what the server writes (only how
// many system calls carry it).
package respconn

import (
	"context"
	"net"
)

// conn wraps a TCP connection the server accepted.
type conn struct {
	*net.TCPConn
	hold bool   // hold the next write
	held []byte // a held write, sent before the next one
}

// holdNext makes the next write wait for the one after it. Call it only
// before a write that is sure to make at least two (more than net/http
// buffers), and call release after it.
func (c *conn) holdNext() { c.hold = true }

// release sends what is still held (a response that went out in one write
// after all) and stops holding.
func (c *conn) release() error {
	c.hold = false
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.TCPConn.Write(c.held)
	c.held = c.held[:0]
	return err
}

func (c *conn) Write(p []byte) (int, error) {
	if c.hold {
		c.hold = false
		c.held = append(c.held[:0], p...)
		return len(p), nil
	}
	if len(c.held) == 0 {
		return c.TCPConn.Write(p)
	}
	held := len(c.held)
	bufs := net.Buffers{c.held, p}
	n, err := bufs.WriteTo(c.TCPConn) // one writev
	if c.held = c.held[:0]; cap(c.held) > 64<<10 {
		c.held = nil // rare, large: not kept for the connection's life
	}
	if n -= int64(held); n < 0 {
		n = 0
	}
	return int(n), err
}

// Listener wraps the TCP connections a listener accepts so that
// WriteLarge can send a response in one system call; pass ConnContext as
// the http.Server's ConnContext.
type Listener struct{ net.Listener }

// Accept returns the next connection, wrapped when it is a TCP one.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &conn{TCPConn: tc}, nil
	}
	return c, err
}

type connKey struct{}

// ConnContext puts the request's connection, if Listener wrapped it, in
// its context (an http.Server's ConnContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*conn); ok {
		return context.WithValue(ctx, connKey{}, rc)
	}
	return ctx
}

// WriteLarge writes a response body (w is the request's
// http.ResponseWriter, ctx its context) with the header in one system
// call when the connection allows it.
func WriteLarge(ctx context.Context, w interface{ Write([]byte) (int, error) }, body []byte) {
	rc, _ := ctx.Value(connKey{}).(*conn)
	if rc == nil || len(body) <= 4<<10 {
		_, _ = w.Write(body)
		return
	}
	rc.holdNext()
	_, _ = w.Write(body)
	_ = rc.release()
}
