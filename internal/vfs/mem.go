package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Mem is an in-memory file system that remembers what was made durable:
// file contents as of their last Sync, and directory entries as of the
// last SyncDir. Crash returns the file system a machine would find after
// losing power now.
type Mem struct {
	mu      sync.Mutex
	files   map[string]*memFile // current names
	durable map[string]*memFile // names as of the last SyncDir of their directory
	// capacity, when above zero, is the size of the disk: writes and
	// truncations that would make the files hold more fail with ENOSPC,
	// as on a small file system.
	capacity int64
	// locks are the paths Lock holds (mem_lock.go); Crash keeps none.
	locks map[string]*memLock
}

type memFile struct {
	data   []byte
	synced []byte
}

// NewMem returns an empty in-memory file system.
func NewMem() *Mem { return &Mem{files: map[string]*memFile{}, durable: map[string]*memFile{}} }

// SetCapacity sets the size of the disk in bytes (0: unlimited). It may be
// changed while files are open: a full disk can be "grown" by a test.
func (m *Mem) SetCapacity(n int64) {
	m.mu.Lock()
	m.capacity = n
	m.mu.Unlock()
}

// usedLocked is the bytes held by named files.
func (m *Mem) usedLocked() int64 {
	var n int64
	for _, f := range m.files {
		n += int64(len(f.data))
	}
	return n
}

// growLocked reports whether f may grow to size bytes.
func (m *Mem) growLocked(f *memFile, size int64) error {
	if m.capacity <= 0 || size <= int64(len(f.data)) {
		return nil
	}
	if m.usedLocked()+size-int64(len(f.data)) > m.capacity {
		return syscall.ENOSPC
	}
	return nil
}

// Used is the bytes the files hold.
func (m *Mem) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usedLocked()
}

// FreeSpace is what is left of the capacity (math.MaxInt64 when unlimited).
func (m *Mem) FreeSpace(dir string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity <= 0 {
		return math.MaxInt64, nil
	}
	return max(0, m.capacity-m.usedLocked()), nil
}

// Crash returns what survives a power failure now: synced contents of the
// durably named files.
func (m *Mem) Crash() *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMem()
	out.capacity = m.capacity
	for name, f := range m.durable {
		c := &memFile{data: append([]byte(nil), f.synced...)}
		c.synced = append([]byte(nil), c.data...)
		out.files[name] = c
		out.durable[name] = c
	}
	return out
}

func (m *Mem) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	f, ok := m.files[name]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		f = &memFile{}
		m.files[name] = f
	}
	if flag&os.O_TRUNC != 0 {
		f.data = nil
	}
	h := &memHandle{fs: m, f: f, name: name}
	if flag&os.O_APPEND != 0 {
		h.off = int64(len(f.data))
	}
	return h, nil
}

// Flip flips the bits of mask in the byte at off of file name, in what
// it holds now and in what it holds durably: damage at rest (a failing
// disk, controller or cable), which no write of the store's made.
func (m *Mem) Flip(name string, off int64, mask byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[filepath.Clean(name)]
	if !ok {
		return &os.PathError{Op: "flip", Path: name, Err: fs.ErrNotExist}
	}
	if off < 0 || off >= int64(len(f.data)) {
		return &os.PathError{Op: "flip", Path: name, Err: io.ErrUnexpectedEOF}
	}
	f.data[off] ^= mask
	if off < int64(len(f.synced)) {
		f.synced[off] ^= mask
	}
	return nil
}

// SyncedSize is how much of file name is durable (0 if it is not there).
func (m *Mem) SyncedSize(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[filepath.Clean(name)]; ok {
		return int64(len(f.synced))
	}
	return 0
}

func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, ok := m.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	f, ok := m.files[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = f
	return nil
}

func (m *Mem) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	var out []string
	for name := range m.files {
		if filepath.Dir(name) == dir {
			out = append(out, filepath.Base(name))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *Mem) MkdirAll(dir string, perm os.FileMode) error { return nil }

// SyncDir makes the current names in dir durable.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	for name := range m.durable {
		if filepath.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, f := range m.files {
		if filepath.Dir(name) == dir {
			m.durable[name] = f
		}
	}
	return nil
}

func (m *Mem) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[filepath.Clean(name)]
	if !ok {
		return nil, &os.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name: filepath.Base(name), size: int64(len(f.data))}, nil
}

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

type memHandle struct {
	fs     *Mem
	f      *memFile
	name   string
	off    int64
	closed bool
}

var errClosedFile = errors.New("vfs: file closed")

func (h *memHandle) Read(p []byte) (int, error) {
	n, err := h.ReadAt(p, h.off)
	h.off += int64(n)
	return n, err
}

func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return 0, errClosedFile
	}
	if off >= int64(len(h.f.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *memHandle) Write(p []byte) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return 0, errClosedFile
	}
	end := h.off + int64(len(p))
	if err := h.fs.growLocked(h.f, end); err != nil {
		return 0, &os.PathError{Op: "write", Path: h.name, Err: err}
	}
	if end > int64(len(h.f.data)) {
		h.f.data = append(h.f.data, make([]byte, end-int64(len(h.f.data)))...)
	}
	copy(h.f.data[h.off:], p)
	h.off = end
	return len(p), nil
}

func (h *memHandle) Seek(offset int64, whence int) (int64, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	switch whence {
	case io.SeekStart:
		h.off = offset
	case io.SeekCurrent:
		h.off += offset
	case io.SeekEnd:
		h.off = int64(len(h.f.data)) + offset
	}
	return h.off, nil
}

func (h *memHandle) Truncate(size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.fs.growLocked(h.f, size); err != nil {
		return &os.PathError{Op: "truncate", Path: h.name, Err: err}
	}
	if size < int64(len(h.f.data)) {
		h.f.data = h.f.data[:size]
	} else {
		h.f.data = append(h.f.data, make([]byte, size-int64(len(h.f.data)))...)
	}
	return nil
}

// Sync makes the file's current contents durable.
func (h *memHandle) Sync() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	h.f.synced = append(h.f.synced[:0], h.f.data...)
	return nil
}

func (h *memHandle) Close() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	h.closed = true
	return nil
}
