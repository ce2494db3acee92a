package vfs

import (
	"io"
	"os"
	"path"
)

// ReadFile reads the whole of file name.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFileDurably writes dir/name whole or not at all (a temporary file,
// synced, renamed, the directory synced), readable by its owner only: after
// it returns, the file is there after a power loss too.
func WriteFileDurably(fs FS, dir, name string, data []byte) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path.Join(dir, name+".tmp")
	f, err := fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}
