package sqs_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sqs"
)

// BenchmarkRequestCycle: the SQS handler's own cost a message, without a
// connection: each op is a SendMessageBatch of ten 1 KiB messages, a
// ReceiveMessage of them and a DeleteMessageBatch, in the JSON protocol
// the lean bench speaks, into a broker on disk (sync=always). Its
// allocs/op and B/op are the handler's and the broker's for ten messages
// (and the recorder's, the same on both sides of an A/B); net/http's
// connection, and its reads and writes, are not in it.
func BenchmarkRequestCycle(b *testing.B) {
	br, err := broker.Open(broker.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	srv := sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, br)
	call := func(op, body string) []byte {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", op, w.Code, w.Body)
		}
		return w.Body.Bytes()
	}
	out := call("CreateQueue", `{"QueueName":"bench"}`)
	url := string(field(out, "QueueUrl"))
	sends := make([]string, 8) // bodies differ, so that nothing is the same every round
	for k := range sends {
		var s strings.Builder
		fmt.Fprintf(&s, `{"QueueUrl":%q,"Entries":[`, url)
		for i := range 10 {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `{"Id":"m%d","MessageBody":"%c%s"}`, i, 'a'+k, strings.Repeat("x", 1023))
		}
		s.WriteString("]}")
		sends[k] = s.String()
	}
	receive := fmt.Sprintf(`{"QueueUrl":%q,"MaxNumberOfMessages":10}`, url)
	var del bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		call("SendMessageBatch", sends[n%len(sends)])
		got := call("ReceiveMessage", receive)
		del.Reset()
		fmt.Fprintf(&del, `{"QueueUrl":%q,"Entries":[`, url)
		k := 0
		for rest := got; ; k++ {
			h := field(rest, "ReceiptHandle")
			if h == nil {
				break
			}
			if k > 0 {
				del.WriteByte(',')
			}
			fmt.Fprintf(&del, `{"Id":"d%d","ReceiptHandle":"%s"}`, k, h)
			rest = rest[bytes.Index(rest, h)+len(h):]
		}
		if k == 0 {
			b.Fatalf("receive: nothing in %s", got)
		}
		del.WriteString("]}")
		call("DeleteMessageBatch", del.String())
	}
}

// field is the first string member name's value in a JSON answer (the
// answers here have no escapes in the members read), or nil.
func field(doc []byte, name string) []byte {
	at := bytes.Index(doc, []byte(`"`+name+`":"`))
	if at < 0 {
		return nil
	}
	v := doc[at+len(name)+4:]
	return v[:bytes.IndexByte(v, '"')]
}
