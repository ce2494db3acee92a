package respconn

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// as the server's listener hands it out.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := Listener{ln}.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// pending reads what has arrived within d.
func pending(t *testing.T, c net.Conn, d time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return string(got)
		}
	}
}

func TestRespConnHoldsOneWriteForTheNext(t *testing.T) {
	server, client := tcpPair(t)
	rc, ok := server.(*conn)
	if !ok {
		t.Fatalf("accepted %T, want *conn", server)
	}
	rc.holdNext()
	if n, err := rc.Write([]byte("header|")); n != 7 || err != nil {
		t.Fatalf("held write = %d, %v", n, err)
	}
	if got := pending(t, client, 50*time.Millisecond); got != "" {
		t.Fatalf("a held write went out alone: %q", got)
	}
	body := strings.Repeat("b", 9000)
	if n, err := rc.Write([]byte(body)); n != len(body) || err != nil {
		t.Fatalf("second write = %d, %v; want %d", n, err, len(body))
	}
	if err := rc.release(); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, client, 200*time.Millisecond); got != "header|"+body {
		t.Fatalf("got %d bytes, want the held write then the body (%d bytes)", len(got), 7+len(body))
	}
	// Holding ends with the pair: later writes go out as they come.
	if _, err := rc.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, client, 200*time.Millisecond); got != "next" {
		t.Fatalf("got %q, want %q", got, "next")
	}
}

func TestRespConnReleaseSendsALoneHeldWrite(t *testing.T) {
	server, client := tcpPair(t)
	rc := server.(*conn)
	rc.holdNext()
	_, _ = rc.Write([]byte("only"))
	if err := rc.release(); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, client, 200*time.Millisecond); got != "only" {
		t.Fatalf("got %q, want the held write after release", got)
	}
}

type sliceWriter struct{ bytes.Buffer }

func TestWriteLargeWithoutARespConn(t *testing.T) {
	var w sliceWriter
	body := []byte(strings.Repeat("z", 10000))
	WriteLarge(context.Background(), &w, body)
	if !bytes.Equal(w.Bytes(), body) {
		t.Fatalf("wrote %d bytes, want %d", w.Len(), len(body))
	}
}
