package queue

import "github.com/sluicemq/sluice/internal/sched"

// State is where a message is in its lifecycle.
type State uint8

const (
	// Pending: in no structure for the moment (being moved between them).
	Pending State = iota
	// Delayed or invisible: waits in the timer heap until VisibleAt.
	Waiting
	// Ready: may be delivered.
	Ready
	// InFlight: delivered, invisible until VisibleAt.
	InFlight
	// Leaving: on its way to another queue (a dead-letter queue, a
	// redrive): never delivered here; gone once its move is recorded, or
	// back as it was (Revert).
	Leaving
)

// Msg is the in-memory index entry of one live message: what scheduling
// needs, and where the rest (body, attributes, ids) lives on disk. A
// queue stores its entries by value (see seqtab): 88 bytes each.
type Msg struct {
	sched.Entry // where the scheduler keeps it (standard queues)

	Seq       uint64
	Sent      int64 // unix ms
	VisibleAt int64 // unix ms
	Loc       Loc
	g         *gname    // MessageGroupId (FIFO order), nil when none
	dlv       *delivery // nil until the first receive
	// x holds what few messages have (a tenant other than the group, a
	// dead-letter source, failures): one pointer instead of 40 bytes in
	// every entry. Entries are copied (into records, into other queues,
	// to readers outside the lock), so x and dlv are never modified in
	// place: setters replace them.
	x       *extra
	heapIdx int32
	State   State
	// Level is the retry level (0: first attempts), the lane it waits in.
	Level uint8
	flags msgFlags
}

// gname is a message group id, shared by a queue's messages of that group
// (refs counts them).
type gname struct {
	s    string
	refs int32
}

// delivery is what a message's receives left: receive count, first and
// latest receive (unix ms) and the fence of the latest.
type delivery struct {
	first, last int64
	count       int32
	fence       uint32
}

// Group is the message group id ("" if none).
func (m *Msg) Group() string {
	if m.g == nil {
		return ""
	}
	return m.g.s
}

// SetGroup sets the message group id; a queue shares one copy of the
// name among its messages once the entry is stored.
func (m *Msg) SetGroup(g string) {
	if g == "" {
		m.g = nil
		return
	}
	m.g = &gname{s: g}
}

// deliveryOf is the message's delivery record; zero if never received.
func (m *Msg) deliveryOf() delivery {
	if m.dlv == nil {
		return delivery{}
	}
	return *m.dlv
}

// RecvCount is how many times the message was received.
func (m *Msg) RecvCount() int32 { return m.deliveryOf().count }

// FirstRecv is the unix ms of the first receive, 0 if none.
func (m *Msg) FirstRecv() int64 { return m.deliveryOf().first }

// LastReceive is the unix ms of the latest receive, 0 if none.
func (m *Msg) LastReceive() int64 { return m.deliveryOf().last }

// Fence counts deliveries: a receipt handle carries the fence of its
// delivery, so an older handle is recognisable.
func (m *Msg) Fence() uint32 { return m.deliveryOf().fence }

// SetDelivery sets the receive count, first and latest receive times and
// fence.
func (m *Msg) SetDelivery(count int32, first, last int64, fence uint32) {
	if count == 0 && first == 0 && last == 0 && fence == 0 {
		m.dlv = nil
		return
	}
	m.dlv = &delivery{first: first, last: last, count: count, fence: fence}
}

// msgFlags: fExpired: retention passed while in flight, dropped when it
// returns (fAged: to the dead-letter queue); fKeep: leaving without its
// storage being released (it is reinserted); fHeld: the store keeps its
// body for this queue since the store was opened (written by the live
// path, or named by Keep after recovery), so it is released once, when
// the message leaves; fGone: left the queue (see seqtab).
type msgFlags uint8

const (
	fExpired msgFlags = 1 << iota
	fAged
	fKeep
	fHeld
	fGone msgFlags = 1 << 7
)

func (m *Msg) is(f msgFlags) bool { return m.flags&f != 0 }

// Key, Gone and MarkGone are what the queue's seqtab.Table knows of an
// entry: its sequence, and whether it left the queue.
func (m *Msg) Key() uint64 { return m.Seq }

// Gone reports whether the entry's message left the queue.
func (m *Msg) Gone() bool { return m.is(fGone) }

// MarkGone marks the entry's message as having left; only the table does.
func (m *Msg) MarkGone() { m.set(fGone, true) }

func (m *Msg) set(f msgFlags, on bool) {
	if on {
		m.flags |= f
	} else {
		m.flags &^= f
	}
}

type extra struct {
	tenant    string
	hasTenant bool // tenant differs from the group
	dlqSource string
	fail      *FailInfo
}

func (m *Msg) withExtra(f func(x *extra)) {
	var x extra
	if m.x != nil {
		x = *m.x
	}
	f(&x)
	if x == (extra{}) {
		m.x = nil
		return
	}
	m.x = &x
}

// Tenant is the message's tenant key.
func (m *Msg) Tenant() string {
	if m.x != nil && m.x.hasTenant {
		return m.x.tenant
	}
	return m.Group()
}

// SetTenant sets the tenant key (free when it is the group).
func (m *Msg) SetTenant(t string) {
	if t == m.Group() && (m.x == nil || !m.x.hasTenant) {
		return
	}
	m.withExtra(func(x *extra) {
		x.tenant, x.hasTenant = t, true
		if t == m.Group() {
			x.tenant, x.hasTenant = "", false
		}
	})
}

// DLQSource is the ARN of the queue a dead-lettered message came from.
func (m *Msg) DLQSource() string {
	if m.x == nil {
		return ""
	}
	return m.x.dlqSource
}

// SetDLQSource sets the dead-letter source ("" clears it).
func (m *Msg) SetDLQSource(s string) {
	if s == m.DLQSource() {
		return
	}
	m.withExtra(func(x *extra) { x.dlqSource = s })
}

// Fail is the message's failure record, nil if it never failed. Do not
// modify it: SetFail replaces it.
func (m *Msg) Fail() *FailInfo {
	if m.x == nil {
		return nil
	}
	return m.x.fail
}

// SetFail replaces the failure record (nil clears it).
func (m *Msg) SetFail(f *FailInfo) {
	if f == m.Fail() {
		return
	}
	m.withExtra(func(x *extra) { x.fail = f })
}

// FailInfo is what a message's failures left behind.
type FailInfo struct {
	Reason    string // VisibilityTimeout, Retry, Reject, MaxReceiveCount, MaxMessageAge
	LastError string // the consumer's reason text, if it gave one
	First     int64  // unix ms of the first failure
	Failures  int32
}

// Failed records one failure of a message at now.
func (m *Msg) Failed(now int64, reason, lastError string) {
	f := FailInfo{First: now}
	if old := m.Fail(); old != nil {
		f = *old // entries are copied into records: never modify a shared one
	}
	f.Reason = reason
	if lastError != "" {
		f.LastError = lastError
	}
	f.Failures++
	m.SetFail(&f)
}

// Loc is where the message's Send record is stored (the store's hint);
// opaque to the queue: every value, zero included, may be a location.
type Loc struct {
	Seg, Off, FLen, Idx uint32
}
