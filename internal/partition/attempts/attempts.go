// Package attempts remembers a FIFO queue's receives by their
// ReceiveRequestAttemptId for five minutes, as SQS does, so that a
// receive retried after a lost answer gets the same messages and receipt
// handles instead of new ones.
//
// It only remembers: whether a remembered receive may still be answered
// again (its messages neither deleted nor delivered since) is the queue
// owner's to check, under its lock, which also guards a Memory.
package attempts

import (
	"time"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Window is how long a receive is remembered.
const Window = 5 * time.Minute

// Attempt is one remembered receive: the messages it answered with, and
// each one's sequence and delivery fence.
type Attempt struct {
	Msgs    []st.Message
	Seqs    []uint64
	Fences  []uint32
	expires time.Time
}

// Memory holds the attempts of one queue. The zero Memory is empty and
// ready.
type Memory struct {
	byID  map[string]*Attempt
	order []remembered // in the order remembered: expiry order
	head  int
}

type remembered struct {
	id string
	a  *Attempt
}

// Remember keeps a as the answer to the receive id, made at now, in
// place of any earlier one. What passed its window is let go first: the
// memory is bounded by the receives of the last five minutes, at a cost
// that does not grow with them.
func (m *Memory) Remember(id string, now time.Time, a *Attempt) {
	m.expire(now)
	if m.byID == nil {
		m.byID = map[string]*Attempt{}
	}
	a.expires = now.Add(Window)
	m.byID[id] = a
	m.order = append(m.order, remembered{id, a})
}

// Recall returns the receive id answered within its window before now,
// or nil.
func (m *Memory) Recall(id string, now time.Time) *Attempt {
	a := m.byID[id]
	if a == nil || now.After(a.expires) {
		return nil
	}
	return a
}

// Forget lets the receive id go.
func (m *Memory) Forget(id string) { delete(m.byID, id) }

// Len returns how many receives are remembered (some may have passed
// their window and not been let go yet).
func (m *Memory) Len() int { return len(m.byID) }

func (m *Memory) expire(now time.Time) {
	for m.head < len(m.order) && now.After(m.order[m.head].a.expires) {
		r := m.order[m.head]
		if m.byID[r.id] == r.a { // not remembered again since
			delete(m.byID, r.id)
		}
		m.order[m.head] = remembered{}
		m.head++
	}
	if m.head > 64 && 2*m.head > len(m.order) {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
}
