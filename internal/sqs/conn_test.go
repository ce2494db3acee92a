package sqs

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

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
