// Package vfs is the file-system seam of the store. OS is the real file
// system; Fault wraps any FS and injects the failures a disk can produce
// (no space, failed fsync, short writes, flipped bits) for tests.
package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// File is an open file.
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
}

// FS is the subset of a file system the store uses.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes renames and creations in dir durable.
	SyncDir(dir string) error
	Stat(name string) (os.FileInfo, error)
	// FreeSpace is the space left for files in dir, in bytes, as an
	// unprivileged process may use it (statfs's available blocks).
	FreeSpace(dir string) (int64, error)
	// Lock takes an exclusive advisory lock on the file name (created if
	// missing), held until Close. A lock held by someone else is refused
	// at once with an error wrapping ErrLocked (a *LockedError, naming the
	// holder); a file system that cannot lock, with ErrLockUnsupported.
	Lock(name string) (io.Closer, error)
}

// OS is the real file system.
type OS struct{}

func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}
func (OS) Remove(name string) error                    { return os.Remove(name) }
func (OS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (OS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (OS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }
func (OS) ReadDir(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
func (OS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }
func (OS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Faults selects the failures a Fault file system injects. Fields are
// read under the Fault's lock on every call, so a test may change them
// while the store runs.
type Faults struct {
	// NoSpace makes every write fail with ENOSPC after writing nothing.
	NoSpace bool
	// SyncError makes every fsync fail with EIO.
	SyncError bool
	// ShortWrite makes the next write write half its bytes and fail.
	ShortWrite bool
	// FlipReadBit flips one bit in the middle byte of every read of at
	// least FlipMinLen bytes.
	FlipReadBit bool
	FlipMinLen  int
	// FlipReads flips one bit in the middle byte of the next FlipReads
	// reads of at least FlipMinLen bytes: damage on the way (a bus, a
	// cable, memory), not on the disk, which a second read does not see.
	FlipReads int
}

// ErrInjected marks injected failures.
var ErrInjected = errors.New("vfs: injected fault")

// Fault wraps an FS and injects failures.
type Fault struct {
	FS FS
	mu sync.Mutex
	f  Faults
}

// NewFault wraps fs.
func NewFault(fs FS) *Fault { return &Fault{FS: fs} }

// Set replaces the active faults.
func (f *Fault) Set(x Faults) { f.mu.Lock(); f.f = x; f.mu.Unlock() }

func (f *Fault) get() Faults { f.mu.Lock(); defer f.mu.Unlock(); return f.f }

func (f *Fault) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fl, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: fl, fs: f}, nil
}
func (f *Fault) Remove(name string) error                    { return f.FS.Remove(name) }
func (f *Fault) Rename(o, n string) error                    { return f.FS.Rename(o, n) }
func (f *Fault) ReadDir(dir string) ([]string, error)        { return f.FS.ReadDir(dir) }
func (f *Fault) MkdirAll(dir string, perm os.FileMode) error { return f.FS.MkdirAll(dir, perm) }
func (f *Fault) Stat(name string) (os.FileInfo, error)       { return f.FS.Stat(name) }
func (f *Fault) FreeSpace(dir string) (int64, error)         { return f.FS.FreeSpace(dir) }
func (f *Fault) Lock(name string) (io.Closer, error)         { return f.FS.Lock(name) }
func (f *Fault) SyncDir(dir string) error {
	if f.get().SyncError {
		return &os.PathError{Op: "fsync", Path: dir, Err: syscall.EIO}
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	File
	fs *Fault
}

func (ff *faultFile) Write(p []byte) (int, error) {
	x := ff.fs.get()
	if x.NoSpace {
		return 0, &os.PathError{Op: "write", Path: "file", Err: syscall.ENOSPC}
	}
	if x.ShortWrite {
		ff.fs.mu.Lock()
		ff.fs.f.ShortWrite = false
		ff.fs.mu.Unlock()
		n, _ := ff.File.Write(p[:len(p)/2])
		return n, errors.Join(ErrInjected, io.ErrShortWrite)
	}
	return ff.File.Write(p)
}

func (ff *faultFile) Sync() error {
	if ff.fs.get().SyncError {
		return &os.PathError{Op: "fsync", Path: "file", Err: syscall.EIO}
	}
	return ff.File.Sync()
}

func (ff *faultFile) flip(p []byte, n int) {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	x := &ff.fs.f
	if n <= 0 || n < x.FlipMinLen {
		return
	}
	if x.FlipReads > 0 {
		x.FlipReads--
		p[n/2] ^= 0x10
	} else if x.FlipReadBit {
		p[n/2] ^= 0x10
	}
}

func (ff *faultFile) Read(p []byte) (int, error) {
	n, err := ff.File.Read(p)
	ff.flip(p, n)
	return n, err
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := ff.File.ReadAt(p, off)
	ff.flip(p, n)
	return n, err
}
