package sqs

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicemq/sluice/internal/broker"
)

// brokerServer returns a server over a broker on disk in a temporary
// directory.
func brokerServer(t *testing.T) *Server {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return NewServer(ServerConfig{}, b)
}

func TestRequestMetrics(t *testing.T) {
	srv := brokerServer(t)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	post := func(op, body string) int {
		req, _ := http.NewRequest("POST", hs.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	post("CreateQueue", `{"QueueName":"m"}`)
	post("SendMessage", `{"QueueUrl":"m","MessageBody":"x"}`)
	post("SendMessage", `{"QueueUrl":"nope","MessageBody":"x"}`)
	post("NoSuchAction", `{}`)
	post("NoSuchAction2", `{}`)

	want := `
# HELP sluice_request_errors_total Requests answered with an error, by SQS action and error code.
# TYPE sluice_request_errors_total counter
sluice_request_errors_total{action="SendMessage",code="QueueDoesNotExist"} 1
sluice_request_errors_total{action="unknown",code="InvalidAction"} 2
`
	if err := testutil.CollectAndCompare(srv.Collector(), strings.NewReader(want), "sluice_request_errors_total"); err != nil {
		t.Error(err)
	}
	// Durations: one series per known action, unknown ones pooled.
	if n := testutil.CollectAndCount(srv.Collector(), "sluice_request_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3 (CreateQueue, SendMessage, unknown)", n)
	}
}
