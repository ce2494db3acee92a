package restart

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicemq/sluice/test/testkit"
)

// bodies are the test's message bodies: 1 KiB, tagged 'm'.
var bodies = testkit.Bodies{Size: bodySize, Tag: 'm'}

// bodySize is the size of every message body.
const bodySize = 1024

func body(id int) string                { return bodies.Body(id) }
func bodyID(s string) (id int, ok bool) { return bodies.ID(s) }

// What the client knows of a message's send and of its delete. A state
// only moves forward.
type sendState uint8

const (
	pending  sendState = iota // the request is out, unanswered
	sendLost                  // the request failed: the message may or may not exist
	observed                  // unanswered or failed, but received: it exists, durably
	acked                     // the server acknowledged the send
)

type deleteState uint8

const (
	kept      deleteState = iota // no delete was attempted
	maybeGone                    // a delete failed, or came too late to be sure it took (see deleted)
	gone                         // the server acknowledged a delete with a current receipt handle
)

// entry is one message id's record: 32 bytes, so that millions fit.
type entry struct {
	mid      [16]byte      // the MessageId the server gave it
	goneAt   time.Duration // when its delete was acknowledged, since the ledger's epoch (del == gone)
	send     sendState
	del      deleteState
	required bool // must come back in the final drain (mustComeBack when it began)
	final    bool // received in the final drain
	back     bool // counted as an acknowledged delete that came back
}

// ledger is what the server acknowledged, message by message, and what
// came back: the test's model of the queue. A message that was sent
// (acked or observed) and never deleted (kept) must come back; a message
// deleted (gone) must never come back to a receive sent after the delete
// was acknowledged. Everything else may go either way.
type ledger struct {
	epoch time.Time // set by newLedger, never changed

	mu      sync.Mutex
	entries []entry
	final   bool // the final drain is under way

	sent, sendFailed     int // acknowledged and failed sends
	delAcked, delUnsure  int // acknowledged deletes, and failed or too late ones
	received, duplicates int // receives, and receives of a message already received in this phase
	back                 int // acknowledged deletes that came back
	bad                  []string
	badCount             int
	mustSee, seen        int // in the final drain: messages that must come back, and those that did
}

func newLedger() *ledger { return &ledger{epoch: time.Now()} }

// ids hands out n new message ids, about to be sent.
func (l *ledger) ids(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := len(l.entries)
	l.entries = append(l.entries, make([]entry, n)...)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i
	}
	return ids
}

// badLocked records a violation that is neither a loss nor a delete that
// came back: a damaged body, a message never sent, a second MessageId.
// (A message's one send is never retried, so it has one MessageId.)
func (l *ledger) badLocked(format string, args ...any) {
	l.badCount++
	if len(l.bad) < 10 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
}

// sendAcked records that the server acknowledged id's send with MessageId
// mid.
func (l *ledger) sendAcked(id int, mid string) {
	m, err := uuid.Parse(mid)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.badLocked("message %d acknowledged with MessageId %q: %v", id, mid, err)
		return
	}
	e := &l.entries[id]
	if e.send == observed && e.mid != m {
		l.badLocked("message %d: acknowledged as %s, received as %s", id, mid, uuid.UUID(e.mid))
	}
	e.mid, e.send = m, acked
	l.sent++
}

// sendFailedFor records that id's send failed: it may or may not exist.
func (l *ledger) sendFailedFor(id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := &l.entries[id]; e.send == pending {
		e.send = sendLost
	}
	l.sendFailed++
}

// receivedMsg checks a message received by a receive sent at sent against
// what was acknowledged and returns its id; ok is false when the message
// is not one the test may delete (a damaged body, a message never sent).
func (l *ledger) receivedMsg(mid, b string, sent time.Time) (id int, ok bool) {
	id, ok = bodyID(b)
	m, err := uuid.Parse(mid)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received++
	if !ok || id >= len(l.entries) {
		l.badLocked("message %s: a body that was never sent (%d bytes): %.40q", mid, len(b), b)
		return 0, false
	}
	if err != nil {
		l.badLocked("message %d received with MessageId %q: %v", id, mid, err)
		return 0, false
	}
	e := &l.entries[id]
	switch e.send {
	case pending, sendLost:
		e.mid, e.send = m, observed
	case observed, acked:
		if e.mid != m {
			l.badLocked("message %d: sent as %s, received as %s", id, uuid.UUID(e.mid), mid)
			return 0, false
		}
	}
	if e.del == gone && sent.Sub(l.epoch) > e.goneAt && !e.back {
		e.back = true // received by a receive sent after the delete was acknowledged
		l.back++
	}
	if l.final {
		if e.final {
			l.duplicates++
		} else {
			e.final = true
			if e.required {
				l.seen++
			}
		}
	}
	return id, true
}

// deleted records the answer to id's delete: acknowledged or not, and
// how long after its receive was sent. A delete is only known to have
// deleted if it was acknowledged while the receive's visibility timeout
// (vis) still held the message for this receipt handle; after that the
// message may have been received again, and SQS answers a delete with an
// old handle with success without deleting.
func (l *ledger) deleted(id int, ok bool, sinceReceive, vis time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &l.entries[id]
	if ok && sinceReceive < vis-visibilityMargin {
		if e.del != gone {
			e.del, e.goneAt = gone, time.Since(l.epoch)
		}
		l.delAcked++
		return
	}
	if e.del == kept {
		e.del = maybeGone
	}
	l.delUnsure++
}

// visibilityMargin is the slack on the server's visibility deadline
// (its wall clock against the test's monotonic one).
const visibilityMargin = time.Second

// mustComeBack says whether a message must be received in the final drain.
func mustComeBack(e entry) bool {
	return (e.send == acked || e.send == observed) && e.del == kept
}

// beginFinal starts the final drain: from now on receives count towards
// what must come back.
func (l *ledger) beginFinal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.final = true
	l.mustSee, l.seen = 0, 0
	for i := range l.entries {
		e := &l.entries[i]
		e.final, e.required = false, mustComeBack(*e)
		if e.required {
			l.mustSee++
		}
	}
}

// allSeen says whether every message that must come back did.
func (l *ledger) allSeen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen == l.mustSee
}

// deletedCount is the number of acknowledged deletes so far.
func (l *ledger) deletedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delAcked
}

// pick chooses the messages a drain deletes, about half of those that must
// still be in the queue, by id (about the order they were sent, and so
// were received): the oldest 3/8 all, which empties whole segments as a
// drain does, and two of every three of the next quarter, which leaves
// segments behind the drain's front with a few live messages among more
// deleted ones. Those are where a store that miscounts the bodies it keeps
// frees a segment too early, whatever the segment size. It returns the
// picked ids (indexed by id) and how many there are.
func (l *ledger) pick() ([]bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := 0
	for _, e := range l.entries {
		if mustComeBack(e) {
			live++
		}
	}
	pick := make([]bool, len(l.entries))
	n, rank := 0, 0
	for id, e := range l.entries {
		if !mustComeBack(e) {
			continue
		}
		if rank < live*3/8 || (rank < live*5/8 && rank%3 != 2) {
			pick[id] = true
			n++
		}
		rank++
	}
	return pick, n
}

// live is how many messages must still be in the queue now.
func (l *ledger) live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if mustComeBack(e) {
			n++
		}
	}
	return n
}

// verdict is the ledger's account once the final drain is over.
type verdict struct {
	sent, sendFailed, deleted, delUnsure int
	mustSee, seen, lost, back, bad       int
	lostIDs                              []int // the first few
	badSamples                           []string
}

func (l *ledger) verdict() verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{sent: l.sent, sendFailed: l.sendFailed, deleted: l.delAcked, delUnsure: l.delUnsure,
		mustSee: l.mustSee, seen: l.seen, back: l.back, bad: l.badCount, badSamples: append([]string(nil), l.bad...)}
	for id, e := range l.entries {
		if e.required && !e.final {
			v.lost++
			if len(v.lostIDs) < 10 {
				v.lostIDs = append(v.lostIDs, id)
			}
		}
	}
	return v
}

func (v verdict) failed() bool { return v.lost > 0 || v.back > 0 || v.bad > 0 }

func (v verdict) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d lost of %d that must come back (%d came back); %d acknowledged deletes came back; %d other violations",
		v.lost, v.mustSee, v.seen, v.back, v.bad)
	fmt.Fprintf(&b, "\n  sends: %d acknowledged, %d failed; deletes: %d acknowledged, %d failed or unsure", v.sent, v.sendFailed, v.deleted, v.delUnsure)
	if len(v.lostIDs) > 0 {
		fmt.Fprintf(&b, "\n  first lost: %v", v.lostIDs)
	}
	for _, s := range v.badSamples {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}
