package restart

import (
	"context"
	"flag"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/traffic"
)

var (
	killRounds = flag.Int("restart.rounds", 3, "TestKillLoopUnderLoad: rounds of load, each ended by a SIGKILL (the full run: 10)")
	roundSends = flag.Int("restart.round-sends", 5000, "TestKillLoopUnderLoad: acknowledged sends in a round before its SIGKILL, at least (a round also lasts 2.5s at least; the full run: 100000)")
)

// The load of TestKillLoopUnderLoad.
const (
	// minRound is the shortest round: the server renews snapshots and
	// compacts every second, and a round of a fast machine's few hundred
	// milliseconds would kill a server that had not yet freed anything.
	minRound      = 2500 * time.Millisecond
	loadSenders   = 16 // each sending batches of batchSize
	loadConsumers = 4  // each receiving up to batchSize and deleting them in a batch
	loadVis       = 5 * time.Second
)

// TestKillLoopUnderLoad kills the server with SIGKILL in the middle of
// concurrent sends, receives and deletes, restarts it, and goes on, for
// -restart.rounds rounds; then it receives everything left. Every message
// whose send was acknowledged (or that was received) and whose delete was
// not must come back, and no message whose delete was acknowledged may
// come back, neither to the consumers during the rounds nor at the end.
// Each round lasts until -restart.round-sends sends were acknowledged and
// for at least minRound, so that every kill finds segments the consumers
// emptied unlinked, snapshots renewed and deletes still to replay.
func TestKillLoopUnderLoad(t *testing.T) {
	rounds, perRound := *killRounds, *roundSends
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute+time.Duration(rounds*perRound/500)*time.Second)
	defer cancel()
	s := newServer(t)
	s.start()
	url := createQueue(t, s.client())
	l := newLedger()
	var segs segmentWatch
	segs.look(s)
	var killed time.Time
	for r := 1; r <= rounds; r++ {
		if r > 1 {
			url = queueURL(t, s.client())
		}
		begin := time.Now()
		sentBefore, deletedBefore := l.Acks(), l.Deletes()
		failed := runUntilKill(ctx, s, url, l, perRound)
		killed = time.Now()
		v := l.Verdict()
		now, removed, created := segs.look(s)
		t.Logf("round %d: killed after %v: %d sends and %d deletes acknowledged in the round (%d and %d in all), %v; "+
			"%d segments (%d removed, %d new in the round)",
			r, killed.Sub(begin).Round(time.Millisecond), v.Sent-sentBefore, v.Deleted-deletedBefore, v.Sent, v.Deleted, failed, now, removed, created)
		if ctx.Err() != nil {
			t.Fatalf("round %d hit the time bound before %d acknowledged sends\n%v", r, perRound, s.figures())
		}
		s.start()
		t.Logf("restart %d: serving %v after exec", r, s.started.Round(time.Millisecond))
	}

	betweenKills := segs.removed
	// Messages received before the last kill are visible again once
	// their visibility timeout has passed.
	begin := time.Now()
	failed := drainAll(ctx, s.client(), queueURL(t, s.client()), l, killed.Add(loadVis+ledger.VisibilityMargin), loadConsumers)
	v := l.Verdict()
	now, removed, created := segs.look(s)
	t.Logf("final receive in %v (%v): %v", time.Since(begin).Round(time.Millisecond), failed, v)
	t.Logf("segments: %d now; %d removed and %d created over the run (%d removed since the last kill); %v",
		now, betweenKills, segs.created-created, removed, s.figures())
	if betweenKills == 0 {
		t.Errorf("no segment was removed between kills: the run did not exercise what it tests (more -restart.round-sends, or smaller -restart.segment-bytes)")
	}
	if ctx.Err() != nil {
		t.Errorf("the run hit its time bound: %v", ctx.Err())
	}
	if v.Failed() {
		t.Errorf("after %d kills under load: %v\n%v", rounds, v, s.figures())
	}
}

// runUntilKill runs loadSenders senders and loadConsumers consumers
// against the server until perRound sends were acknowledged and minRound
// has passed (or ctx ends), kills the server with SIGKILL while they run,
// and stops them. It returns the failed requests.
func runUntilKill(ctx context.Context, s *server, url string, l *ledger.Ledger, perRound int) *traffic.Failures {
	c := s.client()
	begin := time.Now()
	var acked atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	load := traffic.Start(ctx, url, l, traffic.Config{Senders: loadSenders, Receivers: loadConsumers, Vis: loadVis,
		Route: func(int) (traffic.Route, bool) {
			downs := s.downs.Load()
			return traffic.Route{Client: c, Down: func() bool { return s.downs.Load() != downs || s.out.Load() }}, true
		},
		Sent: func(n int) {
			if acked.Add(int64(n)) >= int64(perRound) {
				once.Do(func() { close(enough) })
			}
		}})
	defer load.Stop() // also when the kill fails the test
	select {
	case <-enough:
	case <-ctx.Done():
	}
	minimum := time.NewTimer(time.Until(begin.Add(minRound)))
	defer minimum.Stop()
	select {
	case <-minimum.C:
	case <-ctx.Done():
	}
	s.stop(process.Kill) // with requests in flight
	load.Stop()
	return load.Failed()
}
