package queue

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
)

// TestFIFOBacklogModeKeepsGroupOrder is the FIFO promise under the
// backlog mode, as a property: random sends to many groups, receives,
// deletes, failures (visibility running out, or given back at once) and
// outages (time passing with no receive, long enough for backlogs to
// stand) on a FIFO queue with the mode on; at every receive, no message
// is delivered while an older one of its group is still in the queue,
// unless that one was delivered before it in the same receive. The mode
// must have engaged, and served a group whose head is fresh before one
// whose head is older, for the run to test anything.
func TestFIFOBacklogModeKeepsGroupOrder(t *testing.T) {
	engaged, jumped := 0, 0
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			e, j := fifoOrderRun(t, seed)
			if e {
				engaged++
			}
			jumped += j
		})
	}
	t.Logf("20 runs: the backlog mode engaged in %d, and served a group ahead of one whose head was older %d times", engaged, jumped)
	if engaged < 10 || jumped < 20 {
		t.Fatal("the runs test little of the backlog mode")
	}
}

// fifoOrderRun is one run; it returns whether the mode engaged, and how
// many receives served a group while one whose head was older waited set
// aside.
func fifoOrderRun(t *testing.T, seed int64) (engaged bool, jumped int) {
	rng := rand.New(rand.NewSource(seed))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := New(Config{FIFO: true, VisibilityTimeout: 30 * time.Second, Retention: 24 * time.Hour, Sched: sched.Config{Adaptive: true}})
	groups := make([]string, 12)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%02d", i)
	}
	live := map[string][]uint64{} // by group, in order: sent and not deleted
	group := map[uint64]string{}
	sent := map[uint64]time.Time{}
	var inflight []uint64
	for step := 0; step < 3000; step++ {
		switch op := rng.Intn(20); {
		case op < 7: // a send
			g := groups[rng.Intn(len(groups))]
			if rng.Intn(3) == 0 {
				g = groups[0] // one busy group
			}
			seq := send(t, q, now, g, 0)
			live[g] = append(live[g], seq)
			group[seq], sent[seq] = g, now
		case op < 12: // a receive
			ds := q.ReceiveAll(now, 1+rng.Intn(10), time.Duration(1+rng.Intn(60))*time.Second)
			seen := map[string]map[uint64]bool{}
			for _, d := range ds {
				seq := d.Msg.Seq
				g := group[seq]
				for _, older := range live[g] {
					if older >= seq {
						break
					}
					if !seen[g][older] {
						t.Fatalf("seed %d step %d: message %d of group %s delivered while older message %d of its group is in the queue (delivered this time: %v)",
							seed, step, seq, g, older, seen[g])
					}
				}
				if seen[g] == nil {
					seen[g] = map[uint64]bool{}
				}
				seen[g][seq] = true
				inflight = append(inflight, seq)
			}
			if since, _ := q.FIFOMode(); since > 0 {
				engaged = true
			}
			// A message served while a group with an older head waits
			// set aside: the mode at work.
			for _, g := range q.gold {
				if head, _, ok := q.head(g); ok && len(ds) > 0 && head < ds[0].Msg.Sent {
					jumped++
					break
				}
			}
		case op < 16: // a delete of a delivery
			if len(inflight) == 0 {
				continue
			}
			i := rng.Intn(len(inflight))
			seq := inflight[i]
			inflight = slices.Delete(inflight, i, i+1)
			if m, ok := q.Lookup(seq); !ok || m.State != InFlight {
				continue // its visibility ran out: another delivery's now, or none
			}
			apply(t, q, now, q.DeleteRecord(seq, record.ByClient))
			g := group[seq]
			live[g] = slices.DeleteFunc(live[g], func(s uint64) bool { return s == seq })
		case op < 17: // a failure given back at once
			if len(inflight) == 0 {
				continue
			}
			seq := inflight[rng.Intn(len(inflight))]
			if m, ok := q.Lookup(seq); ok && m.State == InFlight {
				apply(t, q, now, q.VisibilityRecord(seq, now.UnixMilli()))
			}
		case op < 19: // time passes
			now = now.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
		default: // an outage: no receive for a while
			now = now.Add(time.Duration(5+rng.Intn(60)) * time.Second)
		}
	}
	return engaged, jumped
}
