package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/traffic"
)

var (
	silentOwned = flag.Int("cluster.silent-owned", 4, "TestClusterSilentLoss: queues the lost node owns (the test creates about three times as many; "+
		"the issue's runs: 10, 30, 100)")
	silentHow   = flag.String("cluster.silent-how", "cut", "TestClusterSilentLoss: how the node is lost: cut (its routes go silent, nothing closes) or kill (SIGKILL)")
	silentFor   = flag.Duration("cluster.silent-for", 20*time.Second, "TestClusterSilentLoss: how long the node stays lost")
	silentLeads = flag.Bool("cluster.silent-leads-leases", false, "TestClusterSilentLoss: move the lease bucket's leader to the node before it is lost "+
		"(the worst case: no lease expires until the bucket elects another)")
)

// TestClusterSilentLoss loses a node the way a machine that dies, or
// whose network does, is lost: nothing closes. Every route between the
// three `sluice serve` processes goes through a proxy of the test's
// (routeNet), and the cut stalls the proxies from and to the node: no
// byte passes, no connection closes or is refused, so nothing but
// silence tells the others (-cluster.silent-how kill SIGKILLs the node
// instead, which the kernel reports at once: the kind case, side by
// side).
//
// The test creates queues until one node owns -cluster.silent-owned of
// them (placement spreads them over the three), and loses that node
// while a sender and a receiver per queue it owns work through the other
// two nodes, one request at a time, without retries; a probe works
// through the lost node itself. It measures, for each of those queues,
// when a send through the others was acknowledged again after the cut
// (the queue is served again), and how long each request through the
// others took and what it got. After -cluster.silent-for it heals the
// cut (or starts the node again on its data), waits until the node is a
// member that serves queues again, drains every queue and checks each
// queue's ledger: no acknowledged send lost, none stored twice, no
// acknowledged delete back.
//
// What it asserts beyond the ledgers: every queue is served again while
// the node is still lost; no request through the other two ended in an
// error a client would not retry; the lost node acknowledged no send and
// delivered no message during the cut (it cannot write); it rejoins and
// serves its share again without a step of the test's. The times are the
// figures docs/cluster.md quotes: logged, not asserted beyond a bound
// that only a hang would pass.
func TestClusterSilentLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes and loses one")
	}
	kill := *silentHow == "kill"
	if !kill && *silentHow != "cut" {
		t.Fatalf("-cluster.silent-how %q: want cut or kill", *silentHow)
	}
	c, rn := startProxiedCluster(t)
	clients := []*sqs.Client{c.client(0, false), c.client(1, false), c.client(2, false)}
	if kill {
		c.createQueue(0, queueName, queueAttributes) // what c.restart asks the node about
	}

	victim, queues, urls := placeQueues(t, c, clients[0], *silentOwned)
	vi := slices.Index(c.nodes, victim)
	var majority []int
	for i := range c.nodes {
		if i != vi {
			majority = append(majority, i)
		}
	}
	t.Logf("%s owns %d of %d queues; it is lost by %s for %v", victim.name, len(queues), len(urls), *silentHow, *silentFor)

	// The load: per queue the victim owns, a sender and a receiver through
	// the other two nodes (alternating), and a probe through the victim.
	ld := startSilentLoad(c, clients, majority, queues, urls)
	defer ld.stop()
	if err := ld.awaitAcks(time.Minute, 3); err != nil {
		t.Fatalf("before the loss: %v", err)
	}
	probeQueue := queues[0]
	probeLedger := ld.ledgers[probeQueue]
	pr := startProbe(clients[vi], urls[probeQueue], probeLedger)
	defer pr.stop()

	if *silentLeads {
		if err := c.leadLeases(victim); err != nil {
			t.Fatalf("moving the lease bucket's leader to %s: %v", victim.name, err)
		}
		t.Logf("%s leads the lease bucket", victim.name)
	}
	before, err := victim.clusterStatus()
	if err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	if kill {
		if _, err := victim.stop(process.Kill); err != nil {
			t.Fatal(err)
		}
	} else {
		held := rn.silence(victim.name)
		t.Logf("cut %s off silently: its proxies hold %d connections and pass nothing", victim.name, held)
	}
	// A call through the victim begun before this may have done its work
	// before the loss took hold (its write replicated, its answer still on
	// the way): the ledgers, not the check below, judge it.
	cut := time.Now()
	ld.mark(lost)

	// Every queue served again through the other two.
	err = poll(*silentFor, 100*time.Millisecond, func() (bool, error) {
		if n := ld.unserved(lost); len(n) > 0 {
			return false, fmt.Errorf("not served again: %v", n)
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("within %v of the loss: %v", *silentFor, err)
	}
	if d := time.Until(lost.Add(*silentFor)); d > 0 {
		<-time.After(d) // the loss lasts -cluster.silent-for: not a synchronisation
	}
	var during clusterJSON
	if !kill {
		during, _ = victim.clusterStatus()
	}

	// The heal (or restart), while the probe works through the victim.
	healed := time.Now()
	if kill {
		if _, _, err := c.restart(victim); err != nil {
			t.Fatal(err)
		}
	} else {
		rn.unsilence(victim.name)
	}
	if err := c.healthy(2 * time.Minute); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	whole := time.Since(healed)
	// It serves its share again: placement hands it its queues back, and a
	// send through it is acknowledged.
	var share time.Duration
	err = poll(2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		st, err := victim.clusterStatus()
		if err != nil {
			return false, err
		}
		if st.Owned == 0 {
			return false, fmt.Errorf("%s owns nothing", victim.name)
		}
		share = time.Since(healed)
		return true, nil
	})
	if err != nil {
		t.Errorf("%s does not serve its share again after the heal: %v", victim.name, err)
	}
	if _, err := pr.await(time.Minute, func(calls []call) bool {
		return slices.ContainsFunc(calls, func(k call) bool { return k.send && k.err == nil && k.start.After(healed) })
	}); err != nil {
		t.Errorf("no send through %s is acknowledged after the heal: %v", victim.name, err)
	}
	back := time.Since(healed)
	after, _ := victim.clusterStatus()
	pr.stop()
	ld.stop()

	// The figures.
	gaps := ld.gaps(lost)
	var slowest time.Duration
	var ds []time.Duration
	for _, q := range queues {
		ds = append(ds, gaps[q])
		slowest = max(slowest, gaps[q])
	}
	slices.Sort(ds)
	t.Logf("served again after the loss (a send through the other two acknowledged), %d queues: median %v, slowest %v; all: %v",
		len(ds), median(ds).Round(time.Millisecond), slowest.Round(time.Millisecond), rounded(ds))
	rep := ld.report(lost, healed)
	t.Log(rep.String())
	for _, s := range rep.bad {
		t.Errorf("a request through the other two during the loss: %s", s)
	}
	if !kill {
		t.Logf("during the cut, %s's /api/cluster said: members %v, %d partitions owned (%d before), %d unanswered lease renewals (%d before)",
			victim.name, during.Members, during.Owned, before.Owned, during.RenewFailures, before.RenewFailures)
	}
	// The probe through the victim: nothing acknowledged, nothing delivered.
	type outcomes struct {
		n              int
		first, slowest time.Duration
	}
	kinds := map[string]*outcomes{}
	var sends, recvs int
	for _, k := range pr.calls() {
		if k.end.Before(lost) || !k.end.Before(healed) {
			continue
		}
		if k.send {
			sends++
		} else {
			recvs++
		}
		begun := k.start.After(cut)
		switch {
		case begun && k.send && k.err == nil:
			t.Errorf("during the loss, %s acknowledged a send begun %v after it (answered %v after it)", victim.name,
				k.start.Sub(lost).Round(time.Millisecond), k.end.Sub(lost).Round(time.Millisecond))
		case begun && !k.send && k.got > 0:
			t.Errorf("during the loss, %s delivered %d messages to a receive begun %v after it (answered %v after it)", victim.name, k.got,
				k.start.Sub(lost).Round(time.Millisecond), k.end.Sub(lost).Round(time.Millisecond))
		}
		o := fmt.Sprintf("%s %s", map[bool]string{true: "send", false: "receive"}[k.send], k.outcome())
		if !begun {
			o += " (begun before the cut)"
		}
		if kinds[o] == nil {
			kinds[o] = &outcomes{first: k.end.Sub(lost)}
		}
		kinds[o].n++
		kinds[o].slowest = max(kinds[o].slowest, k.end.Sub(k.start))
	}
	if !kill {
		var parts []string
		for _, o := range slices.Sorted(maps.Keys(kinds)) {
			x := kinds[o]
			parts = append(parts, fmt.Sprintf("%d %s (the first %v after the loss, the slowest in %v)", x.n, o,
				x.first.Round(time.Millisecond), x.slowest.Round(time.Millisecond)))
		}
		t.Logf("the probe through %s during the cut: %d sends, %d receives: %s", victim.name, sends, recvs, strings.Join(parts, "; "))
	}
	t.Logf("after the heal: the cluster is whole (three members, every stream current) %v after it; %s owns partitions again %v after it "+
		"(%d now); a send through it is acknowledged %v after it", whole.Round(time.Millisecond), victim.name, share.Round(time.Millisecond),
		after.Owned, back.Round(time.Millisecond))

	// Every queue's ledger.
	for _, q := range queues {
		l := ld.ledgers[q]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		failed := traffic.Drain(ctx, []*sqs.Client{clients[majority[0]], clients[majority[1]]}, urls[q], l, time.Now().Add(5*time.Second))
		cancel()
		if v := l.Verdict(); v.Failed() || v.Copies > 0 {
			t.Errorf("queue %s: %v (drain: %v)", q, v, failed)
		}
	}
	var sent, acked, lostN int
	for _, q := range queues {
		v := ld.ledgers[q].Verdict()
		sent += v.Sent + v.SendFailed
		acked += v.Sent
		lostN += v.Lost
	}
	t.Logf("ledgers: %d sends, %d acknowledged, %d lost; no body stored twice unless reported above", sent, acked, lostN)
}

// placeQueues creates queues until one node owns want of them once
// placement has settled (a new queue's partition is claimed by the node
// that created it and handed over to its preferred node after a while),
// and returns that node, the queues it owns, and every queue's URL.
func placeQueues(t *testing.T, c *cluster, cl *sqs.Client, want int) (*node, []string, map[string]string) {
	t.Helper()
	urls := map[string]string{}
	for round := 0; ; round++ {
		for i := range max(want, 3) {
			name := fmt.Sprintf("q%03d", round*max(want, 3)+i)
			urls[name] = c.createQueue(0, name, queueAttributes)
		}
		owners := settledOwners(t, c, slices.Collect(maps.Keys(urls)))
		by := map[string][]string{}
		for q, n := range owners {
			by[n] = append(by[n], q)
		}
		var best string
		for _, n := range c.nodes {
			if len(by[n.name]) > len(by[best]) {
				best = n.name
			}
		}
		if len(by[best]) >= want {
			qs := by[best]
			sort.Strings(qs)
			return c.named(best), qs[:want], urls
		}
	}
}

// settledOwners waits until every node names the same owner of every
// queue in names, and nothing moved for a while after the queues' hand-
// overs were due, and returns the owners by queue.
func settledOwners(t *testing.T, c *cluster, names []string) map[string]string {
	t.Helper()
	due := time.Now().Add(settleHold)
	var last map[string]string
	var since time.Time
	err := poll(3*time.Minute, 500*time.Millisecond, func() (bool, error) {
		now := map[string]string{}
		for _, n := range c.nodes {
			st, err := n.clusterStatus()
			if err != nil {
				return false, err
			}
			for _, q := range names {
				o := st.Owners[q]
				if o == "" {
					return false, fmt.Errorf("%s names no owner of %s", n.name, q)
				}
				if prev, ok := now[q]; ok && prev != o {
					return false, fmt.Errorf("%s names %s the owner of %s, another node %s", n.name, o, q, prev)
				}
				now[q] = o
			}
		}
		if !maps.Equal(now, last) {
			last, since = now, time.Now()
			return false, errors.New("owners moved")
		}
		return time.Now().After(due) && time.Since(since) > 3*time.Second, errors.New("owners may still move")
	})
	if err != nil {
		t.Fatalf("placing %d queues: %v", len(names), err)
	}
	return last
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return (ds[(len(ds)-1)/2] + ds[len(ds)/2]) / 2
}

// silentLoad is the test's load: per queue, a sender and a receiver
// through the majority's nodes, one request at a time.
type silentLoad struct {
	ledgers map[string]*ledger.Ledger
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	calls []qcall
	since time.Time // the loss
}

// qcall is one request of the load.
type qcall struct {
	queue      string
	send       bool
	node       string
	start, end time.Time
	err        error
	got        int
}

// silentPace is how long a worker waits between its requests, for each
// queue the load works on (so that the load does not grow with them).
const silentPace = 8 * time.Millisecond

// retryPace is how long a worker waits after a request that failed. A
// failed request took half a second or more (the forwarding node's wait
// for a new owner), so the load of retries stays below the steady load.
const retryPace = 100 * time.Millisecond

func startSilentLoad(c *cluster, clients []*sqs.Client, via []int, queues []string, urls map[string]string) *silentLoad {
	ctx, cancel := context.WithCancel(context.Background())
	ld := &silentLoad{ledgers: map[string]*ledger.Ledger{}, cancel: cancel}
	pace := max(100*time.Millisecond, time.Duration(len(queues))*silentPace)
	for qi, q := range queues {
		l := newLedger(false)
		ld.ledgers[q] = l
		failed := traffic.NewFailures()
		run := func(send bool) {
			for i := qi; ctx.Err() == nil; i++ {
				n := via[i%len(via)]
				rctx, rcancel := context.WithTimeout(ctx, 40*time.Second)
				k := qcall{queue: q, send: send, node: c.nodes[n].name, start: time.Now()}
				if send {
					k.err = traffic.SendOne(rctx, clients[n], urls[q], l)
				} else {
					k.got, k.err = traffic.Consume(rctx, clients[n], urls[q], l, loadVis, nil, failed)
				}
				rcancel()
				k.end = time.Now()
				if ctx.Err() != nil {
					return
				}
				ld.mu.Lock()
				ld.calls = append(ld.calls, k)
				ld.mu.Unlock()
				// After an error, the next request soon, as a client's retry
				// would: the time a queue is served again is then measured to
				// within retryPace, not to within pace (2.4 s with 300 queues).
				wait := pace
				if k.err != nil {
					wait = min(pace, retryPace)
				}
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		}
		ld.wg.Go(func() { run(true) })
		ld.wg.Go(func() { run(false) })
	}
	return ld
}

func (ld *silentLoad) stop() {
	ld.cancel()
	ld.wg.Wait()
}

func (ld *silentLoad) mark(at time.Time) {
	ld.mu.Lock()
	ld.since = at
	ld.mu.Unlock()
}

func (ld *silentLoad) snapshot() []qcall {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return slices.Clone(ld.calls)
}

// awaitAcks waits until every queue had n acknowledged sends.
func (ld *silentLoad) awaitAcks(timeout time.Duration, n int) error {
	return poll(timeout, 100*time.Millisecond, func() (bool, error) {
		for q, l := range ld.ledgers {
			if l.Acks() < n {
				return false, fmt.Errorf("queue %s: %d acknowledged sends", q, l.Acks())
			}
		}
		return true, nil
	})
}

// gaps is, per queue, how long after at a send that began after at was
// acknowledged first (a queue never served again is missing).
func (ld *silentLoad) gaps(at time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, k := range ld.snapshot() {
		if !k.send || k.err != nil || !k.start.After(at) {
			continue
		}
		if d, ok := out[k.queue]; !ok || k.end.Sub(at) < d {
			out[k.queue] = k.end.Sub(at)
		}
	}
	return out
}

// unserved lists the queues not served again since at.
func (ld *silentLoad) unserved(at time.Time) []string {
	gaps := ld.gaps(at)
	var out []string
	for q := range ld.ledgers {
		if _, ok := gaps[q]; !ok {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

// silentReport is what the requests through the majority got while the
// node was lost.
type silentReport struct {
	served, retryable []time.Duration // how long each took
	kinds             map[string]int  // the errors, by kind
	bad               []string        // errors a client would not retry, and waits longer than a hang's bound
}

// retryableKinds are the errors an SDK retries (a throttle, an
// unavailable service): what a request may get while a queue moves.
var retryableKinds = map[string]bool{"ServiceUnavailable": true, "ThrottlingException": true, "RequestThrottled": true}

// hangBound is longer than any request through a healthy node may take
// that is not served: an answer after it is a hang until a client's
// timeout, whatever it says.
const hangBound = 10 * time.Second

func (ld *silentLoad) report(lost, healed time.Time) silentReport {
	r := silentReport{kinds: map[string]int{}}
	for _, k := range ld.snapshot() {
		if k.end.Before(lost) || k.start.After(healed) {
			continue
		}
		took := k.end.Sub(k.start)
		what := map[bool]string{true: "send", false: "receive"}[k.send]
		if k.err == nil {
			r.served = append(r.served, took)
			continue
		}
		kind, _, _ := strings.Cut(traffic.ErrKind(k.err), " (after")
		r.kinds[what+" "+kind]++
		r.retryable = append(r.retryable, took)
		if !retryableKinds[kind] {
			r.bad = append(r.bad, fmt.Sprintf("a %s of %s through %s ended %v after the loss, after %v: %v", what, k.queue, k.node,
				k.end.Sub(lost).Round(time.Millisecond), took.Round(time.Millisecond), k.err))
		} else if took > hangBound {
			r.bad = append(r.bad, fmt.Sprintf("a %s of %s through %s waited %v for %s", what, k.queue, k.node, took.Round(time.Millisecond), kind))
		}
	}
	slices.Sort(r.served)
	slices.Sort(r.retryable)
	return r
}

func (r silentReport) String() string {
	q := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(time.Millisecond)
	}
	var over2 int
	for _, d := range r.retryable {
		if d > 2*time.Second {
			over2++
		}
	}
	return fmt.Sprintf("requests through the other two during the loss: %d served (took p50 %v, p99 %v, max %v); "+
		"%d answered an error (p50 %v, p99 %v, max %v; %d after more than 2 s): %v",
		len(r.served), q(r.served, 0.5), q(r.served, 0.99), q(r.served, 1), len(r.retryable), q(r.retryable, 0.5), q(r.retryable, 0.99),
		q(r.retryable, 1), over2, r.kinds)
}

// leadLeases makes n the leader of the lease bucket's stream: it asks the
// leader to step down in favour of n until n leads.
func (c *cluster) leadLeases(n *node) error {
	stream := "KV_" + c.name + "-leases"
	return c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
		return poll(10*time.Second, 200*time.Millisecond, func() (bool, error) {
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return false, err
			}
			if ci := st.CachedInfo().Cluster; ci != nil && ci.Leader == n.name {
				return true, nil
			}
			body := []byte(`{"placement":{"preferred":"` + n.name + `"}}`)
			_, err = js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
			return false, err
		})
	})
}
