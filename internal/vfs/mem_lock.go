package vfs

import (
	"io"
	"path/filepath"
)

// memHolder is what a Mem lock says of its holder: there is no other
// process to name.
const memHolder = "an earlier Lock of this in-memory file system"

// memLock is one Lock of a Mem, held until Close.
type memLock struct {
	fs   *Mem
	name string
}

// Lock takes name's lock in m's lock table (the file is created if
// missing, empty): a second Lock of the path is refused with a
// *LockedError (ErrLocked) until the first is closed. Locks are not
// durable: the file system Crash returns holds none, as a power loss or a
// kill -9 releases every flock.
func (m *Mem) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if m.locks[name] != nil {
		return nil, &LockedError{Name: name, Holder: memHolder}
	}
	if _, ok := m.files[name]; !ok {
		m.files[name] = &memFile{}
	}
	if m.locks == nil {
		m.locks = map[string]*memLock{}
	}
	l := &memLock{fs: m, name: name}
	m.locks[name] = l
	return l, nil
}

// Close releases the lock; closing it again does nothing.
func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.fs.locks[l.name] == l {
		delete(l.fs.locks, l.name)
	}
	return nil
}
