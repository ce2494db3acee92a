package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

var noLog = slog.New(slog.DiscardHandler)

// verifyDir writes a stopped data directory: queue "small" with 3
// messages, then "big" with 300 of 1 KiB, in segments of 64 KiB, with
// every queue snapshotted before the broker closed, so that the early
// segments hold only bodies (as in TestUnreadableBodiesAreCounted).
func verifyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := broker.Open(broker.Config{Dir: dir, SegmentBytes: 64 << 10, CheckpointBytes: 128 << 10, NoPreallocate: true, Logger: noLog})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	for _, q := range []struct {
		name string
		n    int
	}{{"small", 3}, {"big", 300}} {
		if _, err := b.CreateQueue(ctx, q.name, nil, nil); err != nil {
			t.Fatal(err)
		}
		for i := range q.n {
			if _, err := b.Send(ctx, q.name, st.SendInput{Body: fmt.Sprintf("%s-%06d-%s", q.name, i, strings.Repeat("x", 1000))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runVerify runs `sluice verify args...` with SLUICE_DATA_DIR set to env.
func runVerify(envDir string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"verify"}, args...), Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "SLUICE_DATA_DIR" {
			return envDir
		}
		return ""
	}})
	return out.String(), errb.String(), code
}

// verifyLine returns the figures verify printed for queue name: messages,
// unreadable and the first error ("-" for none).
func verifyLine(t *testing.T, out, name string) (messages, unreadable int, first string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == name {
			m, err1 := strconv.Atoi(f[1])
			u, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil {
				t.Fatalf("queue line %q", l)
			}
			return m, u, strings.Join(f[3:], " ")
		}
	}
	t.Fatalf("no line for queue %s in:\n%s", name, out)
	return 0, 0, ""
}

func TestVerifyHealthy(t *testing.T) {
	dir := verifyDir(t)
	for _, tc := range []struct {
		name   string
		envDir string
		args   []string
	}{
		{"flag", "", []string{"--data-dir", dir}},
		{"environment", dir, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runVerify(tc.envDir, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d on a healthy directory:\n%s%s", code, out, errs)
			}
			if m, u, first := verifyLine(t, out, "big"); m != 300 || u != 0 || first != "-" {
				t.Errorf("big: %d messages, %d unreadable, %q", m, u, first)
			}
			if m, u, first := verifyLine(t, out, "small"); m != 3 || u != 0 || first != "-" {
				t.Errorf("small: %d messages, %d unreadable, %q", m, u, first)
			}
			if !strings.Contains(out, "total: 2 queues, 303 messages, 0 unreadable") {
				t.Errorf("total missing:\n%s", out)
			}
		})
	}
	// The check changed nothing a start would see.
	b, err := broker.Open(broker.Config{Dir: dir, NoPreallocate: true, Logger: noLog})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if s := b.StoreStats(); s.LiveMessages != 303 || s.Unreadable != 0 {
		t.Fatalf("after verify: %d live, %d unreadable", s.LiveMessages, s.Unreadable)
	}
}

// TestVerifyUnreadable: a segment holding bodies is gone. Verify counts
// the messages it cannot read back, names why, and exits non-zero.
func TestVerifyUnreadable(t *testing.T) {
	dir := verifyDir(t)
	segs, _ := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	slices.Sort(segs)
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %v", segs)
	}
	if err := os.Remove(segs[1]); err != nil { // the second: big's bodies only
		t.Fatal(err)
	}
	rep, err := broker.Verify(broker.Config{Dir: dir, NoPreallocate: true, Logger: noLog})
	if err != nil {
		t.Fatal(err)
	}
	lost := rep.Unreadable()
	if lost == 0 || lost == 300 {
		t.Fatalf("setup: %d unreadable", lost)
	}
	out, errs, code := runVerify("", "--data-dir", dir)
	if code == 0 {
		t.Fatalf("exit 0 with unreadable messages:\n%s", out)
	}
	m, u, first := verifyLine(t, out, "big")
	if m != 300 || u != lost || first == "-" {
		t.Errorf("big: %d messages, %d unreadable, %q; want 300, %d and an error", m, u, first, lost)
	}
	if m, u, _ := verifyLine(t, out, "small"); m != 3 || u != 0 {
		t.Errorf("small: %d messages, %d unreadable", m, u)
	}
	if want := fmt.Sprintf("total: 2 queues, 303 messages, %d unreadable", lost); !strings.Contains(out, want) {
		t.Errorf("want %q in:\n%s", want, out)
	}
	if want := fmt.Sprintf("%d of 303 messages cannot be read back", lost); !strings.Contains(errs, want) {
		t.Errorf("want %q on stderr:\n%s", want, errs)
	}
}

// TestVerifyRefuses: a directory that is missing, or holds no log, is
// refused with a reason, and nothing is created in it.
func TestVerifyRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()
	file := filepath.Join(empty, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", missing}, "data directory " + missing + " does not exist"},
		{[]string{"--data-dir", file}, file + " is not a directory"},
		{[]string{"--data-dir", empty}, "holds no log segment"},
		{[]string{"--data-dir", empty, "extra"}, `unexpected argument "extra"`},
	} {
		out, errs, code := runVerify("", tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("verify %v: exit %d, stderr %q, stdout %q; want %q", tc.args, code, errs, out, tc.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("verify created %s: %v", missing, err)
	}
	if es, _ := os.ReadDir(empty); len(es) != 1 {
		t.Errorf("verify wrote into %s: %v", empty, es)
	}
	// The help says the server must be stopped.
	_, errs, code := runVerify("", "-h")
	if code != 0 || !strings.Contains(errs, "Stop the server first") {
		t.Errorf("help: exit %d:\n%s", code, errs)
	}
}

// TestVerifyDamage: one bit flipped in the middle of the newest segment.
// verify names the stretch and what a salvage would lose, and exits 1;
// verify --salvage keeps every other message, names the lost ones and
// exits 0; a plain check after it finds nothing.
func TestVerifyDamage(t *testing.T) {
	dir := verifyDir(t)
	segs, _ := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	slices.Sort(segs)
	newest := segs[len(segs)-1]
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	// The newest segment holds "big"'s last bodies, one a frame: flip a
	// bit in the body of the frame in its middle.
	at := bytes.LastIndex(b[:len(b)/2], []byte("big-000")) + 20
	if at < 20 {
		t.Fatalf("no body in the first half of %s", newest)
	}
	b[at] ^= 0x04
	if err := os.WriteFile(newest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runVerify("", "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "damaged: "+filepath.Base(newest)+" at offset") || !strings.Contains(out, "damaged: big: 0 messages lost, 1 without a body") ||
		!strings.Contains(errs, "1 damaged stretches") {
		t.Fatalf("verify of a damaged directory: exit %d\n%s%s", code, out, errs)
	}
	if _, err := broker.Open(broker.Config{Dir: dir, NoPreallocate: true, Logger: noLog}); !errors.Is(err, broker.ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(newest)) {
		t.Fatalf("a start on the damaged directory: %v", err)
	}
	out, errs, code = runVerify("", "--data-dir", dir, "--salvage")
	if code != 0 || !strings.Contains(out, "salvaged: big: 0 messages lost, 1 without a body") || !strings.Contains(out, "total: 2 queues, 302 messages, 0 unreadable") {
		t.Fatalf("verify --salvage: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runVerify("", "--data-dir", dir)
	if code != 0 || strings.Contains(out, "damaged:") {
		t.Fatalf("verify after the salvage: exit %d\n%s%s", code, out, errs)
	}
}
