package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// flockOS says whether OS.Lock is implemented here (lock_unix.go).
func flockOS() bool {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd":
		return true
	}
	return false
}

// TestOSLock: flock locks belong to the open file, so two Locks of one
// file conflict even in one process; the refusal names the holder from
// its note; Close releases.
func TestOSLock(t *testing.T) {
	if !flockOS() {
		t.Skip("no flock on " + runtime.GOOS)
	}
	name := filepath.Join(t.TempDir(), "LOCK")
	first, err := OS{}.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	note, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("pid %d on host %s since ", os.Getpid(), host)
	if !strings.HasPrefix(string(note), want) || !strings.HasSuffix(string(note), "\n") {
		t.Fatalf("the lock file says %q, want a line beginning %q", note, want)
	}

	_, err = OS{}.Lock(name)
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("a second Lock: %v, want ErrLocked", err)
	}
	if le.Name != name || le.Holder != strings.TrimSpace(string(note)) {
		t.Fatalf("a second Lock names %q held by %q, want %q held by %q", le.Name, le.Holder, name, strings.TrimSpace(string(note)))
	}
	if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("the refusal %q does not name the file and the holder's pid", err)
	}
	if after, _ := os.ReadFile(name); string(after) != string(note) {
		t.Fatalf("a refused Lock changed the note: %q, was %q", after, note)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := OS{}.Lock(name)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	second.Close()
}

// TestOSLockLeftByTheDead: a lock file whose holder is gone (its note
// still there, longer than ours) is no lock: Lock takes it and writes its
// own note over the old one.
func TestOSLockLeftByTheDead(t *testing.T) {
	if !flockOS() {
		t.Skip("no flock on " + runtime.GOOS)
	}
	name := filepath.Join(t.TempDir(), "LOCK")
	old := "pid 999999 on host a-machine-long-gone.example.com since 2020-01-01T00:00:00Z\n"
	if err := os.WriteFile(name, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OS{}.Lock(name)
	if err != nil {
		t.Fatalf("a lock file left by a dead process: %v", err)
	}
	defer l.Close()
	note, _ := os.ReadFile(name)
	if want := fmt.Sprintf("pid %d on host ", os.Getpid()); !strings.HasPrefix(string(note), want) || strings.Count(string(note), "\n") != 1 {
		t.Fatalf("the lock file says %q, want our note only", note)
	}
}

// TestOSLockMissingDir: Lock creates the file, never its directory.
func TestOSLockMissingDir(t *testing.T) {
	if !flockOS() {
		t.Skip("no flock on " + runtime.GOOS)
	}
	dir := filepath.Join(t.TempDir(), "absent")
	if _, err := (OS{}).Lock(filepath.Join(dir, "LOCK")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Lock in a missing directory: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Lock created the directory: %v", err)
	}
}

// TestLockErrorUnsupported: the errors of a file system that cannot lock
// are ErrLockUnsupported; others are not.
func TestLockErrorUnsupported(t *testing.T) {
	if !flockOS() {
		t.Skip("no flock on " + runtime.GOOS)
	}
	for _, errno := range []syscall.Errno{syscall.ENOLCK, syscall.EOPNOTSUPP, syscall.ENOTSUP, syscall.ENOSYS} {
		err := lockError("/d/LOCK", errno)
		if !errors.Is(err, ErrLockUnsupported) || !strings.Contains(err.Error(), errno.Error()) {
			t.Errorf("%v: %v, want ErrLockUnsupported naming the cause", errno, err)
		}
		if !strings.Contains(err.Error(), "/d/LOCK") {
			t.Errorf("%v: %q does not name the file", errno, err)
		}
	}
	if err := lockError("/d/LOCK", syscall.EBADF); errors.Is(err, ErrLockUnsupported) || !errors.Is(err, syscall.EBADF) {
		t.Errorf("EBADF: %v, want it as it is", err)
	}
}

func TestParseHolder(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"pid 1 on host h since 2026-12-05T10:00:00Z\n", "pid 1 on host h since 2026-12-05T10:00:00Z"},
		{"", ""},
		{"\x00\x00\x00", ""},
		{"pid 2 on host \x1b[31mred\nsecond line", "pid 2 on host [31mred"},
		{strings.Repeat("x", 1000), strings.Repeat("x", maxNote)},
	} {
		if got := parseHolder([]byte(c.in)); got != c.want {
			t.Errorf("parseHolder(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestMemLock: a second Lock of a path is refused until the first is
// closed; a crash releases every lock.
func TestMemLock(t *testing.T) {
	m := NewMem()
	first, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/d/LOCK"); err != nil {
		t.Fatalf("Lock did not create the file: %v", err)
	}
	if _, err := m.Lock("/d/./LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Lock: %v, want ErrLocked", err)
	}
	other, err := m.Lock("/e/LOCK")
	if err != nil {
		t.Fatalf("another path: %v", err)
	}
	other.Close()

	crashed := m.Crash()
	after, err := crashed.Lock("/d/LOCK")
	if err != nil {
		t.Fatalf("Lock after a crash: %v", err)
	}
	if _, err := m.Lock("/d/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("the file system that crashed lost its own lock: %v", err)
	}

	first.Close()
	again, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	first.Close() // closing twice must not release the new holder's lock
	if _, err := m.Lock("/d/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("a stale Close released the new lock: %v", err)
	}
	again.Close()
	after.Close()
}

// TestFaultLock: the fault injector passes Lock through.
func TestFaultLock(t *testing.T) {
	f := NewFault(NewMem())
	l, err := f.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Lock("/d/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Lock through Fault: %v, want ErrLocked", err)
	}
	l.Close()
}
