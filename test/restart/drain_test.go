package restart

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/sluicemq/sluice/test/process"
)

var restartMessages = flag.Int("restart.messages", 0, "TestRestartDrainRestart: 0 sends 30,000 messages and restarts twice, "+
	"once by SIGTERM and once by SIGKILL; N > 0 sends N and restarts three times (SIGTERM, SIGKILL, SIGKILL), the issue's run is 2000000")

// TestRestartDrainRestart is the reproduction: send many 1 KiB
// messages, restart, receive and delete about half and send a few more,
// restart again, and receive everything. Every message whose send was
// acknowledged and whose delete was not must come back with its body, and
// none whose delete was acknowledged. The drain empties whole segments,
// which the server unlinks, and leaves others with a few live messages
// among more deleted ones (see pick); its deletes come last, just
// before the restart, as when a server is stopped right after a drain.
// Recovery must not free a segment that still holds a live message.
func TestRestartDrainRestart(t *testing.T) {
	if n := *restartMessages; n > 0 {
		drainRestart(t, n, []process.Stop{process.Term, process.Kill, process.Kill})
		return
	}
	for _, how := range []process.Stop{process.Term, process.Kill} {
		t.Run(how.String(), func(t *testing.T) { drainRestart(t, 30000, []process.Stop{how, how}) })
	}
}

// Concurrency of the drain test, as in the issue.
const (
	drainSenders   = 4
	drainConsumers = 4
	drainExtra     = 1000      // messages sent after each drain
	drainVis       = time.Hour // longer than a drain step: a message is held, then deleted or made visible
)

// drainRestart sends n messages, then for each stop in stops: stops and
// starts the server, and unless it is the last one, drains: receives the
// messages pick chose (holding every message it receives, and
// making those not picked visible again), sends drainExtra more, and
// deletes the picked ones. Then it receives everything and checks it.
func drainRestart(t *testing.T, n int, stops []process.Stop) {
	// Bounded whatever the server does: generous for a loaded machine
	// (about 2,000 messages a second), so only a hang reaches it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute+time.Duration(n/500)*time.Second)
	defer cancel()
	s := newServer(t)
	s.start()
	c := s.client()
	url := createQueue(t, c)
	l := newLedger()
	var segs segmentWatch

	begin := time.Now()
	failed := sendAll(ctx, c, url, l, n, drainSenders)
	now, _, _ := segs.look(s)
	t.Logf("sent %d x %d B with %d senders in %v: %d acknowledged, %v; %d segments",
		n, bodySize, drainSenders, time.Since(begin).Round(time.Millisecond), l.Acks(), failed, now)

	for i, how := range stops {
		begin = time.Now()
		s.stop(how)
		stopped := time.Since(begin)
		s.start()
		c = s.client()
		url = queueURL(t, c)
		now, removed, created := segs.look(s)
		t.Logf("restart %d (%v): stopped in %v, serving %v after exec; %d segments (%d removed, %d new since the last look)",
			i+1, how, stopped.Round(time.Millisecond), s.started.Round(time.Millisecond), now, removed, created)
		if i == len(stops)-1 {
			break
		}
		live := l.Live()
		chosen, picked := pick(live)
		begin = time.Now()
		before := l.Deletes()
		// Above what a queue may have in flight, picked messages are deleted
		// as they come, before the extra sends, instead of held.
		stream := picked > 60000
		hold, failed, notBack := receivePicked(ctx, c, url, l, chosen, picked, drainConsumers, drainVis, stream)
		t.Logf("drain %d: received the %d to delete (%d held; the rest deleted as they came when streaming) with %d consumers in %v (%v); made the others visible again",
			i+1, picked, len(hold), drainConsumers, time.Since(begin).Round(time.Millisecond), failed)
		if notBack > 0 {
			t.Fatalf("drain %d: %d received messages could not be made visible again", i+1, notBack)
		}
		begin = time.Now()
		failed = sendAll(ctx, c, url, l, drainExtra, drainSenders)
		t.Logf("sent %d more in %v (%v)", drainExtra, time.Since(begin).Round(time.Millisecond), failed)
		begin = time.Now()
		failed = deleteHeld(ctx, c, url, l, hold, drainConsumers)
		deleted := l.Deletes() - before
		now, removed, created = segs.look(s)
		t.Logf("drain %d: deleted %d of %d in %v (%v); %d segments (%d removed, %d new)",
			i+1, deleted, len(live), time.Since(begin).Round(time.Millisecond), failed, now, removed, created)
		if deleted < picked*9/10 {
			t.Errorf("drain %d: found and deleted %d of the %d picked: the others never came", i+1, deleted, picked)
		}
	}

	begin = time.Now()
	failed = drainAll(ctx, c, url, l, time.Now(), drainConsumers)
	v := l.Verdict()
	t.Logf("final receive in %v (%v): %v", time.Since(begin).Round(time.Millisecond), failed, v)
	t.Logf("%v", s.figures())
	if segs.removed == 0 {
		t.Errorf("no segment was removed in the whole run: the run did not exercise what it tests (more messages, or smaller -restart.segment-bytes)")
	}
	if ctx.Err() != nil {
		t.Errorf("the run hit its time bound: %v", ctx.Err())
	}
	if v.Failed() {
		t.Errorf("after restarts %v: %v\n%v", stops, v, s.figures())
	}
}
