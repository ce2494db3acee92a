// Package ledger is a black-box test's model of one queue, kept from the
// client's side: which sends and deletes the server acknowledged, and
// what came back to receives. At the end it says what was lost, which
// acknowledged delete came back, which receive count went backwards, and
// what else was wrong (a damaged body, a body never sent, one sent once
// that came back as two messages).
//
// It makes no request itself (test/traffic does, and records each answer
// here) and knows nothing of processes or clusters.
package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicemq/sluice/test/testkit"
)

// VisibilityMargin is the slack on a server's visibility deadline: its
// clock against the test's monotonic one, and the time a request takes
// to reach it.
const VisibilityMargin = time.Second

// Config says what the ledger accepts and checks. With only Bodies set, a
// body comes back as one message, a delete acknowledged within its
// receive's visibility timeout took, and receive counts are not checked.
type Config struct {
	// Bodies are the message bodies the test sends, each naming its id.
	// Required.
	Bodies testkit.Bodies
	// Copies lets a body come back as more than one message: a client
	// that retries a send may have sent it twice, and each copy is a
	// message of its own. Default false: a body that comes back under a
	// second MessageId is a violation.
	Copies bool
	// Counts keeps each message's receives and checks that its
	// ApproximateReceiveCount never goes backwards: a receive sent after
	// the one with the highest count so far was answered must carry a
	// higher count still. Default false: counts are not checked.
	Counts bool
	// Early watches for a receive that took a message while an earlier
	// receive's visibility timeout still held it, and counts it; a delete
	// then took only if no later receive of its message is known (else
	// its receipt handle may be stale), and an acknowledged delete that
	// such a receive raced is unsure. Default false: a delete acknowledged
	// within its receive's visibility timeout took, whatever came after.
	Early bool
}

// What the client knows of a body's send, and of a message's delete. A
// state only moves forward.
type sendState uint8

const (
	pending  sendState = iota // the request is out, unanswered
	sendLost                  // the request failed: the message may or may not exist
	acked                     // the server acknowledged the send
)

func (s sendState) String() string {
	return [...]string{"pending", "failed", "acknowledged"}[s]
}

type deleteState uint8

const (
	kept      deleteState = iota // no delete was attempted
	maybeGone                    // a delete failed, or came too late to be sure it took (see Deleted)
	gone                         // a delete with a current receipt handle was acknowledged in time
)

// body is one body id's send.
type body struct {
	state  sendState
	copies uint8 // distinct MessageIds acknowledged or received for the body
}

// message is one MessageId: a message acknowledged or received. 40
// bytes, so that millions fit.
type message struct {
	mid      uuid.UUID
	goneAt   time.Duration // when its delete was acknowledged, since the epoch (del == gone)
	id       int32         // its body's
	receives int32         // recorded so far; a receipt handle is known by the number of its receive
	del      deleteState
	acked    bool // its body's send was acknowledged as this message
	required bool // must come back in the final drain (del was kept when it began)
	final    bool // received in the final drain
	back     bool // counted as an acknowledged delete that came back
}

// receipt is one receive of a message: when the ReceiveMessage was sent
// and answered (since the epoch), the visibility timeout it asked for,
// and the receive count it carried.
type receipt struct {
	sent, done, vis time.Duration
	count           int
}

// history is what Counts and Early compare a message's next receive with.
type history struct {
	last receipt // the receive recorded last
	top  receipt // the receive that carried the highest count
}

// Ledger is what the server acknowledged and what came back. A message
// whose send was acknowledged, or that was received, and that was never
// deleted must come back; a message whose delete was acknowledged must
// never come back to a receive sent after that.
type Ledger struct {
	cfg   Config    // set by New, never changed
	epoch time.Time // set by New, never changed

	mu     sync.Mutex
	bodies []body    // by body id
	msgs   []message // in the order they were first seen
	hist   []history // by message, as msgs; empty unless cfg.Counts or cfg.Early
	index  map[uuid.UUID]int32
	final  bool // the final drain is under way

	sent, sendFailed     int      // acknowledged and failed sends
	delAcked, delUnsure  int      // deletes known to have taken, and the others
	received, finalDups  int      // receives, and receives of a message already received in the final drain
	copies               int      // bodies that came as a second message (with cfg.Copies)
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

// New returns an empty ledger.
func New(cfg Config) *Ledger {
	return &Ledger{cfg: cfg, epoch: time.Now(), index: map[uuid.UUID]int32{}}
}

func (l *Ledger) since(t time.Time) time.Duration { return t.Sub(l.epoch) }

// history says whether the ledger keeps each message's receives.
func (l *Ledger) history() bool { return l.cfg.Counts || l.cfg.Early }

// Body is body id's text.
func (l *Ledger) Body(id int) string { return l.cfg.Bodies.Body(id) }

// IDs allocates n new body ids, about to be sent.
func (l *Ledger) IDs(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := len(l.bodies)
	l.bodies = append(l.bodies, make([]body, n)...)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i
	}
	return ids
}

// badLocked records a violation that is neither a loss, a delete that
// came back nor a receive count that went backwards: a damaged body, a
// body never sent, a body sent once that came as two messages.
func (l *Ledger) badLocked(format string, args ...any) {
	l.nBad++
	if len(l.bad) < 10 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
}

// messageLocked is the index of message m of body id, recorded now if
// it is new.
func (l *Ledger) messageLocked(m uuid.UUID, id int) int32 {
	if i, ok := l.index[m]; ok {
		return i
	}
	i := int32(len(l.msgs))
	l.msgs = append(l.msgs, message{mid: m, id: int32(id)})
	if l.history() {
		l.hist = append(l.hist, history{})
	}
	l.index[m] = i
	b := &l.bodies[id]
	if b.copies++; b.copies > 1 {
		if l.cfg.Copies {
			l.copies++
		} else {
			l.badLocked("body %d was sent once and came back as %d messages (the latest %s)", id, b.copies, m)
		}
	}
	return i
}

// SendAcked records that the server acknowledged body id's send with
// MessageId mid.
func (l *Ledger) SendAcked(id int, mid string) {
	m, err := uuid.Parse(mid)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.badLocked("body %d acknowledged with MessageId %q: %v", id, mid, err)
		return
	}
	l.msgs[l.messageLocked(m, id)].acked = true
	l.bodies[id].state = acked
	l.sent++
}

// SendFailed records that body id's send failed: it may or may not
// exist.
func (l *Ledger) SendFailed(id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := &l.bodies[id]; b.state == pending {
		b.state = sendLost
	}
	l.sendFailed++
}

// Receive is one message as one receive took it: what Deleted needs to
// judge a delete with that receive's receipt handle.
type Receive struct {
	ID    int // its body's id
	Count int // the ApproximateReceiveCount it carried; 0 if none

	msg  int32 // the message's index
	n    int32 // which receive of the message this was
	sent time.Time
	vis  time.Duration
}

// Received checks a message (MessageId mid, body b, receive count count)
// that a ReceiveMessage sent at sent and answered at done (visibility
// timeout vis) took, against what came before. ok is false when the
// message is not one the test may delete (a damaged body, one never
// sent, a MessageId seen with another body).
func (l *Ledger) Received(mid, b, count string, sent, done time.Time, vis time.Duration) (r Receive, ok bool) {
	id, ok := l.cfg.Bodies.ID(b)
	m, err := uuid.Parse(mid)
	cnt, cerr := strconv.Atoi(count)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received++
	if !ok || id >= len(l.bodies) {
		l.badLocked("message %s: a body that was never sent (%d bytes): %.40q", mid, len(b), b)
		return r, false
	}
	if err != nil {
		l.badLocked("body %d received with MessageId %q: %v", id, mid, err)
		return r, false
	}
	if cerr != nil || cnt < 1 {
		if l.cfg.Counts {
			l.badLocked("message %s (body %d): ApproximateReceiveCount %q", mid, id, count)
		}
		cnt = 0
	}
	i := l.messageLocked(m, id)
	e := &l.msgs[i]
	if int(e.id) != id {
		l.badLocked("message %s: body %d, then body %d", mid, e.id, id)
		return r, false
	}
	rc := receipt{sent: l.since(sent), done: l.since(done), vis: vis, count: cnt}
	if l.history() {
		h := &l.hist[i]
		if e.receives > 0 && l.cfg.Counts {
			l.checkCountLocked(e, h.top, rc)
		}
		// Two receives of a message: the one served second was served
		// after the first one's visibility timeout ended, at the earliest.
		if p := h.last; e.receives > 0 && l.cfg.Early &&
			rc.done < p.sent+p.vis-VisibilityMargin && p.done < rc.sent+rc.vis-VisibilityMargin {
			l.early++
			if e.del == gone && rc.sent <= e.goneAt {
				// Taken again while the delete was on its way: the delete's
				// receipt handle may have been stale, and SQS answers a
				// stale handle's delete with success without deleting.
				e.del = maybeGone
				l.raced++
			}
		}
		h.last = rc
		if cnt > h.top.count {
			h.top = rc
		}
	}
	e.receives++
	l.maxCount = max(l.maxCount, cnt)
	if e.del == gone && rc.sent > e.goneAt && !e.back {
		e.back = true // received by a receive sent after the delete was acknowledged
		l.back++
		if len(l.backSamples) < 10 {
			l.backSamples = append(l.backSamples, fmt.Sprintf("message %s (body %d): delete acknowledged at %v, received again by a receive sent at %v (count %d)",
				m, id, e.goneAt.Round(time.Millisecond), rc.sent.Round(time.Millisecond), cnt))
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
	return Receive{ID: id, Count: cnt, msg: i, n: e.receives, sent: sent, vis: vis}, true
}

// checkCountLocked compares receive r's count with t, the receive with
// the highest count before: a receive that started after t was answered
// must carry a higher count still.
func (l *Ledger) checkCountLocked(e *message, t, r receipt) {
	switch {
	case r.count < t.count && r.sent > t.done, r.count > t.count && r.done < t.sent:
		l.backwards++
		if len(l.bwSamps) < 10 {
			l.bwSamps = append(l.bwSamps, fmt.Sprintf("message %s (body %d): receive count %d (receive sent %v, answered %v), "+
				"then %d (sent %v, answered %v)", e.mid, e.id, t.count, t.sent.Round(time.Millisecond), t.done.Round(time.Millisecond),
				r.count, r.sent.Round(time.Millisecond), r.done.Round(time.Millisecond)))
		}
	case r.count == t.count && (r.sent > t.done || r.done < t.sent):
		l.repeats++
	}
}

// Deleted records the answer to a delete with r's receipt handle: ok if
// the server acknowledged it. A delete is only known to have deleted if
// it was acknowledged while r's visibility timeout still held the message
// for that handle (and, with Early, no later receive of the message is
// known): otherwise the handle may be stale, and SQS answers a stale
// handle's delete with success without deleting.
func (l *Ledger) Deleted(r Receive, ok bool) {
	since := time.Since(r.sent)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &l.msgs[r.msg]
	if ok && since < r.vis-VisibilityMargin && (!l.cfg.Early || e.receives == r.n) {
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

// BeginFinal starts the final drain: from now on receives count towards
// what must come back.
func (l *Ledger) BeginFinal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.final = true
	l.mustSee, l.seen = 0, 0
	for i := range l.msgs {
		e := &l.msgs[i]
		e.final, e.required = false, e.del == kept
		if e.required {
			l.mustSee++
		}
	}
}

// AllSeen says whether every message that must come back did.
func (l *Ledger) AllSeen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen == l.mustSee
}

// Acks is the number of acknowledged sends so far.
func (l *Ledger) Acks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// Deletes is the number of deletes known to have taken so far.
func (l *Ledger) Deletes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delAcked
}

// Live is the body ids of the messages that must be in the queue now
// (acknowledged or received, and no delete attempted), in id order; a
// body that came as two messages is there twice.
func (l *Ledger) Live() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int
	for _, e := range l.msgs {
		if e.del == kept {
			ids = append(ids, int(e.id))
		}
	}
	slices.Sort(ids)
	return ids
}

// Verdict is the ledger's account.
type Verdict struct {
	Sent, SendFailed    int // acknowledged and failed sends
	Deleted, DelUnsure  int // deletes known to have taken, and the others
	Received            int // receives
	MustSee, Seen, Lost int // in the final drain: messages that must come back, those that did, and the others
	Back                int // acknowledged deletes that came back
	Bad                 int // other violations
	Backwards           int // receive counts that went backwards (with Counts)
	Repeats             int // receives in sequence with the same count (with Counts)
	MaxCount            int // the highest receive count seen
	Early, Raced        int // receives within an earlier one's visibility timeout, and the acknowledged deletes they raced (with Early)
	Copies              int // bodies that came as a second message (with Copies)
	FinalDups           int // receives of a message twice in the final drain

	LostSamples, Samples []string // the first few lost messages, and the other violations

	cfg Config // the ledger's: which figures mean something
}

// Verdict is the ledger's account so far.
func (l *Ledger) Verdict() Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := Verdict{Sent: l.sent, SendFailed: l.sendFailed, Deleted: l.delAcked, DelUnsure: l.delUnsure, Received: l.received,
		MustSee: l.mustSee, Seen: l.seen, Back: l.back, Bad: l.nBad, Backwards: l.backwards, Repeats: l.repeats,
		Early: l.early, Raced: l.raced, Copies: l.copies, FinalDups: l.finalDups, MaxCount: l.maxCount,
		cfg: l.cfg}
	v.Samples = append(append(append(v.Samples, l.bad...), l.backSamples...), l.bwSamps...)
	for i, e := range l.msgs {
		if !e.required || e.final {
			continue
		}
		v.Lost++
		if len(v.LostSamples) < 10 {
			s := fmt.Sprintf("message %s (body %d, send %v, acknowledged as this one %v): received %d times",
				e.mid, e.id, l.bodies[e.id].state, e.acked, e.receives)
			if e.receives > 0 && l.history() {
				last := l.hist[i].last
				s += fmt.Sprintf(", the last by a receive sent at %v, count %d", last.sent.Round(time.Millisecond), last.count)
			}
			v.LostSamples = append(v.LostSamples, s)
		}
	}
	return v
}

// Failed says whether anything was lost, came back, went backwards or
// was otherwise wrong.
func (v Verdict) Failed() bool { return v.Lost > 0 || v.Back > 0 || v.Bad > 0 || v.Backwards > 0 }

func (v Verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d lost of %d that must come back (%d came back); %d acknowledged deletes came back; ", v.Lost, v.MustSee, v.Seen, v.Back)
	if v.cfg.Counts {
		fmt.Fprintf(&b, "%d receive counts went backwards; ", v.Backwards)
	}
	fmt.Fprintf(&b, "%d other violations", v.Bad)
	fmt.Fprintf(&b, "\n  sends: %d acknowledged, %d failed; deletes: %d acknowledged in time, %d failed or unsure; %d receives",
		v.Sent, v.SendFailed, v.Deleted, v.DelUnsure, v.Received)
	var more []string
	if v.cfg.Counts {
		more = append(more, fmt.Sprintf("receive counts up to %d; %d receives in sequence with the same count", v.MaxCount, v.Repeats))
	}
	if v.cfg.Early {
		more = append(more, fmt.Sprintf("%d receives within an earlier one's visibility timeout (%d of them raced an acknowledged delete)", v.Early, v.Raced))
	}
	if v.cfg.Copies {
		more = append(more, fmt.Sprintf("%d bodies came as a second message (retried sends)", v.Copies))
	}
	more = append(more, fmt.Sprintf("%d receives of a message twice in the final drain", v.FinalDups))
	fmt.Fprintf(&b, "\n  %s", strings.Join(more, "; "))
	for _, s := range v.LostSamples {
		fmt.Fprintf(&b, "\n  lost: %s", s)
	}
	for _, s := range v.Samples {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}
