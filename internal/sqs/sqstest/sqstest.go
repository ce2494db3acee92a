// Package sqstest runs a real SQS server for tests: a broker opened with
// the given configuration behind sqs.Server on a loopback port, both shut
// down when the test ends.
package sqstest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/pipenet"
	"github.com/sluicemq/sluice/internal/sqs"
)

// Serve returns the server's URL and the broker behind it.
func Serve(t testing.TB, cfg broker.Config) (string, *broker.Broker) {
	t.Helper()
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		b.Close()
	})
	return "http://" + ln.Addr().String(), b
}

// Piped is a server reached over in-memory pipes (internal/pipenet).
type Piped struct {
	Broker *broker.Broker
	Server *sqs.Server
	// HTTP dials the server; pass it as the SDK's HTTPClient, with any
	// BaseEndpoint (URL is one).
	HTTP *http.Client
	URL  string
}

// ServePipe is Serve over in-memory pipes, for a test inside a
// testing/synctest bubble (loopback sockets are not durably blocking):
// call it inside the bubble, whose cleanups close everything.
func ServePipe(t testing.TB, cfg broker.Config) *Piped {
	t.Helper()
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, b)
	ln := pipenet.New()
	go srv.Serve(ln)
	tr := &http.Transport{DialContext: ln.Dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Shutdown(context.Background())
		ln.Close()
		b.Close()
	})
	return &Piped{Broker: b, Server: srv, HTTP: &http.Client{Transport: tr}, URL: "http://pipe.invalid"}
}
