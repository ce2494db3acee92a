package loadgen

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/sqs/sqstest"

	"github.com/sluicemq/sluice/internal/broker"
)

// startServer runs the SQS server on a loopback port over a broker in
// memory and returns its URL.
func startServer(t *testing.T) string {
	url, _ := sqstest.Serve(t, broker.Config{InMemory: true})
	return url
}

// The bench's own connections: a connection the server closed while idle
// is replaced without failing the request; errors come back as HTTP
// statuses with the server's body.
func TestConnPoster(t *testing.T) {
	ep := startServer(t)
	p, err := newPoster(ep, http.DefaultClient, 4)
	if err != nil {
		t.Fatal(err)
	}
	cp, ok := p.(*connPoster)
	if !ok {
		t.Fatalf("newPoster(%s) = %T, want *connPoster", ep, p)
	}
	ctx := context.Background()
	status, body, err := cp.post(ctx, "CreateQueue", []byte(`{"QueueName":"cp"}`))
	if err != nil || status != 200 || !strings.Contains(string(body), "/cp") {
		t.Fatalf("CreateQueue: %d %s %v", status, body, err)
	}
	// An idle connection the server has closed (as its idle timeout does):
	// the next request on it fails before any answer and goes again on a
	// new connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	dead, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-closed // the far end has closed it (the FIN may still be on its way: either way the request must go again)
	rc := <-cp.free
	rc.c.Close()
	rc.c, rc.br = dead, bufio.NewReader(dead)
	rc.bw.Reset(dead)
	cp.free <- rc
	status, body, err = cp.post(ctx, "GetQueueUrl", []byte(`{"QueueName":"cp"}`))
	if err != nil || status != 200 {
		t.Fatalf("after the server closed the idle connection: %d %s %v", status, body, err)
	}
	status, body, err = cp.post(ctx, "GetQueueUrl", []byte(`{"QueueName":"missing"}`))
	if err != nil || status != 400 || !strings.Contains(string(body), "QueueDoesNotExist") {
		t.Fatalf("missing queue: %d %s %v", status, body, err)
	}
	// A cancelled context fails the call and the connection is not reused.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := cp.post(cctx, "ListQueues", []byte(`{}`)); err == nil {
		t.Fatal("post with a cancelled context succeeded")
	}
	// https and other endpoints go through net/http's client.
	if p, _ := newPoster("https://example.com", http.DefaultClient, 4); p == nil {
		t.Fatal("no poster for https")
	} else if _, ok := p.(*stdPoster); !ok {
		t.Fatalf("https endpoint: %T, want *stdPoster", p)
	}
}
