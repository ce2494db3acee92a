package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicemq/sluice/test/testkit"
)

// bodySize is the size of every message body.
const bodySize = 200

// bodies are the test's message bodies, tagged 'c'.
var bodies = testkit.Bodies{Size: bodySize, Tag: 'c'}

func body(id int) string                { return bodies.Body(id) }
func bodyID(s string) (id int, ok bool) { return bodies.ID(s) }

// What the client knows of a body's send, and of a message's delete. A
// state only moves forward.
type sendState uint8

const (
	pending  sendState = iota // the request is out, unanswered
	sendLost                  // the request failed: the message may or may not exist
	acked                     // the cluster acknowledged the send
)

type deleteState uint8

const (
	kept      deleteState = iota // no delete was attempted
	maybeGone                    // a delete failed, or came too late to be sure it took (see deleted)
	gone                         // a delete with the current receipt handle was acknowledged in time
)

// visibilityMargin is the slack on a node's visibility deadline (its
// clock against the test's monotonic one, and the time a request takes
// to reach it).
const visibilityMargin = time.Second

// sendEntry is one body's send.
type sendEntry struct {
	state  sendState
	mid    uuid.UUID // the MessageId it was acknowledged with
	copies uint8     // distinct MessageIds acknowledged or received for the body
}

// receipt is one receive of a message: when the ReceiveMessage was sent
// and answered (since the ledger's epoch), the receive count it carried,
// and the visibility timeout it asked for.
type receipt struct {
	sent, done time.Duration
	vis        time.Duration
	count      int
}

// msgEntry is one message (one MessageId): its body's id, its delete, and
// its receives.
type msgEntry struct {
	id       int
	del      deleteState
	goneAt   time.Duration // when its delete was acknowledged (del == gone)
	receives int           // recorded so far; a receipt handle is known by the number of its receive
	last     receipt       // the receive recorded last
	top      receipt       // the receive that carried the highest count
	required bool          // must come back in the final drain (del was kept when it began)
	final    bool          // received in the final drain
	back     bool          // counted as an acknowledged delete that came back
}

// ledger is what the cluster acknowledged and what came back: the test's
// model of the queue. A message whose send was acknowledged, or that was
// received, and that was never deleted must come back; a message whose
// delete was acknowledged must never come back to a receive sent after
// that; a message's ApproximateReceiveCount never goes backwards.
//
// Clients that retry (dups) may send a body twice, as two messages: each
// is a message of its own. Clients that do not must never see a body
// under two MessageIds.
type ledger struct {
	epoch time.Time // set by newLedger, never changed
	dups  bool      // a body may come back as more than one message

	mu    sync.Mutex
	sends []sendEntry // by body id
	msgs  map[uuid.UUID]*msgEntry
	final bool // the final drain is under way

	sent, sendFailed     int      // acknowledged and failed sends
	delAcked, delUnsure  int      // deletes known to have taken, and the others
	received, finalDups  int      // receives, and receives of a message already received in the final drain
	copies               int      // bodies that came as a second message (retried sends, with dups)
	back                 int      // acknowledged deletes that came back
	backwards            int      // receive counts that went backwards
	repeats              int      // receives in sequence that carried the same count
	early                int      // receives while an earlier one's visibility timeout still held the message
	raced                int      // acknowledged deletes whose message an early receive took meanwhile
	bad                  []string // the first violations nBad counts
	nBad                 int
	mustSee, seen        int // in the final drain: messages that must come back, and those that did
	maxCount             int // the highest receive count seen
	backSamples, bwSamps []string
}

func newLedger(dups bool) *ledger {
	return &ledger{epoch: time.Now(), dups: dups, msgs: map[uuid.UUID]*msgEntry{}}
}

func (l *ledger) since(t time.Time) time.Duration { return t.Sub(l.epoch) }

// ids allocates n new body ids.
func (l *ledger) ids(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := len(l.sends)
	l.sends = append(l.sends, make([]sendEntry, n)...)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i
	}
	return ids
}

// badLocked records a violation that is neither a loss, a delete that
// came back nor a receive count that went backwards: a damaged body, a
// body never sent, a body sent once that came as two messages.
func (l *ledger) badLocked(format string, args ...any) {
	l.nBad++
	if len(l.bad) < 10 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
}

// messageLocked is message m of body id, recorded now if it is new.
func (l *ledger) messageLocked(m uuid.UUID, id int) *msgEntry {
	e := l.msgs[m]
	if e != nil {
		return e
	}
	e = &msgEntry{id: id}
	l.msgs[m] = e
	s := &l.sends[id]
	if s.copies++; s.copies > 1 {
		if l.dups {
			l.copies++
		} else {
			l.badLocked("body %d was sent once and came back as %d messages (the latest %s)", id, s.copies, m)
		}
	}
	return e
}

// sendAcked records that the cluster acknowledged body id's send with
// MessageId mid.
func (l *ledger) sendAcked(id int, mid string) {
	m, err := uuid.Parse(mid)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.badLocked("body %d acknowledged with MessageId %q: %v", id, mid, err)
		return
	}
	l.messageLocked(m, id)
	s := &l.sends[id]
	s.state, s.mid = acked, m
	l.sent++
}

// sendFailedFor records that body id's send failed: it may or may not
// exist.
func (l *ledger) sendFailedFor(id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := &l.sends[id]; s.state == pending {
		s.state = sendLost
	}
	l.sendFailed++
}

// receivedMsg checks a message received by a ReceiveMessage sent at sent
// and answered at done (visibility timeout vis), with receive count
// count, against what came before. It returns the message and the number
// of this receive (which names its receipt handle for deleted); ok is
// false when the message is not one the test may delete (a damaged body,
// one never sent).
func (l *ledger) receivedMsg(mid, b, count string, sent, done time.Time, vis time.Duration) (m uuid.UUID, n int, ok bool) {
	id, ok := bodyID(b)
	m, err := uuid.Parse(mid)
	cnt, cerr := strconv.Atoi(count)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received++
	if !ok || id >= len(l.sends) {
		l.badLocked("message %s: a body that was never sent (%d bytes): %.40q", mid, len(b), b)
		return m, 0, false
	}
	if err != nil {
		l.badLocked("body %d received with MessageId %q: %v", id, mid, err)
		return m, 0, false
	}
	if cerr != nil || cnt < 1 {
		l.badLocked("message %s (body %d): ApproximateReceiveCount %q", mid, id, count)
		cnt = 0
	}
	e := l.messageLocked(m, id)
	if e.id != id {
		l.badLocked("message %s: body %d, then body %d", mid, e.id, id)
		return m, 0, false
	}
	r := receipt{sent: l.since(sent), done: l.since(done), vis: vis, count: cnt}
	if e.receives > 0 {
		l.checkCountLocked(m, e, r)
		// Two receives of a message: the one served second was served
		// after the first one's visibility timeout ended, at the earliest.
		p := e.last
		if r.done < p.sent+p.vis-visibilityMargin && p.done < r.sent+r.vis-visibilityMargin {
			l.early++
			if e.del == gone && r.sent <= e.goneAt {
				// Taken again while the delete was on its way: the delete's
				// receipt handle may have been stale, and SQS answers a
				// stale handle's delete with success without deleting.
				e.del = maybeGone
				l.raced++
			}
		}
	}
	e.receives++
	e.last = r
	if cnt > e.top.count {
		e.top = r
	}
	l.maxCount = max(l.maxCount, cnt)
	if e.del == gone && r.sent > e.goneAt && !e.back {
		e.back = true // received by a receive sent after the delete was acknowledged
		l.back++
		if len(l.backSamples) < 10 {
			l.backSamples = append(l.backSamples, fmt.Sprintf("message %s (body %d): delete acknowledged at %v, received again by a receive sent at %v (count %d)",
				m, id, e.goneAt.Round(time.Millisecond), r.sent.Round(time.Millisecond), cnt))
		}
	}
	if l.final {
		if e.final {
			l.finalDups++
		} else {
			e.final = true
			if e.required {
				l.seen++
			}
		}
	}
	return m, e.receives, true
}

// checkCountLocked compares receive r's count with the highest one seen
// before: a receive that started after the one with the higher count was
// answered must carry a higher count still.
func (l *ledger) checkCountLocked(m uuid.UUID, e *msgEntry, r receipt) {
	t := e.top
	switch {
	case r.count < t.count && r.sent > t.done, r.count > t.count && r.done < t.sent:
		l.backwards++
		if len(l.bwSamps) < 10 {
			l.bwSamps = append(l.bwSamps, fmt.Sprintf("message %s (body %d): receive count %d (receive sent %v, answered %v), "+
				"then %d (sent %v, answered %v)", m, e.id, t.count, t.sent.Round(time.Millisecond), t.done.Round(time.Millisecond),
				r.count, r.sent.Round(time.Millisecond), r.done.Round(time.Millisecond)))
		}
	case r.count == t.count && (r.sent > t.done || r.done < t.sent):
		l.repeats++
	}
}

// deleted records the answer to a delete of message m with the receipt
// handle of its receive number n, whose ReceiveMessage was sent at
// received (visibility timeout vis). A delete is only known to have
// deleted if it was acknowledged while that receive's visibility timeout
// still held the message for that handle, and no later receive of the
// message is known: otherwise the handle may be stale, and SQS answers a
// stale handle's delete with success without deleting.
func (l *ledger) deleted(m uuid.UUID, n int, ok bool, received time.Time, vis time.Duration) {
	since := time.Since(received)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.msgs[m]
	if ok && since < vis-visibilityMargin && e.receives == n {
		if e.del != gone {
			e.del, e.goneAt = gone, l.since(time.Now())
		}
		l.delAcked++
		return
	}
	if e.del == kept {
		e.del = maybeGone
	}
	l.delUnsure++
}

// beginFinal starts the final drain: from now on receives count towards
// what must come back.
func (l *ledger) beginFinal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.final = true
	l.mustSee, l.seen = 0, 0
	for _, e := range l.msgs {
		e.final, e.required = false, e.del == kept
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

// acks is the number of acknowledged sends so far.
func (l *ledger) acks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// verdict is the ledger's account.
type verdict struct {
	sent, sendFailed, deleted, delUnsure, received int
	mustSee, seen, lost, back, bad, backwards      int
	repeats, early, raced, copies, finalDups       int
	maxCount                                       int
	lostSamples, samples                           []string
}

func (l *ledger) verdict() verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{sent: l.sent, sendFailed: l.sendFailed, deleted: l.delAcked, delUnsure: l.delUnsure, received: l.received,
		mustSee: l.mustSee, seen: l.seen, back: l.back, bad: l.nBad, backwards: l.backwards, repeats: l.repeats,
		early: l.early, raced: l.raced, copies: l.copies, finalDups: l.finalDups, maxCount: l.maxCount}
	v.samples = append(append(append(v.samples, l.bad...), l.backSamples...), l.bwSamps...)
	for m, e := range l.msgs {
		if e.required && !e.final {
			v.lost++
			if len(v.lostSamples) < 10 {
				s := l.sends[e.id]
				v.lostSamples = append(v.lostSamples, fmt.Sprintf("message %s (body %d, send %v, acknowledged as this one %v): received %d times, the last by a receive sent at %v, count %d",
					m, e.id, s.state, s.mid == m, e.receives, e.last.sent.Round(time.Millisecond), e.last.count))
			}
		}
	}
	return v
}

func (v verdict) failed() bool { return v.lost > 0 || v.back > 0 || v.bad > 0 || v.backwards > 0 }

func (s sendState) String() string {
	return [...]string{"pending", "failed", "acknowledged"}[s]
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d lost of %d that must come back (%d came back); %d acknowledged deletes came back; "+
		"%d receive counts went backwards; %d other violations",
		v.lost, v.mustSee, v.seen, v.back, v.backwards, v.bad)
	fmt.Fprintf(&b, "\n  sends: %d acknowledged, %d failed; deletes: %d acknowledged in time, %d failed or unsure; %d receives",
		v.sent, v.sendFailed, v.deleted, v.delUnsure, v.received)
	fmt.Fprintf(&b, "\n  receive counts up to %d; %d receives in sequence with the same count; %d receives within an earlier one's visibility timeout "+
		"(%d of them raced an acknowledged delete); %d bodies came as a second message (retried sends); %d receives of a message twice in the final drain",
		v.maxCount, v.repeats, v.early, v.raced, v.copies, v.finalDups)
	for _, s := range v.lostSamples {
		fmt.Fprintf(&b, "\n  lost: %s", s)
	}
	for _, s := range v.samples {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}
