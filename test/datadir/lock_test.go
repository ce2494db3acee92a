package datadir

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/testkit"
	"github.com/sluicemq/sluice/test/traffic"
)

// Bounds on waiting for a process: generous for a loaded machine (every
// test package at once under -race on two cores), so only a hang
// reaches them.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
	testTimeout  = 4 * time.Minute
)

var bodies = testkit.Bodies{Size: 256, Tag: 'd'}

// server is one running `sluice serve` and its SQS client.
type server struct {
	p     *process.Process
	tr    *http.Transport
	cl    *sqs.Client
	admin string // the admin API's URL
}

// launch starts `sluice serve` on dir, on ports of its own, and returns
// without waiting for it to serve.
func launch(t *testing.T, dir string) *process.Process {
	t.Helper()
	p, err := process.Start(process.Config{Bin: bin,
		Args: []string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", dir,
			"--preallocate=false", "--log-level", "info"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// serve starts `sluice serve` on dir and returns once it serves.
func serve(t *testing.T, dir string) *server {
	t.Helper()
	return attach(t, launch(t, dir), dir)
}

// attach waits until p, a `sluice serve` on dir, serves, and returns it
// with its client.
func attach(t *testing.T, p *process.Process, dir string) *server {
	t.Helper()
	s := &server{p: p, tr: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}
	t.Cleanup(s.tr.CloseIdleConnections)
	at, err := p.AwaitServing(s.tr, startTimeout)
	if err != nil {
		t.Fatalf("sluice serve on %s: %v\n%s", dir, err, p.Tail())
	}
	s.admin = at.Admin
	// One attempt a request: one the server did not answer is unknown,
	// never retried into something that looks acknowledged twice.
	s.cl = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(at.SQS),
		Credentials:      credentials.NewStaticCredentialsProvider("datadir", "datadir", ""),
		RetryMaxAttempts: 1, HTTPClient: &http.Client{Transport: testkit.BufferedBodies{Next: s.tr}, Timeout: time.Minute}})
	return s
}

// stop stops s: a SIGTERM must end it cleanly.
func (s *server) stop(t *testing.T, how process.Stop) {
	t.Helper()
	if _, err := s.p.Stop(how, stopTimeout); err != nil {
		t.Fatalf("%v\n%s", err, s.p.Tail())
	}
	s.tr.CloseIdleConnections()
}

func queueURL(ctx context.Context, t *testing.T, c *sqs.Client, name string, create bool) string {
	t.Helper()
	if create {
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return *out.QueueUrl
	}
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("queue %s after the restart: %v", name, err)
	}
	return *out.QueueUrl
}

// holderText is how a refusal names a server holding the directory.
func holderText(dir string, pid int) string {
	return fmt.Sprintf("data directory %s is in use by another process (pid %d on host ", dir, pid)
}

// contents is every file under dir, by path, with the hash of its
// contents.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%d bytes %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSecondServerRefused is the first scenario: a second server
// started on a directory a server uses exits at once, non-zero, naming
// the directory and the first server's pid, and so does `sluice verify`;
// neither changes a byte. The first server's 3,000 acknowledged sends all
// come back after it stops and a server starts again on the directory.
func TestSecondServerRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	s1 := serve(t, dir)
	url := queueURL(ctx, t, s1.cl, "dual", true)
	before := contents(t, dir) // s1 is idle: its queue's creation is durable

	p2 := launch(t, dir)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if _, err := p2.AwaitServing(tr, startTimeout); err == nil {
		t.Fatalf("a second server started on %s while pid %d serves it", dir, s1.p.Pid())
	}
	if !p2.Exited() || p2.ExitErr() == nil {
		t.Fatalf("the second server did not exit non-zero: exited %v, %v\n%s", p2.Exited(), p2.ExitErr(), p2.Tail())
	}
	want := holderText(dir, s1.p.Pid())
	if !strings.Contains(p2.Tail(), want) || !strings.Contains(p2.Tail(), "stop it, or give this one another --data-dir") {
		t.Fatalf("the second server's output does not say %q...: stop it, or give this one another --data-dir:\n%s", want, p2.Tail())
	}
	t.Logf("the second server: %v: %s", p2.ExitErr(), lastLine(p2.Tail()))

	vctx, vcancel := context.WithTimeout(ctx, startTimeout)
	out, err := exec.CommandContext(vctx, bin, "verify", "--data-dir", dir).CombinedOutput()
	vcancel()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("sluice verify while pid %d serves %s: %v, want a non-zero exit\n%s", s1.p.Pid(), dir, err, out)
	}
	if !strings.Contains(string(out), want) {
		t.Fatalf("sluice verify does not say %q...:\n%s", want, out)
	}
	t.Logf("sluice verify: %v: %s", err, strings.TrimSpace(string(out)))
	if after := contents(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the refused server and check changed the directory:\nbefore %v\nafter  %v", before, after)
	}

	l := ledger.New(ledger.Config{Bodies: bodies})
	failed := sendAll(ctx, s1.cl, url, l, 3000, 4)
	if n, _ := failed.Count(); n > 0 || l.Acks() != 3000 {
		t.Fatalf("%d of 3000 sends acknowledged: %v", l.Acks(), failed)
	}
	s1.stop(t, process.Term)

	s3 := serve(t, dir)
	failed = traffic.Drain(ctx, []*sqs.Client{s3.cl}, queueURL(ctx, t, s3.cl, "dual", false), l, time.Now())
	v := l.Verdict()
	t.Logf("after the restart: %v (%v)", v, failed)
	if v.Failed() || v.Seen != 3000 {
		t.Fatalf("after the restart: %v", v)
	}
	s3.stop(t, process.Term)
}

// TestKillThenRestart: a server killed with SIGKILL under load leaves no
// stale lock: a server started on its directory at once serves, holds
// the lock under its own pid, and every acknowledged send is there.
func TestKillThenRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	s1 := serve(t, dir)
	url := queueURL(ctx, t, s1.cl, "killed", true)

	// Senders run until the kill fails their requests; the kill comes
	// once 1,000 sends were acknowledged, with more in flight.
	l := ledger.New(ledger.Config{Bodies: bodies})
	sctx, stopSends := context.WithCancel(ctx)
	defer stopSends()
	reached := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for sctx.Err() == nil {
				if _, err := traffic.SendBatch(sctx, s1.cl, url, l, traffic.BatchSize, traffic.NewFailures()); err != nil {
					return
				}
				if l.Acks() >= 1000 {
					once.Do(func() { close(reached) })
				}
			}
		})
	}
	senders := make(chan struct{})
	go func() { wg.Wait(); close(senders) }()
	select {
	case <-reached:
	case <-senders:
		t.Fatalf("the senders stopped after %d acknowledged sends\n%s", l.Acks(), s1.p.Tail())
	case <-ctx.Done():
		t.Fatalf("%d acknowledged sends within %v", l.Acks(), testTimeout)
	}
	s1.stop(t, process.Kill)
	stopSends()
	<-senders
	acked := l.Acks()

	s2 := serve(t, dir)
	note, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("pid %d on host ", s2.p.Pid()); !strings.HasPrefix(string(note), want) {
		t.Fatalf("the lock file says %q, want the new server's %q...", note, want)
	}
	failed := traffic.Drain(ctx, []*sqs.Client{s2.cl}, queueURL(ctx, t, s2.cl, "killed", false), l, time.Now())
	v := l.Verdict()
	t.Logf("killed after %d acknowledged sends; after the restart: %v (%v)", acked, v, failed)
	if v.Failed() || v.MustSee < acked {
		t.Fatalf("after the restart: %v", v)
	}
	s2.stop(t, process.Term)
}

// sendAll sends n messages in batches from senders goroutines.
func sendAll(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, n, senders int) *traffic.Failures {
	failed := traffic.NewFailures()
	batches := make(chan int, n/traffic.BatchSize+1)
	for left := n; left > 0; left -= traffic.BatchSize {
		batches <- min(left, traffic.BatchSize)
	}
	close(batches)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for k := range batches {
				if _, err := traffic.SendBatch(ctx, c, url, l, k, failed); err != nil {
					failed.Add(err, false)
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// lastLine is the last line of a process's output.
func lastLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	return lines[len(lines)-1]
}
