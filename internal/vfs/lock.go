package vfs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrLocked marks a Lock refused because another holder has the file
// locked (a *LockedError says who).
var ErrLocked = errors.New("vfs: file is locked")

// ErrLockUnsupported marks a Lock refused because the file system cannot
// lock files (some network file systems, some FUSE ones), or this
// platform has no implementation: a lock that may not exclude anyone is
// refused rather than taken.
var ErrLockUnsupported = errors.New("vfs: the file system does not support file locks")

// LockedError is a Lock refused because someone else holds the lock.
type LockedError struct {
	Name string // the lock file
	// Holder is who holds it, as the holder wrote it into the file
	// ("pid 1234 on host h since 2026-12-05T10:00:00Z"); "" when the
	// file does not say (the holder has not written it yet, or is not
	// one of ours).
	Holder string
}

func (e *LockedError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("vfs: %s is locked by another process", e.Name)
	}
	return fmt.Sprintf("vfs: %s is locked by %s", e.Name, e.Holder)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }

// holderNote is what a lock's holder writes into the lock file: this
// process, where it runs and since when, on one line a person can read
// with cat.
func holderNote() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// maxNote bounds what is read of a lock file to name its holder.
const maxNote = 256

// parseHolder is the holder named by a lock file's contents: its first
// line, printable characters only, at most maxNote bytes ("" if none).
func parseHolder(b []byte) string {
	s, _, _ := strings.Cut(string(b[:min(len(b), maxNote)]), "\n")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
