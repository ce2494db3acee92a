// Package snapfile writes and reads the disk log's snapshot files: a
// snapshot too large for a frame goes to a file of its own, written as
// its records come (never held whole), fsynced and renamed into place, so
// after a crash the file is there whole or not at all; read back, its
// trailer is checked before any record is handed over.
//
// The bytes are format's (format.SnapWriter, format.ReadSnapFile); when a
// snapshot goes to a file, and the log record that points at it, are the
// log's.
package snapfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Writer is a snapshot file being written under its temporary name.
type Writer struct {
	fs        vfs.FS
	dir       string
	f         vfs.File
	tmp, name string
	w         *format.SnapWriter
}

// Create begins the snapshot file name in dir, under its temporary name.
func Create(fs vfs.FS, dir, name string) (*Writer, error) {
	tmp := filepath.Join(dir, format.TempName(name))
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{fs: fs, dir: dir, f: f, tmp: tmp, name: name, w: format.NewSnapWriter(f)}, nil
}

// Add writes one record's data; after an error it writes nothing more and
// returns the error again.
func (w *Writer) Add(data []byte) error { return w.w.Add(data) }

// Finish ends the file, fsyncs it and renames it into place (or removes
// it, if any of that fails).
func (w *Writer) Finish() error {
	err := w.w.Close()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.fs.Rename(w.tmp, filepath.Join(w.dir, w.name))
	}
	if err == nil {
		err = w.fs.SyncDir(w.dir)
	}
	if err != nil {
		_ = w.fs.Remove(w.tmp)
	}
	return err
}

// Abandon closes and removes a file whose writing failed.
func (w *Writer) Abandon() {
	_ = w.f.Close()
	_ = w.fs.Remove(w.tmp)
}

// Read reads the snapshot file name in dir back, checking its trailer.
func Read(fs vfs.FS, dir, name string) ([][]byte, error) {
	f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := format.ReadSnapFile(f)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return recs, nil
}

// ReadUnverified reads what records of the snapshot file name in dir
// decode, without checking its trailer: what a damaged one held.
func ReadUnverified(fs vfs.FS, dir, name string) ([][]byte, error) {
	f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return format.ReadSnapFileUnverified(f)
}
