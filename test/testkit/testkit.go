// Package testkit is what the black-box tests under test/ share: the real
// `sluice` binary built once for a test package, and message bodies that
// carry their own id and check themselves.
package testkit

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Main builds the `sluice` binary into a temporary directory (named with
// prefix) and stores its path in *bin (unless build is false: a -short run
// needs none), runs the tests, fails them if any goroutine outlives them,
// and removes the directory. A test package's TestMain calls it.
func Main(m *testing.M, prefix string, build bool, bin *string) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if build {
		if *bin, err = Build(tmp); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(tmp)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(tmp)
		os.Exit(code)
	}))
}

// Build compiles ./cmd/sluice of this module, from the working tree and
// without -race (only the test is instrumented), into dir.
func Build(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("finding the module root: go env GOMOD: %q, %v", gomod, err)
	}
	path := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/sluice")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return path, nil
}

// Bodies makes message bodies of one size and one tag letter: each holds
// its id, then filler that depends on the id, so that a body is checked
// without being kept, and one that comes back under another id, or cut,
// is caught.
type Bodies struct {
	Size int  // bytes, at least 11
	Tag  byte // the first byte
}

// Body is id's body.
func (bs Bodies) Body(id int) string {
	var b strings.Builder
	b.Grow(bs.Size)
	fmt.Fprintf(&b, "%c%09d|", bs.Tag, id)
	fill := fmt.Sprintf("%016x", uint64(id+1)*0x9e3779b97f4a7c15)
	for b.Len() < bs.Size {
		b.WriteString(fill[:min(len(fill), bs.Size-b.Len())])
	}
	return b.String()
}

// ID reads the id out of a body; ok is false if the body is not exactly
// Body(id).
func (bs Bodies) ID(s string) (id int, ok bool) {
	if len(s) != bs.Size || s[0] != bs.Tag || s[10] != '|' {
		return 0, false
	}
	id, err := strconv.Atoi(s[1:10])
	if err != nil || bs.Body(id) != s {
		return 0, false
	}
	return id, true
}

// BufferedBodies sends each request with its body read into memory first.
// The SDK closes a request's body as soon as the response's header
// arrives, and its body then answers WriteTo with io.EOF; net/http, which
// checks a body for bytes beyond its Content-Length after sending it,
// takes that for a failed write and closes the connection under the
// response being read. A ReceiveMessage the server answered then fails
// ("use of closed network connection", about one in 3,000 under -race)
// and its messages stay in flight, which a test would count as lost.
type BufferedBodies struct{ Next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (b BufferedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return b.Next.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(raw))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	out.ContentLength = int64(len(raw))
	return b.Next.RoundTrip(out)
}
