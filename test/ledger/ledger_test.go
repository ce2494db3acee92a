package ledger

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/test/testkit"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bodies = testkit.Bodies{Size: 32, Tag: 't'}

// The visibility timeouts of the steps: one that holds a message for the
// whole test, and one that a delete always comes too late for.
const (
	long = time.Hour
	none = 0
)

// A step is one thing the client saw: a send acknowledged (ack) or failed
// (fail), a receive (recv, with a receive count and the visibility
// timeout it asked for; sent when its step starts, and answered), a delete of the message of an earlier step's
// receive, acknowledged or not (del), the final drain's start (final).
// Messages are named by a letter; every step's body is that of body id.
type step struct {
	op    string
	id    int
	msg   byte
	count int
	vis   time.Duration
	of    int  // del: the step of the receive whose handle it uses
	ok    bool // del: acknowledged
	// recv: the step at whose start the receive was sent (0: this one's),
	// for a receive answered after a later step.
	sentAt int
}

// figures are the verdict's counters a case compares.
type figures struct {
	Lost, MustSee, Back, Bad, Backwards, Early, Raced, Copies int
}

// TestLedger runs the rules of the model through table cases: what must
// come back, what may not, and what each Config allows.
func TestLedger(t *testing.T) {
	mids := map[byte]string{}
	mid := func(c byte) string {
		if mids[c] == "" {
			mids[c] = uuid.NewString()
		}
		return mids[c]
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
		want  figures
	}{
		{name: "acknowledged, never received: lost",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "final"}},
			want:  figures{Lost: 1, MustSee: 1}},
		{name: "acknowledged, received in the final drain",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "final"}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long}},
			want:  figures{MustSee: 1}},
		{name: "send failed, never received: may be gone",
			steps: []step{{op: "fail", id: 0}, {op: "final"}},
			want:  figures{}},
		{name: "send failed but received: it exists, and must come back",
			steps: []step{{op: "fail", id: 0}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long}, {op: "final"}},
			want:  figures{Lost: 1, MustSee: 1}},
		{name: "deleted in time: must not come back",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "del", of: 1, ok: true}, {op: "final"}, {op: "recv", id: 0, msg: 'a', count: 2, vis: long}},
			want: figures{Back: 1}},
		{name: "delete too late to be sure: may come back, need not",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: none},
				{op: "del", of: 1, ok: true}, {op: "final"}, {op: "recv", id: 0, msg: 'a', count: 2, vis: long}},
			want: figures{}},
		{name: "delete failed: may come back, need not",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "del", of: 1, ok: false}, {op: "final"}},
			want: figures{}},
		{name: "a body as two messages, without Copies",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'b', count: 1, vis: long}, {op: "final"}},
			want:  figures{Bad: 1, Lost: 2, MustSee: 2}},
		{name: "a body as two messages, with Copies: each must come back",
			cfg: Config{Copies: true},
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'b', count: 1, vis: long}, {op: "final"},
				{op: "recv", id: 0, msg: 'a', count: 1, vis: long}},
			want: figures{Copies: 1, Lost: 1, MustSee: 2}},
		{name: "one MessageId with two bodies",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "ack", id: 1, msg: 'b'}, {op: "recv", id: 1, msg: 'a', count: 1, vis: long}},
			want:  figures{Bad: 1}},
		{name: "a body never sent",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 5, msg: 'b', count: 1, vis: long}},
			want:  figures{Bad: 1}},
		{name: "receive count backwards, with Counts",
			cfg: Config{Counts: true},
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 2, vis: none},
				{op: "recv", id: 0, msg: 'a', count: 1, vis: none}},
			want: figures{Backwards: 1}},
		{name: "receive count backwards, without Counts: not checked",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 2, vis: none},
				{op: "recv", id: 0, msg: 'a', count: 1, vis: none}},
			want: figures{}},
		{name: "no receive count, with Counts",
			cfg:   Config{Counts: true},
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 0, vis: long}},
			want:  figures{Bad: 1}},
		{name: "with Early, a delete with a handle older than the last receive is unsure",
			cfg: Config{Early: true},
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "recv", id: 0, msg: 'a', count: 2, vis: long}, {op: "del", of: 1, ok: true}, {op: "final"},
				{op: "recv", id: 0, msg: 'a', count: 3, vis: long}},
			want: figures{Early: 2}},
		{name: "the same without Early: the delete took, and the message came back",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "recv", id: 0, msg: 'a', count: 2, vis: long}, {op: "del", of: 1, ok: true}, {op: "final"},
				{op: "recv", id: 0, msg: 'a', count: 3, vis: long}},
			want: figures{Back: 1}},
		{name: "with Early, an early receive that raced an acknowledged delete: the delete is unsure",
			cfg: Config{Early: true},
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "del", of: 1, ok: true}, {op: "recv", id: 0, msg: 'a', count: 2, vis: long, sentAt: 2}, {op: "final"},
				{op: "recv", id: 0, msg: 'a', count: 3, vis: long}},
			want: figures{Early: 2, Raced: 1}},
		{name: "the same without Early: the delete took, and the message came back",
			steps: []step{{op: "ack", id: 0, msg: 'a'}, {op: "recv", id: 0, msg: 'a', count: 1, vis: long},
				{op: "del", of: 1, ok: true}, {op: "recv", id: 0, msg: 'a', count: 2, vis: long, sentAt: 2}, {op: "final"},
				{op: "recv", id: 0, msg: 'a', count: 3, vis: long}},
			want: figures{Back: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(mids)
			cfg := tc.cfg
			cfg.Bodies = bodies
			l := New(cfg)
			l.IDs(2)
			receives := map[int]Receive{}
			var times []time.Time
			for i, s := range tc.steps {
				now := time.Now()
				times = append(times, now)
				switch s.op {
				case "ack":
					l.SendAcked(s.id, mid(s.msg))
				case "fail":
					l.SendFailed(s.id)
				case "recv":
					count := ""
					if s.count > 0 {
						count = string(rune('0' + s.count))
					}
					sent := now
					if s.sentAt > 0 {
						sent = times[s.sentAt]
					}
					r, ok := l.Received(mid(s.msg), bodies.Body(s.id), count, sent, now, s.vis)
					if ok {
						receives[i] = r
					}
				case "del":
					l.Deleted(receives[s.of], s.ok)
				case "final":
					l.BeginFinal()
				}
				for time.Now().Equal(now) {
					// The next step's clock reading must be later than this
					// one's (a receive sent after a delete's acknowledgement
					// is later than it); it is, but for a clock this coarse.
				}
			}
			v := l.Verdict()
			got := figures{Lost: v.Lost, MustSee: v.MustSee, Back: v.Back, Bad: v.Bad, Backwards: v.Backwards, Early: v.Early, Raced: v.Raced, Copies: v.Copies}
			if got != tc.want {
				t.Errorf("got %+v, want %+v\n%v", got, tc.want, v)
			}
			if v.Failed() != (tc.want.Lost > 0 || tc.want.Back > 0 || tc.want.Bad > 0 || tc.want.Backwards > 0) {
				t.Errorf("Failed() = %v for %v", v.Failed(), v)
			}
		})
	}
}

// TestLive lists the messages that must still be in the queue, by body id.
func TestLive(t *testing.T) {
	l := New(Config{Bodies: bodies})
	l.IDs(4)
	l.SendAcked(2, uuid.NewString())
	l.SendFailed(3)
	l.SendAcked(0, uuid.NewString())
	m := uuid.NewString()
	l.SendAcked(1, m)
	now := time.Now()
	r, ok := l.Received(m, bodies.Body(1), "1", now, now, long)
	if !ok {
		t.Fatal("a received message the ledger refused")
	}
	l.Deleted(r, true)
	if got := l.Live(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("Live() = %v, want [0 2]", got)
	}
}
