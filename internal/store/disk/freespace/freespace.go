// Package freespace watches the free space of the disk a log is on, and
// raises the disk alarm while it is below the reserve. It looks at the
// disk (through vfs) when told of writes, at most a megabyte or a second
// apart, and on every write once free space nears the reserve.
//
// It watches and reports only: it must not write, free or refuse
// anything. What the alarm means (new messages refused, snapshots renewed
// to free space, no compaction, no prepared segment) is its owner's.
package freespace

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Watch is the free space of a directory's disk and the alarm. Its
// methods are safe for concurrent use.
type Watch struct {
	fs      vfs.FS
	dir     string
	log     *slog.Logger
	onRaise func()
	now     func() time.Time // the clock of the looks' pace (tests set it)

	mu        sync.Mutex
	free      int64     // bytes free at the last look
	at        time.Time // when it was looked at
	written   int64     // bytes written since
	reserve   int64     // the reserve in effect
	alarm     bool
	statError bool // the last look failed (logged once)
}

// New watches the disk of dir. onRaise, if not nil, is called (without
// the Watch's lock) each time the alarm rises.
func New(fs vfs.FS, dir string, log *slog.Logger, onRaise func()) *Watch {
	return &Watch{fs: fs, dir: dir, log: log, onRaise: onRaise, now: time.Now}
}

// Disk reports the free space, the reserve in effect, and whether free
// space is below it. It looks at the disk again when the last look is
// more than a second old, so an idle log notices space freed by others.
func (w *Watch) Disk() store.Disk {
	w.mu.Lock()
	stale := w.now().Sub(w.at) > time.Second
	w.mu.Unlock()
	if stale {
		w.Look()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return store.Disk{Free: w.free, Reserve: w.reserve, Alarm: w.alarm}
}

// Look reads the free space and raises or clears the alarm.
func (w *Watch) Look() {
	free, err := w.fs.FreeSpace(w.dir)
	w.mu.Lock()
	if err != nil {
		if !w.statError {
			w.log.Warn("store: cannot read the free disk space; no disk alarm until it can", "err", err)
		}
		w.statError = true
		w.at = w.now()
		w.mu.Unlock()
		return
	}
	w.statError = false
	w.free, w.at, w.written = free, w.now(), 0
	was := w.alarm
	w.alarm = free < w.reserve
	alarm, reserve := w.alarm, w.reserve
	w.mu.Unlock()
	switch {
	case alarm && !was:
		w.log.Warn("store: disk alarm: free space below the reserve; new messages are refused until space is freed", "free_bytes", free, "reserve_bytes", reserve)
		if w.onRaise != nil {
			w.onRaise()
		}
	case !alarm && was:
		w.log.Info("store: disk alarm cleared", "free_bytes", free, "reserve_bytes", reserve)
	}
}

// Note is told of each write (n bytes) and of the reserve now in effect.
// It looks at the disk when force is set, a megabyte has been written or
// a second has passed since the last look, and after every write while
// free space is near the reserve (or below it).
func (w *Watch) Note(n, reserve int64, force bool) {
	w.mu.Lock()
	w.reserve = reserve
	w.written += n
	due := force || w.alarm || w.written >= 1<<20 || w.now().Sub(w.at) > time.Second || w.free-w.written < reserve
	w.mu.Unlock()
	if due {
		w.Look()
	}
}

// Alarm reports whether the alarm is raised (as of the last look).
func (w *Watch) Alarm() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alarm
}
