//go:build linux || darwin || freebsd || netbsd || openbsd

package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Lock takes an exclusive flock on name (created if missing) and writes
// this process's note into it (pid, host, since when), fsynced. The lock
// belongs to the open file: it holds until Close, or until the process
// ends however it ends (kill -9 included), so nothing stale is ever left
// behind; the note left in the file by a dead holder is only text. Two
// Locks of one file conflict even in one process.
//
// A lock held elsewhere is refused at once with a *LockedError (ErrLocked)
// that names the holder from its note. A file system that cannot lock
// (ENOLCK, EOPNOTSUPP, ENOSYS: some network file systems) is refused with
// ErrLockUnsupported.
func (OS) Lock(name string) (io.Closer, error) {
	// Not O_TRUNC: a refused Lock must not touch the holder's note.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, syscall.EROFS) {
		return lockReadOnly(name)
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, maxNote)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			return nil, &LockedError{Name: name, Holder: parseHolder(b[:n])}
		}
		f.Close()
		return nil, lockError(name, err)
	}
	// The note is written over the old one, then cut to its length: on a
	// full disk the block the old note had is reused.
	note := holderNote()
	if _, err := f.WriteAt([]byte(note), 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(int64(len(note))); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil // closing the file releases the lock
}

// lockReadOnly locks name on a read-only file system (a check of a copy
// mounted read-only): the lock is taken if the file is there, without a
// note; if it is not, nobody can write there, so there is nobody to keep
// out.
func lockReadOnly(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Name: name}
		}
		return nil, lockError(name, err)
	}
	return f, nil
}

// flock takes f's exclusive lock without waiting.
func flock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return lerr
}

// lockError is the error for a flock that failed for a reason other than
// a holder: ErrLockUnsupported where the file system cannot lock.
func lockError(name string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.ENOSYS):
		return fmt.Errorf("%w: flock %s: %v", ErrLockUnsupported, name, err)
	}
	return &os.PathError{Op: "flock", Path: name, Err: err}
}
