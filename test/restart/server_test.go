// Package restart checks, from the outside, that what Sluice acknowledged
// survives restarts: it runs the real `sluice serve` binary on a temp data
// directory, talks to it over HTTP with the AWS SDK, stops it (SIGTERM or
// SIGKILL) and starts it again, and compares what comes back with what the
// server acknowledged. Nothing in it reaches inside the server.
//
// Small segments (256 KiB, -restart.segment-bytes) and checkpoints (2 MiB,
// -restart.checkpoint-bytes) make a few tens of MiB of messages span a
// hundred segments, move the replay floor and unlink segments, as
// gigabytes would with the defaults (64 MiB each).
package restart

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/testkit"
)

var (
	segmentBytes    = flag.String("restart.segment-bytes", "256KiB", "--segment-bytes of the servers under test")
	checkpointBytes = flag.String("restart.checkpoint-bytes", "2MiB", "--checkpoint-bytes of the servers under test")
)

// Bounds on waiting for a server: recovering millions of messages takes a
// while, and none of it may hang a test run.
const (
	startTimeout = 5 * time.Minute
	stopTimeout  = 2 * time.Minute
)

// server is `sluice serve` over one data directory, one process at a time:
// start, stop, start again. Its log figures add up over its processes.
type server struct {
	t     *testing.T
	dir   string
	proc  *process.Process // nil between a stop and the next start
	lines *recoveryLines   // what proc's log says of recovery
	tr    *http.Transport  // proc's connections
	cl    *sqs.Client      // talks to proc
	// started is how long proc took from exec to serving: recovery.
	started time.Duration
	starts  int
	past    logFigures   // the stopped processes'
	downs   atomic.Int64 // stops so far: a request that spans one met the server going down
	// out is set from a stop's start to the next start's serving: a
	// request sent meanwhile met the server down too.
	out atomic.Bool
}

func newServer(t *testing.T) *server {
	s := &server{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		if s.proc != nil {
			s.proc.Kill()
			s.tr.CloseIdleConnections()
			s.proc = nil
		}
	})
	return s
}

// start runs a new process over the data directory and returns once it
// serves: its "sluice serving" line names its addresses (it listens on
// port 0, so no other process can take them in between), and /healthz on
// the admin address answers.
func (s *server) start() {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatal("start: a process is running")
	}
	s.starts++
	lines := &recoveryLines{}
	p, err := process.Start(process.Config{Bin: bin, Line: lines.line,
		Args: []string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", s.dir,
			"--segment-bytes", *segmentBytes, "--checkpoint-bytes", *checkpointBytes, "--preallocate=false", "--log-level", "info"}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.proc, s.lines = p, lines
	s.tr = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	at, err := p.AwaitServing(s.tr, startTimeout)
	if err != nil {
		s.t.Fatalf("start %d: %v\n%s", s.starts, err, p.Tail())
	}
	s.started = at.After
	s.out.Store(false)
	// One attempt a request: a request the server did not answer is
	// unknown (it may or may not have happened), never retried into
	// something that looks acknowledged twice.
	s.cl = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(at.SQS),
		Credentials:      credentials.NewStaticCredentialsProvider("restart", "restart", ""),
		RetryMaxAttempts: 1, HTTPClient: &http.Client{Transport: testkit.BufferedBodies{Next: s.tr}, Timeout: time.Minute}})
}

// stop stops the running process. A SIGTERM must end it cleanly (exit 0);
// a SIGKILL ends it wherever it is.
func (s *server) stop(how process.Stop) {
	s.t.Helper()
	p := s.proc
	s.out.Store(true)
	s.downs.Add(1)
	_, err := p.Stop(how, stopTimeout)
	if !p.Exited() {
		s.t.Fatalf("stop: %v", err) // not signalled
	}
	s.tr.CloseIdleConnections()
	s.past.add(figuresOf(p, s.lines))
	s.proc, s.lines, s.cl = nil, nil, nil
	if err != nil {
		s.t.Fatalf("%v\n%s", err, p.Tail())
	}
}

// client is the running process's SQS client.
func (s *server) client() *sqs.Client { return s.cl }

// figuresOf is what process p's log says (lines: its recovery lines).
func figuresOf(p *process.Process, lines *recoveryLines) logFigures {
	f := logFigures{Figures: p.Figures()}
	f.unreadable, f.recovered = lines.figures()
	return f
}

// figures adds up the log figures of every process so far.
func (s *server) figures() logFigures {
	f := s.past
	f.Samples = slices.Clone(f.Samples)
	f.recovered = slices.Clone(f.recovered)
	if s.proc != nil {
		f.add(figuresOf(s.proc, s.lines))
	}
	return f
}

// segments lists the log segments in the data directory.
func (s *server) segments() map[string]bool {
	s.t.Helper()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	segs := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "log-") && strings.HasSuffix(e.Name(), ".seg") {
			segs[e.Name()] = true
		}
	}
	return segs
}

// segmentWatch counts the segments that appeared and went between looks.
type segmentWatch struct {
	last             map[string]bool
	removed, created int // over every look
}

// look lists the segments and returns how many there are and how many
// went and appeared since the last look.
func (w *segmentWatch) look(s *server) (now, removed, created int) {
	segs := s.segments()
	for n := range w.last {
		if !segs[n] {
			removed++
		}
	}
	for n := range segs {
		if !w.last[n] {
			created++
		}
	}
	w.last = segs
	w.removed += removed
	w.created += created
	return len(segs), removed, created
}

// logFigures is what a server's log says about its health.
type logFigures struct {
	process.Figures
	unreadable int      // "message record unreadable; dropping the message"
	recovered  []string // the "recovered" lines, one a start
}

func (f *logFigures) add(g logFigures) {
	f.Figures.Add(g.Figures)
	f.unreadable += g.unreadable
	f.recovered = append(f.recovered, g.recovered...)
}

func (f logFigures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server log: %d ERROR lines, %d \"message record unreadable\"", f.Errors, f.unreadable)
	for _, r := range f.recovered {
		fmt.Fprintf(&b, "\n  %s", r)
	}
	for _, l := range f.Samples {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	return b.String()
}

// recoveryLines is what one process's log says of its recovery: the
// messages it could not read back, and its "recovered" line.
type recoveryLines struct {
	mu         sync.Mutex
	unreadable int
	recovered  []string
}

// line takes a line of the process's log.
func (r *recoveryLines) line(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.Contains(line, "msg=recovered") {
		r.recovered = append(r.recovered, line)
	}
	if strings.Contains(line, "message record unreadable") {
		r.unreadable++
	}
}

func (r *recoveryLines) figures() (unreadable int, recovered []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreadable, slices.Clone(r.recovered)
}

// createQueue creates the queue the tests use and returns its URL.
func createQueue(t *testing.T, c *sqs.Client) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("restart")})
	if err != nil {
		t.Fatal(err)
	}
	return *out.QueueUrl
}

// queueURL finds the queue after a restart (the URL names the new port).
func queueURL(t *testing.T, c *sqs.Client) string {
	t.Helper()
	out, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("restart")})
	if err != nil {
		t.Fatalf("the queue after a restart: %v", err)
	}
	return *out.QueueUrl
}
