// Package datadir owns a data directory's lock: the file LOCK in it,
// held exclusively by the one process that uses the directory (a server
// for its whole life, `sluice verify` while it checks), and the errors a
// user sees when another process holds it or the file system cannot
// lock.
//
// It must not read or write anything else in the directory, nor create
// the directory: whoever opens a data directory takes the lock first,
// and only then reads, truncates or writes in it.
package datadir

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/sluicemq/sluice/internal/vfs"
)

// LockName is the lock file's name in a data directory. Its contents
// say who holds it (pid, host, since when); a file left by a process that
// is gone is no lock.
const LockName = "LOCK"

// InUseError is a data directory another process holds.
type InUseError struct {
	Dir    string
	Holder string // as the holder wrote it ("pid 1234 on host h since ..."); "" if it did not
	err    error  // the file system's refusal (vfs.ErrLocked)
}

func (e *InUseError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "which has not said who it is yet"
	}
	return fmt.Sprintf("data directory %s is in use by another process (%s): stop it, or give this one another --data-dir", e.Dir, holder)
}

// Unwrap makes errors.Is(err, vfs.ErrLocked) hold.
func (e *InUseError) Unwrap() error { return e.err }

// Lock takes dir's lock, which holds until the returned Closer is closed
// (closing it more than once is harmless). dir must exist: Lock never
// creates it. Another holder is refused at once (*InUseError); so is a
// file system that cannot lock files (vfs.ErrLockUnsupported), where a
// second server could open the directory unseen.
func Lock(fs vfs.FS, dir string) (io.Closer, error) {
	dir = filepath.Clean(dir)
	l, err := fs.Lock(filepath.Join(dir, LockName))
	var held *vfs.LockedError
	switch {
	case err == nil:
		return &lock{c: l}, nil
	case errors.As(err, &held):
		return nil, &InUseError{Dir: dir, Holder: held.Holder, err: err}
	case errors.Is(err, vfs.ErrLockUnsupported):
		return nil, fmt.Errorf("data directory %s cannot be locked, so nothing would keep a second server out of it: %w; "+
			"use a local file system (docs/operations.md, \"The data directory's lock\")", dir, err)
	}
	return nil, fmt.Errorf("data directory %s: taking its lock: %w", dir, err)
}

// lock is a held lock that may be closed more than once, from any
// goroutine (a broker's Close may be called again).
type lock struct {
	c    io.Closer
	once sync.Once
	err  error
}

func (l *lock) Close() error {
	l.once.Do(func() { l.err = l.c.Close() })
	return l.err
}

// Create makes dir if it is missing (as a server's first start does),
// then takes its lock (Lock).
func Create(fs vfs.FS, dir string) (io.Closer, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", filepath.Clean(dir), err)
	}
	return Lock(fs, dir)
}
