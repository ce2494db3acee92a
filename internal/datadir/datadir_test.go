package datadir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestInUse: a second Lock of a directory is refused with an error that
// names the directory and the holder and says what to do; Close releases,
// twice harmlessly.
func TestInUse(t *testing.T) {
	dir := t.TempDir()
	first, err := Lock(vfs.OS{}, dir+"/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(vfs.OS{}, dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("a second Lock: %v, want an InUseError", err)
	}
	want := fmt.Sprintf("data directory %s is in use by another process (pid %d on host ", dir, os.Getpid())
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "): stop it, or give this one another --data-dir") {
		t.Fatalf("the refusal says %q, want %q...", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	again, err := Lock(vfs.OS{}, dir)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	again.Close()
	if note, _ := os.ReadFile(filepath.Join(dir, LockName)); !strings.HasPrefix(string(note), fmt.Sprintf("pid %d ", os.Getpid())) {
		t.Fatalf("%s says %q", LockName, note)
	}
}

// TestMissingDir: Lock never creates the directory.
func TestMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	_, err := Lock(vfs.OS{}, dir)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Lock of a missing directory: %v, want ErrNotExist naming it", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Lock created the directory: %v", err)
	}
}

// TestCreate: Create makes the directory Lock will not.
func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "d")
	l, err := Create(vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Lock(vfs.OS{}, dir); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Lock of a directory Create holds: %v", err)
	}
}

// noLocks is a file system that cannot lock files.
type noLocks struct{ vfs.FS }

func (noLocks) Lock(name string) (io.Closer, error) {
	return nil, fmt.Errorf("%w: flock %s: %v", vfs.ErrLockUnsupported, name, "operation not supported")
}

// TestUnsupported: a file system that cannot lock is refused, and the
// error says to use a local one.
func TestUnsupported(t *testing.T) {
	_, err := Lock(noLocks{vfs.NewMem()}, "/nfs/d")
	if !errors.Is(err, vfs.ErrLockUnsupported) {
		t.Fatalf("Lock on a file system without locks: %v, want ErrLockUnsupported", err)
	}
	for _, s := range []string{"data directory /nfs/d cannot be locked", "operation not supported", "use a local file system"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not say %q", err, s)
		}
	}
}

// TestMem: the in-memory file system's locks behave alike, and a crash
// releases them.
func TestMem(t *testing.T) {
	m := vfs.NewMem()
	l, err := Lock(m, "/d")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Lock(m, "/d"); !errors.Is(err, vfs.ErrLocked) || !strings.Contains(err.Error(), "data directory /d is in use") {
		t.Fatalf("a second Lock: %v", err)
	}
	c, err := Lock(m.Crash(), "/d")
	if err != nil {
		t.Fatalf("Lock after a crash: %v", err)
	}
	c.Close()
}
