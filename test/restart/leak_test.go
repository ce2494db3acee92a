package restart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain builds the real binary once, runs the tests against it, and
// fails them if any goroutine outlives them.
func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "sluice-restart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin, err = build(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(tmp)
		os.Exit(code)
	}))
}

// bin is the `sluice` binary TestMain built, set before any test runs and
// never changed.
var bin string

// build compiles ./cmd/sluice of this module (without -race: only the
// test is instrumented) into dir.
func build(dir string) (string, error) {
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
