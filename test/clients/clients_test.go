// Package clients runs real AWS clients against a real `sluice serve`, for
// SQS and for SNS: Debian's awscli and python3-boto3 (Query protocol), the
// machine's current boto3 (JSON protocol for SQS) and @aws-sdk/client-sqs
// (JSON protocol) with @aws-sdk/client-sns. SNS is the Query protocol in
// every one of them. Two libraries built on them drive SQS alone: Debian's
// Celery (kombu's SQS transport) and bbc/sqs-consumer.
//
// A missing client fails the test with the command that installs it, unless
// SLUICE_SKIP_CLIENT_TESTS=1.
package clients

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"
)

// syncBuffer collects the server's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingLine = regexp.MustCompile(`msg="sluice serving" sqs=(\S+) admin=(\S+)`)

// startServer builds and runs `sluice serve` on loopback with a temp dir.
// The server picks its own ports (127.0.0.1:0, so no other test can take
// them in between) and the test reads them from its "sluice serving" line.
func startServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", bin, "github.com/sluicemq/sluice/cmd/sluice")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "info")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(logs, sc.Text())
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-scanned: // the pipe closes when the process exits
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-scanned
			t.Errorf("sluice serve did not stop on SIGINT\n%s", logs.String())
			cmd.Wait()
			return
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("sluice serve exited with %v\n%s", err, logs.String())
		}
	})
	select {
	case url := <-serving:
		return url
	case <-scanned:
		t.Fatalf("sluice serve exited before serving\n%s", logs.String())
	}
	return ""
}

func need(t *testing.T, path, install string) {
	t.Helper()
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
			t.Skipf("%s missing (SLUICE_SKIP_CLIENT_TESTS=1)", path)
		}
		t.Fatalf("%s is missing: %s (or set SLUICE_SKIP_CLIENT_TESTS=1)", path, install)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true", "NODE_NO_WARNINGS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s %v:\n%s", name, args, out)
	if err != nil {
		t.Fatalf("%s failed: %v", name, err)
	}
}

// realClient is one client the project supports: ready skips or fails the
// test when the client is not installed, and sqs and sns are the commands
// that drive each service (the endpoint is appended; sns nil: a client of
// SQS alone).
type realClient struct {
	name     string
	ready    func(t *testing.T)
	sqs, sns []string
}

func realClients() []realClient {
	return []realClient{{
		name:  "boto3-query-debian",
		ready: func(t *testing.T) { debianPython(t, "boto3", "python3-boto3") },
		sqs:   []string{"/usr/bin/python3", "boto_client.py"},
		sns:   []string{"/usr/bin/python3", "boto_sns.py"},
	}, {
		// Celery over kombu's SQS transport: kombu 5.2 sends with boto3
		// and receives with its own Query-protocol client on pycurl.
		name: "celery-debian",
		ready: func(t *testing.T) {
			debianPython(t, "celery, kombu, pycurl, boto3", "python3-celery python3-kombu python3-pycurl python3-boto3")
		},
		sqs: []string{"/usr/bin/python3", "celery_client.py"},
	}, {
		name: "awscli-query-debian",
		ready: func(t *testing.T) {
			need(t, "/usr/bin/aws", "apt-get install -y awscli")
			t.Setenv("AWS_CLI", "/usr/bin/aws")
		},
		sqs: []string{"bash", "awscli.sh"},
		sns: []string{"bash", "awscli_sns.sh"},
	}, {
		// This boto3 speaks JSON to SQS; SNS is Query in every botocore.
		name: "boto3-json",
		ready: func(t *testing.T) {
			py, err := exec.LookPath("python3")
			if err != nil || py == "/usr/bin/python3" || exec.Command(py, "-c", "import boto3, botocore; assert tuple(map(int, botocore.__version__.split('.')[:2])) >= (1, 34)").Run() != nil {
				t.Skip("no boto3 >= 1.34 (JSON protocol) on this machine's python3")
			}
		},
		sqs: []string{"python3", "boto_client.py"},
		sns: []string{"python3", "boto_sns.py"},
	}, {
		// @aws-sdk/client-sqs (JSON) and @aws-sdk/client-sns (Query).
		name:  "js-sdk-json",
		ready: func(t *testing.T) { nodeModules(t, "@aws-sdk/client-sqs", "@aws-sdk/client-sns") },
		sqs:   []string{"node", "node/client.mjs"},
		sns:   []string{"node", "node/sns.mjs"},
	}, {
		// bbc/sqs-consumer over @aws-sdk/client-sqs (JSON): a polling
		// consumer, one message at a time and in batches, that deletes
		// what its handler took and makes visible again what it failed.
		name:  "sqs-consumer",
		ready: func(t *testing.T) { nodeModules(t, "sqs-consumer", "@aws-sdk/client-sqs") },
		sqs:   []string{"node", "node/consumer.mjs"},
	}}
}

// debianPython skips or fails the test unless Debian's python3 imports
// modules (comma-separated), which packages install.
func debianPython(t *testing.T, modules, packages string) {
	t.Helper()
	install := "apt-get install -y " + packages
	need(t, "/usr/bin/python3", install)
	if exec.Command("/usr/bin/python3", "-c", "import "+modules).Run() != nil {
		if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
			t.Skipf("Debian's %s missing", modules)
		}
		t.Fatalf("Debian's %s is missing: %s", modules, install)
	}
}

// nodeModules skips or fails the test unless Node.js and the modules named
// (test/clients/node's package.json) are installed.
func nodeModules(t *testing.T, modules ...string) {
	t.Helper()
	need(t, "node", "install Node.js")
	for _, m := range modules {
		if _, err := os.Stat(filepath.Join("node/node_modules", m)); err != nil {
			if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
				t.Skip("node_modules missing")
			}
			t.Fatal("node modules missing: run (cd test/clients/node && npm ci)")
		}
	}
}

// TestRealClients drives one server with every client, SQS first, then
// SNS (topics fanning out to queues the same client creates and reads).
func TestRealClients(t *testing.T) {
	url := startServer(t)
	for _, c := range realClients() {
		t.Run(c.name, func(t *testing.T) {
			c.ready(t)
			t.Run("sqs", func(t *testing.T) { run(t, c.sqs[0], slices.Concat(c.sqs[1:], []string{url})...) })
			if c.sns != nil {
				t.Run("sns", func(t *testing.T) { run(t, c.sns[0], slices.Concat(c.sns[1:], []string{url})...) })
			}
		})
	}
	fmt.Fprintln(os.Stderr, "real-client checks done against", url)
}
