package sqs

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
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
	server, err := respListener{ln}.Accept()
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
	rc, ok := server.(*respConn)
	if !ok {
		t.Fatalf("accepted %T, want *respConn", server)
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
	rc := server.(*respConn)
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
	writeLarge(context.Background(), &w, body)
	if !bytes.Equal(w.Bytes(), body) {
		t.Fatalf("wrote %d bytes, want %d", w.Len(), len(body))
	}
}

// A large response through the real server arrives whole, after its
// header, on a kept-alive connection that then carries the next request.
func TestLargeResponsesOverOneConnection(t *testing.T) {
	srv := brokerServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	post := func(op, body string) string {
		req := "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS." + op + "\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d, %v: %s", op, resp.StatusCode, err, out)
		}
		return string(out)
	}
	post("CreateQueue", `{"QueueName":"big"}`)
	big := strings.Repeat("m", 6000)
	for i := 0; i < 3; i++ {
		post("SendMessage", `{"QueueUrl":"big","MessageBody":"`+big+`"}`)
	}
	got := post("ReceiveMessage", `{"QueueUrl":"big","MaxNumberOfMessages":10}`)
	if n := strings.Count(got, big); n != 3 {
		t.Fatalf("receive answered %d bytes holding %d of the 3 bodies", len(got), n)
	}
	if got := post("GetQueueUrl", `{"QueueName":"big"}`); !strings.Contains(got, "/big") {
		t.Fatalf("next request on the connection: %q", got)
	}
}
