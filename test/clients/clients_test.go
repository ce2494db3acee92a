// Package clients runs real AWS clients against a real `sluice serve`:
// Debian's awscli and python3-boto3 (Query protocol), the machine's current
// boto3 (JSON protocol) and @aws-sdk/client-sqs (JSON protocol).
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

func TestRealClients(t *testing.T) {
	url := startServer(t)
	t.Run("boto3-query-debian", func(t *testing.T) {
		need(t, "/usr/bin/python3", "apt-get install -y python3-boto3")
		if exec.Command("/usr/bin/python3", "-c", "import boto3").Run() != nil {
			if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
				t.Skip("python3-boto3 missing")
			}
			t.Fatal("Debian's boto3 is missing: apt-get install -y python3-boto3")
		}
		run(t, "/usr/bin/python3", "boto_client.py", url)
	})
	t.Run("awscli-query-debian", func(t *testing.T) {
		need(t, "/usr/bin/aws", "apt-get install -y awscli")
		t.Setenv("AWS_CLI", "/usr/bin/aws")
		run(t, "bash", "awscli.sh", url)
	})
	t.Run("boto3-json", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil || py == "/usr/bin/python3" || exec.Command(py, "-c", "import boto3, botocore; assert tuple(map(int, botocore.__version__.split('.')[:2])) >= (1, 34)").Run() != nil {
			t.Skip("no boto3 >= 1.34 (JSON protocol) on this machine's python3")
		}
		run(t, py, "boto_client.py", url)
	})
	t.Run("js-sdk-json", func(t *testing.T) {
		need(t, "node", "install Node.js")
		if _, err := os.Stat("node/node_modules/@aws-sdk/client-sqs"); err != nil {
			if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
				t.Skip("node_modules missing")
			}
			t.Fatal("node modules missing: run (cd test/clients/node && npm ci)")
		}
		run(t, "node", "node/client.mjs", url)
	})
	fmt.Fprintln(os.Stderr, "real-client checks done against", url)
}
