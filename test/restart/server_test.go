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
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/test/testkit"
)

var (
	segmentBytes    = flag.String("restart.segment-bytes", "256KiB", "--segment-bytes of the servers under test")
	checkpointBytes = flag.String("restart.checkpoint-bytes", "2MiB", "--checkpoint-bytes of the servers under test")
)

// stopMode is how a server is stopped.
type stopMode int

const (
	sigterm stopMode = iota // graceful: requests finish, the store is flushed and closed
	sigkill                 // kill -9
)

func (m stopMode) String() string {
	if m == sigkill {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// Bounds on waiting for a server: recovering millions of messages takes a
// while, and none of it may hang a test run.
const (
	startTimeout = 5 * time.Minute
	stopTimeout  = 2 * time.Minute
)

// server is `sluice serve` over one data directory, one process at a time:
// start, stop, start again. Its log figures add up over its processes.
type server struct {
	t      *testing.T
	dir    string
	proc   *process // nil between a stop and the next start
	starts int
	past   logFigures // the stopped processes'
}

// process is one running `sluice serve` and the SDK client that talks to it.
type process struct {
	cmd     *exec.Cmd
	log     *serverLog
	exited  chan struct{} // closed once Wait returned
	waitErr error         // Wait's result, once exited is closed
	tr      *http.Transport
	client  *sqs.Client
	started time.Duration // from exec to the "sluice serving" line: recovery
}

func newServer(t *testing.T) *server {
	s := &server{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		if s.proc != nil {
			s.proc.cmd.Process.Kill()
			<-s.proc.exited
			s.proc.tr.CloseIdleConnections()
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
	log := newServerLog()
	cmd := exec.Command(bin, "serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", s.dir,
		"--segment-bytes", *segmentBytes, "--checkpoint-bytes", *checkpointBytes, "--preallocate=false", "--log-level", "info")
	cmd.Stdout, cmd.Stderr = log, log
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p := &process{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	p.tr = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	s.proc = p
	var addrs [2]string
	select {
	case addrs = <-log.serving:
	case <-p.exited:
		s.proc = nil
		s.t.Fatalf("start %d: sluice serve exited before serving (%v)\n%s", s.starts, p.waitErr, log.tail())
	case <-time.After(startTimeout):
		s.t.Fatalf("start %d: sluice serve did not serve within %v\n%s", s.starts, startTimeout, log.tail())
	}
	p.started = time.Since(begin)
	if err := waitHealthy(p.tr, addrs[1]+"/healthz"); err != nil {
		s.t.Fatalf("start %d: %v\n%s", s.starts, err, log.tail())
	}
	// One attempt a request: a request the server did not answer is
	// unknown (it may or may not have happened), never retried into
	// something that looks acknowledged twice.
	p.client = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(addrs[0]),
		Credentials:      credentials.NewStaticCredentialsProvider("restart", "restart", ""),
		RetryMaxAttempts: 1, HTTPClient: &http.Client{Transport: testkit.BufferedBodies{Next: p.tr}, Timeout: time.Minute}})
}

// waitHealthy asks url once: the server logs that it serves once its
// listeners are open, so a connection is taken (at worst queued until its
// accept loop runs) and answered.
func waitHealthy(tr *http.Transport, url string) error {
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return fmt.Errorf("%s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

// stop stops the running process. A SIGTERM must end it cleanly (exit 0);
// a SIGKILL ends it wherever it is.
func (s *server) stop(how stopMode) {
	s.t.Helper()
	p := s.proc
	sig := syscall.SIGTERM
	if how == sigkill {
		sig = syscall.SIGKILL
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("stop: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.cmd.Process.Kill()
		<-p.exited
		s.t.Fatalf("sluice serve did not stop within %v of %v\n%s", stopTimeout, how, p.log.tail())
	}
	p.tr.CloseIdleConnections()
	s.past.add(p.log.figures())
	s.proc = nil
	if how == sigterm && p.waitErr != nil {
		s.t.Fatalf("sluice serve exited with %v after SIGTERM\n%s", p.waitErr, p.log.tail())
	}
}

// client is the running process's SQS client.
func (s *server) client() *sqs.Client { return s.proc.client }

// figures adds up the log figures of every process so far.
func (s *server) figures() logFigures {
	f := s.past
	if s.proc != nil {
		f.add(s.proc.log.figures())
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
	errors     int      // lines at level ERROR
	unreadable int      // "message record unreadable; dropping the message"
	samples    []string // the first few ERROR lines
	recovered  []string // the "recovered" lines, one a start
}

func (f *logFigures) add(g logFigures) {
	f.errors += g.errors
	f.unreadable += g.unreadable
	f.samples = append(f.samples, g.samples[:min(len(g.samples), max(0, 5-len(f.samples)))]...)
	f.recovered = append(f.recovered, g.recovered...)
}

func (f logFigures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server log: %d ERROR lines, %d \"message record unreadable\"", f.errors, f.unreadable)
	for _, r := range f.recovered {
		fmt.Fprintf(&b, "\n  %s", r)
	}
	for _, l := range f.samples {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	return b.String()
}

var servingLine = regexp.MustCompile(`msg="sluice serving" sqs=(\S+) admin=(\S+)`)

// serverLog takes a process's output line by line: it announces the
// serving addresses, counts errors, and keeps the last lines for failure
// messages.
type serverLog struct {
	serving chan [2]string // the SQS and admin URLs, once

	mu      sync.Mutex
	partial []byte
	last    []string // the last tailLines lines
	figs    logFigures
}

const tailLines = 40

func newServerLog() *serverLog { return &serverLog{serving: make(chan [2]string, 1)} }

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lineLocked(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *serverLog) lineLocked(line string) {
	if len(l.last) == tailLines {
		l.last = l.last[1:]
	}
	l.last = append(l.last, line)
	if m := servingLine.FindStringSubmatch(line); m != nil {
		select {
		case l.serving <- [2]string{m[1], m[2]}:
		default:
		}
	}
	if strings.Contains(line, "msg=recovered") {
		l.figs.recovered = append(l.figs.recovered, line)
	}
	if strings.Contains(line, "level=ERROR") {
		l.figs.errors++
		if len(l.figs.samples) < 5 {
			l.figs.samples = append(l.figs.samples, line)
		}
	}
	if strings.Contains(line, "message record unreadable") {
		l.figs.unreadable++
	}
}

func (l *serverLog) figures() logFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.figs
	f.samples = append([]string(nil), f.samples...)
	f.recovered = append([]string(nil), f.recovered...)
	return f
}

func (l *serverLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n")
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
