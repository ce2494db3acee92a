// Command floor answers the SQS JSON requests `sluice bench` makes with no
// queue work at all: net/http serves the connection, the body is read, and
// one canned answer of the same shape and size as Sluice's is written at
// once (a send batch's ten entries, a receive's ten 1 KiB messages while
// any were sent, a delete batch's entries). No store, no fsync, no
// signature, no JSON parsing, no MD5. Its CPU a message under the lean
// bench is the request path's floor on the machine, what any server on
// net/http pays before doing anything (scripts/compare.sh --floor).
//
//	go run ./scripts/floor 127.0.0.1:19460
package main

import (
	"bytes"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// server counts the messages sent and not yet received: a receive answers
// with up to ten of them, or waits up to a second (a long poll) for some.
type server struct {
	mu      sync.Mutex
	waiting int
	arrived chan struct{} // closed and replaced when messages arrive
	message []byte        // one received message's JSON
	bufs    sync.Pool     // *buffers: a request's body and its answer
}

type buffers struct {
	in  bytes.Buffer
	out []byte
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: floor HOST:PORT")
	}
	log.Fatal(http.ListenAndServe(os.Args[1], newServer()))
}

func newServer() *server {
	return &server{
		arrived: make(chan struct{}),
		message: fmt.Appendf(nil, `{"MessageId":"07924b96-a29b-4531-818c-53e578ec39e4","ReceiptHandle":"MToyOjE6YTEzNmVmZmU0M2E1",`+
			`"MD5OfBody":"5d41402abc4b2a76b9719d911017c592","Body":"%s"}`, strings.Repeat("x", 1024)),
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := s.bufs.Get().(*buffers)
	if b == nil {
		b = &buffers{out: make([]byte, 0, 16<<10)}
	}
	defer s.bufs.Put(b)
	b.in.Reset()
	if _, err := b.in.ReadFrom(r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	entries := bytes.Count(b.in.Bytes(), []byte(`"Id"`))
	out := b.out[:0]
	switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.") {
	case "CreateQueue":
		out = fmt.Appendf(out, `{"QueueUrl":"http://%s/000000000000/floor"}`, r.Host)
	case "SendMessageBatch":
		s.mu.Lock()
		s.waiting += entries
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.mu.Unlock()
		out = batchAnswer(out, entries, `","MessageId":"07924b96-a29b-4531-818c-53e578ec39e4","MD5OfMessageBody":"5d41402abc4b2a76b9719d911017c592"}`)
	case "ReceiveMessage":
		n := s.take(r)
		out = append(out, `{"Messages":[`...)
		for i := range n {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, s.message...)
		}
		out = append(out, `]}`...)
	case "DeleteMessageBatch":
		out = batchAnswer(out, entries, `"}`)
	default:
		out = append(out, `{}`...)
	}
	w.Header()["Content-Type"] = []string{"application/x-amz-json-1.0"}
	w.Header()["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.Header()["X-Amzn-Requestid"] = []string{"8d0961b1-f09a-4a11-a9ae-6db28ef5a021"}
	_, _ = w.Write(out)
	b.out = out
}

// take takes up to ten waiting messages, waiting up to a second for one.
func (s *server) take(r *http.Request) int {
	poll := time.NewTimer(time.Second)
	defer poll.Stop()
	for {
		s.mu.Lock()
		n, arrived := min(10, s.waiting), s.arrived
		s.waiting -= n
		s.mu.Unlock()
		if n > 0 {
			return n
		}
		select {
		case <-arrived:
		case <-poll.C:
			return 0
		case <-r.Context().Done():
			return 0
		}
	}
}

// batchAnswer appends a batch answer of n successful entries, each
// {"Id":"i followed by rest.
func batchAnswer(out []byte, n int, rest string) []byte {
	out = append(out, `{"Successful":[`...)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"Id":"`...)
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, rest...)
	}
	return append(out, `]}`...)
}
