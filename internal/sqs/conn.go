package sqs

import (
	"context"
	"net"
)

// net/http writes a response through a 4 KiB buffer: a response larger
// than that (a ReceiveMessage of ten 1 KiB messages is about 13 KiB) goes
// out in two system calls, the buffer with the header and then the rest.
// On a busy loopback each write costs tens of microseconds, about what the
// whole ReceiveMessage costs the broker. A respConn can hold the first
// write of a large response and send it with the second in one writev.

// respConn wraps a TCP connection the server accepted.
type respConn struct {
	*net.TCPConn
	hold bool   // hold the next write
	held []byte // a held write, sent before the next one
}

// holdNext makes the next write wait for the one after it. Call it only
// before a write that is sure to make at least two (more than net/http
// buffers), and call release after it.
func (c *respConn) holdNext() { c.hold = true }

// release sends what is still held (a response that went out in one write
// after all) and stops holding.
func (c *respConn) release() error {
	c.hold = false
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.TCPConn.Write(c.held)
	c.held = c.held[:0]
	return err
}

func (c *respConn) Write(p []byte) (int, error) {
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

// respListener wraps the TCP connections a listener accepts in respConns.
type respListener struct{ net.Listener }

func (l respListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &respConn{TCPConn: tc}, nil
	}
	return c, err
}

type respConnKey struct{}

// connContext puts the request's respConn, if it has one, in its context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*respConn); ok {
		return context.WithValue(ctx, respConnKey{}, rc)
	}
	return ctx
}

// writeLarge writes a response body with the header in one system call
// when the connection allows it.
func writeLarge(ctx context.Context, w interface{ Write([]byte) (int, error) }, body []byte) {
	rc, _ := ctx.Value(respConnKey{}).(*respConn)
	if rc == nil || len(body) <= 4<<10 {
		_, _ = w.Write(body)
		return
	}
	rc.holdNext()
	_, _ = w.Write(body)
	_ = rc.release()
}
