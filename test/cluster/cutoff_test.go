package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/traffic"
)

// TestClusterNodeCutOff cuts the node that owns the queue off from the
// other two while they carry load, keeps it running, asks it questions,
// and lets it back in: the issue's "a node cut off from the others (its
// routes blocked): its appends are fenced, it stops answering for what it
// no longer owns, and it rejoins without manual steps".
//
// Every route between the three `sluice serve` processes goes through a
// proxy of the test's (routeNet); the cut closes the proxies from and to
// the owner and refuses new connections, in both directions, and the test
// checks that it cut: no connection to the node's route listener is left,
// none that no proxy made exists anywhere, both sides' dials are refused,
// the others' JetStream stops hearing from the node, and its membership
// expires on the others. The load is SDK clients of the other two nodes
// (sends, receives, deletes, a ledger of what was acknowledged); a probe
// sends and receives through the cut node, one request at a time each.
//
// What it asserts, and why each is what the code guarantees:
//
//   - (a) the other two take the queue over (its lease expires, the next
//     node in its rendezvous order acquires it: a failover, counted) and
//     serve it: a send through them is acknowledged.
//   - (b) the cut node never answers a request about the queue with what
//     it had: every send the probe finished during the cut failed and
//     every receive got nothing (an owner delivers or acknowledges only
//     what a JetStream quorum stored, which it cannot reach; a node that
//     is not the owner forwards, and nobody answers); once no other node
//     has answered its pings for 3 s it refuses every request at once
//     (ServiceUnavailable): the heal waits for such a refusal. Its log says that it
//     stopped serving the queue's partition, and from the moment its
//     lease manager let the lease go (it forgot it when fenced, the bucket
//     refused a renewal, or it began to hand it over) until it takes the
//     lease again (if it does, after the heal), its /api/cluster never
//     names it the queue's owner. Before that it does:
//     cut off, it cannot learn who owns the queue (its renewals go
//     unanswered, not refused: it counts them, and serves on "until
//     fenced"), and it shows what it last saw. After the heal its
//     /api/cluster names the owner the others name ((d)).
//   - (c) its appends are fenced: its store reports, for the partition, a
//     write refused by the stream's fence (the new owner's epoch record
//     moved the stream's last sequence: "jsstore: fenced") or one whose
//     outcome it cannot decide, which fences the store off the partition
//     until it replays it ("a write's outcome is unknown"). The code
//     guarantees one of the two as long as the node attempts a write as
//     the queue's owner, which the probe's sends make sure of: a write in
//     flight when the cut comes, or one to a stream whose leader is the
//     cut node (it cannot commit, and keeps answering as the leader),
//     cannot be decided within the store's 15 s of retries; a write still
//     retried when the routes come back is refused by the fence. (In the
//     runs so far the load always had a write in flight at the cut, so
//     the node fenced itself off 15 s into the cut.) Which of that, the
//     bucket's refusal of its lease ("lost a lease") or a hand-over ends
//     its ownership first depends on the timing; the test logs the order.
//   - (d) without any step of the test's, once the proxies let it through
//     again the node rejoins: every node lists three members and names
//     the same owner of the queue, which alone says it serves it, every
//     stream has three current replicas, and a send through the node that
//     was cut off is acknowledged.
//   - (e) the ledger: no acknowledged send lost, no acknowledged delete
//     back, no receive count backwards.
//
// It logs the figures docs/cluster.md quotes: the time from the cut to a
// send acknowledged by the others, to their new owner serving, to the
// others dropping the node; from the heal to the nodes agreeing on the
// owner, to a healthy cluster, and the slowest send meanwhile (a healed
// node brings back higher Raft terms, and the others' leaders step down).
func TestClusterNodeCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes and cuts one off")
	}
	c, rn := startProxiedCluster(t)
	url := c.createQueue(0, queueName, queueAttributes)
	part, stream := c.queuePartition()
	if err := allProxied(rn, ""); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	own := placedOwner(t, c, part)
	leader, err := c.streamLeader(stream)
	if err != nil {
		t.Fatal(err)
	}
	var maj []*node
	var majClients []*sqs.Client
	clients := []*sqs.Client{c.client(0, false), c.client(1, false), c.client(2, false)}
	for i, n := range c.nodes {
		if n != own {
			maj, majClients = append(maj, n), append(majClients, clients[i])
		}
	}
	mc := &cluster{t: t, name: c.name, token: c.token, nodes: maj} // the two that stay
	l := newLedger(false)
	tr := startTraffic(mc, l, url, majClients)
	defer tr.Stop()
	settle(t, l, time.Now(), 0)

	before, err := own.clusterStatus()
	if err != nil {
		t.Fatal(err)
	}
	majBefore := map[string]clusterJSON{}
	for _, n := range maj {
		if majBefore[n.name], err = n.clusterStatus(); err != nil {
			t.Fatal(err)
		}
	}
	live, _, _ := rn.carried(own.name)
	logOff := logSize(own)
	acks := l.Acks()

	// The cut.
	cut := time.Now()
	closed := rn.isolate(own.name)
	pr := startProbe(clients[slices.Index(c.nodes, own)], url, l)
	defer pr.stop()
	sampler := startSampler(own)
	defer sampler.stop()
	t.Logf("cut %s (owns %s, partition %d; %s leads its stream %s; it owns %d partitions, the catalog's owner is %q) off after %d acknowledged sends: "+
		"its proxies closed %d connections (%d live before)", own.name, queueName, part, leader, stream, before.Owned, before.CatalogOwner, acks, closed, live)

	// (a) The others take the queue over.
	took, attempts, err := failover(c, clients, own, url, l, cut)
	if err != nil {
		t.Fatalf("after the cut: %v\nload: %v", err, tr.Failed())
	}
	newOwner, served, _, err := mc.owner(queueName, part, time.Minute)
	if err != nil {
		t.Fatalf("the queue's owner among the other two after the cut: %v", err)
	}
	agreed := time.Since(cut)
	t.Logf("(a) a send through the other two was acknowledged %v after the cut (%d attempts); %s serves the queue from %v after the cut (its log), both name it the owner %v after the cut",
		took.Round(time.Millisecond), attempts, newOwner.name, served.Sub(cut).Round(time.Millisecond), agreed.Round(time.Millisecond))
	if st, err := newOwner.clusterStatus(); err != nil {
		t.Error(err)
	} else if st.Failovers <= majBefore[newOwner.name].Failovers {
		t.Errorf("%s took the queue over without counting a failover (%d before, %d now): its lease did not expire?", newOwner.name,
			majBefore[newOwner.name].Failovers, st.Failovers)
	}

	// The cut is real: nothing carries the node's routes, nothing routes
	// around the proxies, both sides keep dialling and are refused, the
	// others' JetStream stops hearing from it, its membership expires.
	checkCut(t, mc, rn, own, stream, cut)

	// (b), (c) during the cut: the probe's first send through the cut node
	// ends (a store write is retried for 15 s), and the node keeps failing
	// to renew its leases.
	isSend := func(k call) bool { return k.send }
	calls, err := pr.await(time.Minute, func(calls []call) bool { return slices.ContainsFunc(calls, isSend) })
	if err != nil {
		t.Fatalf("no send through the cut node ended: %v", err)
	}
	first := calls[slices.IndexFunc(calls, isSend)]
	var during clusterJSON
	if err := poll(30*time.Second, 200*time.Millisecond, func() (bool, error) {
		during, err = own.clusterStatus()
		return err == nil && during.RenewFailures > before.RenewFailures, err
	}); err != nil {
		t.Errorf("the cut node's unanswered lease renewals (%d before the cut): %v", before.RenewFailures, err)
	}
	renewed, err := own.metric("sluice_cluster_lease_renew_failures_total")
	if err != nil || renewed < float64(during.RenewFailures) {
		t.Errorf("the cut node's /metrics: sluice_cluster_lease_renew_failures_total %v (%v), want at least %d", renewed, err, during.RenewFailures)
	}
	t.Logf("(b) during the cut, %s's /api/cluster says: members %v, %s owned by %q, %d partitions owned, %d unanswered lease renewals (%d before; /metrics: %v); "+
		"its first probe send ended %v after the cut: %v",
		own.name, during.Members, queueName, during.Owners[queueName], during.Owned, during.RenewFailures, before.RenewFailures, renewed,
		first.end.Sub(cut).Round(time.Millisecond), first.outcome())

	// Once it finds every other node silent or gone, the cut node refuses
	// requests at once (ServiceUnavailable, nothing written): the heal
	// comes after such a refusal.
	refused := func(k call) bool {
		return k.send && k.err != nil && strings.HasPrefix(traffic.ErrKind(k.err), "ServiceUnavailable") && k.end.Sub(k.start) < 2*time.Second
	}
	calls, err = pr.await(time.Minute, func(calls []call) bool { return slices.ContainsFunc(calls, refused) })
	if err != nil {
		t.Fatalf("(b) the cut node does not refuse a send quickly: %v", err)
	}
	fast := calls[slices.IndexFunc(calls, refused)]
	t.Logf("(b) the cut node refused a send %v after the cut, in %v: %s", fast.end.Sub(cut).Round(time.Millisecond),
		fast.end.Sub(fast.start).Round(time.Millisecond), fast.err)
	tr.Slowest()
	failedBefore, _ := tr.Failed().Count()
	healOffs := map[*node]int64{}
	for _, n := range c.nodes {
		healOffs[n] = logSize(n)
	}
	heal := time.Now()
	rn.rejoin(own.name)
	t.Logf("healed %v after the cut", heal.Sub(cut).Round(time.Millisecond))

	// (d) It rejoins by itself: every node lists three members and names
	// the same owner of the queue as its log, every stream has three
	// current replicas, and it serves the queue again.
	newOwner, _, _, err = c.owner(queueName, part, time.Minute)
	if err != nil {
		t.Fatalf("after the heal, the nodes do not agree on the queue's owner: %v", err)
	}
	agree := time.Since(heal)
	if err := c.healthy(2 * time.Minute); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	healthy := time.Since(heal)
	if _, err := pr.await(time.Minute, func(calls []call) bool {
		return slices.ContainsFunc(calls, func(k call) bool { return k.send && k.err == nil && k.start.After(heal) })
	}); err != nil {
		t.Fatalf("no send through the node that was cut off is acknowledged after the heal: %v", err)
	}
	servesAgain := time.Since(heal)
	t.Logf("(d) after the heal: the nodes agree that %s owns the queue %v after it, the cluster is whole (three members everywhere, every stream's replicas current) %v after it; "+
		"a send through %s is acknowledged %v after it",
		newOwner.name, agree.Round(time.Millisecond), healthy.Round(time.Millisecond), own.name, servesAgain.Round(time.Millisecond))

	settle(t, l, time.Now(), l.Acks())
	send, receive := tr.Slowest()
	failedAfter, _ := tr.Failed().Count()

	// (b), (c) What the cut node's log says happened to its partition, from
	// the cut on, and what its /api/cluster said meanwhile.
	samples := sampler.stop()
	lines, err := logFrom(own, logOff)
	if err != nil {
		t.Fatal(err)
	}
	signs := findSigns(lines, part)
	var order []string
	for _, s := range signs {
		if !s.at.IsZero() {
			order = append(order, fmt.Sprintf("%s %s", s.name, since(s.at, cut, heal)))
		}
	}
	t.Logf("(c) %s's log from the cut on: %s", own.name, strings.Join(order, "; "))
	if signs.at("store fenced").IsZero() && signs.at("outcome unknown").IsZero() {
		t.Errorf("(c) the cut node's log has no write of partition %d refused by the stream's fence nor one whose outcome was unknown: its appends were not fenced", part)
	}
	if earliest(signs.at("stopped serving"), signs.at("forgot, fenced")).IsZero() {
		t.Errorf("(b) the cut node's log never says that it stopped serving partition %d", part)
	}
	// When its manager let the lease go: it forgot it (fenced), the bucket
	// refused its renewal, or it began to hand it over. Each is logged
	// once the manager no longer counts the lease as held; until it takes
	// it again (logged once it does), its status must not name it.
	left := earliest(earliest(signs.at("forgot, fenced"), signs.at("lease refused")), signs.at("handing over"))
	if left.IsZero() {
		t.Errorf("(b) the cut node's manager never let the lease of partition %d go", part)
	} else {
		back := signs.at("took lease")
		if back.Before(left) {
			back = time.Time{}
		}
		var saw []string
		checked := 0
		// A log line's time is cut to the millisecond: a sample sent in
		// the same millisecond may have been answered before the manager
		// let go.
		after := left.Add(time.Millisecond)
		for _, sm := range samples {
			if sm.err != nil || !sm.sent.After(after) || (!back.IsZero() && !sm.answered.Before(back)) {
				continue
			}
			checked++
			o := sm.st.Owners[queueName]
			if o == own.name {
				t.Errorf("(b) %s's /api/cluster names it the queue's owner %s (sent %s, answered %s), after its manager let the lease go (%s, logged %s)",
					own.name, since(sm.sent, cut, heal), sm.sent.Format(time.StampMicro), sm.answered.Format(time.StampMicro),
					since(left, cut, heal), left.Format(time.StampMilli))
				break
			}
			if len(saw) == 0 || !strings.HasSuffix(saw[len(saw)-1], fmt.Sprintf("%q", o)) {
				saw = append(saw, fmt.Sprintf("from %s: %q", since(sm.sent, cut, heal), o))
			}
		}
		again := "it did not take the queue again"
		if !back.IsZero() {
			again = "it took the queue again " + since(back, cut, heal)
		}
		t.Logf("(b) %s let the queue's lease go %s; its /api/cluster named as the queue's owner, in %d samples until %s: %s",
			own.name, since(left, cut, heal), checked, again, strings.Join(saw, ", "))
	}
	var said []string
	for _, sm := range samples {
		if sm.err == nil && sm.sent.Before(heal) && sm.sent.After(cut) {
			said = append(said, fmt.Sprintf("members %v, %d owned, %d unanswered renewals", sm.st.Members, sm.st.Owned, sm.st.RenewFailures))
		}
	}
	if len(said) > 0 {
		t.Logf("(b) during the cut, %s's /api/cluster said at first %s; at last %s", own.name, said[0], said[len(said)-1])
	}

	// (b) Nothing the cut node answered during the cut succeeded.
	var sends, failed, receives, empty int
	kinds := map[string]int{}
	for _, k := range pr.calls() {
		if !k.end.Before(heal) {
			continue
		}
		if k.send {
			sends++
		} else {
			receives++
		}
		switch {
		case k.send && k.err == nil:
			t.Errorf("(b) during the cut, the cut node acknowledged a send (%v after the cut)", k.end.Sub(cut).Round(time.Millisecond))
		case !k.send && k.got > 0:
			t.Errorf("(b) during the cut, the cut node delivered %d messages (%v after the cut)", k.got, k.end.Sub(cut).Round(time.Millisecond))
		case !k.send && k.err == nil:
			empty++
		default:
			failed++
			kinds[fmt.Sprintf("%s %s", map[bool]string{true: "send", false: "receive"}[k.send], traffic.ErrKind(k.err))]++
		}
	}
	t.Logf("(b) the probe's requests through %s that ended during the cut: %d sends, %d receives; %d failed (%v), %d receives answered empty",
		own.name, sends, receives, failed, kinds, empty)
	if sends == 0 {
		t.Errorf("(b) no send through the cut node ended during the cut")
	}

	t.Logf("after the heal: the slowest acknowledged send through the other two took %v, the slowest receive %v, %d requests or batch entries of the load failed; from the heal on, %s",
		send, receive, failedAfter-failedBefore, afterHeal(c.nodes, healOffs, part, heal))
	pr.stop()
	tr.Stop()
	v := finish(t, c, clients, url, l, tr)
	if v.Failed() {
		t.Errorf("(e) after the cut and the heal under load: %v", v)
	}
}

// earliest is the earlier of two times, zero counting as never.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// afterHeal says what the nodes' logs say from the heal on (offs: where
// each log was then): how many of their Raft groups' leaders stepped down
// for the higher terms the cut node brought back, how often a node took
// the queue's lease, and when an append to the queue's stream was fenced.
func afterHeal(nodes []*node, offs map[*node]int64, p int, heal time.Time) string {
	fenced := regexp.MustCompile(fmt.Sprintf(`msg="jsstore: fenced: another writer took the partition over".* partition=%d( |$)`, p))
	took := regexp.MustCompile(fmt.Sprintf(`msg="took a partition's lease".* partition=%d( |$)`, p))
	at := func(line string) string { return fmt.Sprintf("%.1fs", lineTime(line).Sub(heal).Seconds()) }
	var out []string
	for _, n := range nodes {
		lines, err := logFrom(n, offs[n])
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", n.name, err))
			continue
		}
		stepdowns := 0
		var fences, leases []string
		for _, line := range lines {
			switch {
			case strings.Contains(line, "Detected another leader with higher term, will stepdown"):
				stepdowns++
			case fenced.MatchString(line):
				fences = append(fences, at(line))
			case took.MatchString(line):
				leases = append(leases, at(line))
			}
		}
		s := fmt.Sprintf("%s: %d Raft leaders stepped down", n.name, stepdowns)
		if len(leases) > 0 {
			s += ", took the queue's lease at +" + strings.Join(leases, ", +")
		}
		if len(fences) > 0 {
			s += ", had an append fenced at +" + strings.Join(fences, ", +")
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// sample is what a node's /api/cluster said to a request sent at sent
// and answered at answered.
type sample struct {
	sent, answered time.Time
	st             clusterJSON
	err            error
}

// sampler asks a node for its /api/cluster every 100 ms.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	got    []sample
}

func startSampler(n *node) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			sent := time.Now()
			st, err := n.clusterStatus()
			s.got = append(s.got, sample{sent: sent, answered: time.Now(), st: st, err: err})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop stops the sampler and returns its samples.
func (s *sampler) stop() []sample {
	s.cancel()
	<-s.done
	return s.got
}

// settleHold is how long a node that claimed a new queue's partition
// keeps it before it hands it over to the partition's preferred node
// (cluster.Config.Settle's default), and some.
const settleHold = 10*time.Second + 3*time.Second

// placedOwner waits until the queue (partition p) is where placement
// wants it: the node that created it claimed it, and hands it over to its
// preferred node after a while, which would muddle a cut that comes at
// that moment. Either the owner changed (a hand-over goes to the preferred
// node), or the first one kept it longer than it would have (it is the
// preferred node).
func placedOwner(t *testing.T, c *cluster, p int) *node {
	t.Helper()
	first, since, _, err := c.owner(queueName, p, time.Minute)
	if err != nil {
		t.Fatalf("the queue's owner: %v", err)
	}
	var own *node
	err = poll(time.Minute, 200*time.Millisecond, func() (bool, error) {
		var at time.Time
		own, at, _, err = c.owner(queueName, p, 30*time.Second)
		if err != nil {
			return false, err
		}
		if own != first || !at.Equal(since) {
			return true, nil
		}
		return time.Since(since) > settleHold, fmt.Errorf("%s has owned the queue for %v", own.name, time.Since(since).Round(time.Millisecond))
	})
	if err != nil {
		t.Fatalf("the queue's owner: %v", err)
	}
	if own != first {
		t.Logf("%s, which created the queue, handed it over to %s", first.name, own.name)
	}
	return own
}

// checkCut checks that the cut of own cuts: the proxies carry none of its
// routes, no route bypasses them, both sides' dials are refused, the
// others' JetStream has not heard from it for a while and their lease
// bucket no longer lists it.
func checkCut(t *testing.T, mc *cluster, rn *routeNet, own *node, stream string, cut time.Time) {
	t.Helper()
	var live int
	var from, to int64
	err := poll(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		live, from, to = rn.carried(own.name)
		if live > 0 || from == 0 || to == 0 {
			return false, fmt.Errorf("the proxies of %s carry %d connections and refused %d of its dials and %d to it", own.name, live, from, to)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the cut does not cut: %v", err)
	}
	if err := allProxied(rn, own.name); err != nil {
		t.Fatalf("the cut does not cut: %v", err)
	}
	var members time.Duration
	err = poll(time.Minute, 100*time.Millisecond, func() (bool, error) {
		for _, n := range mc.nodes {
			st, err := n.clusterStatus()
			if err != nil {
				return false, err
			}
			if slices.Contains(st.Members, own.name) {
				return false, fmt.Errorf("%s still lists %s as a member: %v", n.name, own.name, st.Members)
			}
		}
		members = time.Since(cut)
		return true, nil
	})
	if err != nil {
		t.Fatalf("the cut does not cut: %v", err)
	}
	// The stream's leader (among the two) tracks when it last heard from
	// each replica; Raft heartbeats come every second.
	var seen string
	err = poll(time.Minute, 200*time.Millisecond, func() (bool, error) {
		return seen != "", mc.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			ci := s.CachedInfo().Cluster
			if ci == nil || ci.Leader == "" || ci.Leader == own.name {
				return fmt.Errorf("stream %s: leader %v", stream, ci)
			}
			for _, r := range ci.Replicas {
				if r.Name == own.name && (r.Offline || !r.Current || r.Active >= 3*time.Second) {
					heard := "not since it leads"
					if r.Active > 0 {
						heard = r.Active.Round(time.Millisecond).String() + " ago"
					}
					seen = fmt.Sprintf("%s leads stream %s, and its replica on %s is not current (offline %v; last heard from: %s)",
						ci.Leader, stream, own.name, r.Offline, heard)
					return nil
				}
			}
			return fmt.Errorf("stream %s: %s hears from %s", stream, ci.Leader, own.name)
		})
	})
	if err != nil {
		t.Fatalf("the cut does not cut: %v", err)
	}
	t.Logf("the cut cuts: no connection carries %s's routes (%d of its dials and %d to it refused), none bypasses the proxies; "+
		"the others dropped it from their members %v after the cut; %s",
		own.name, from, to, members.Round(time.Millisecond), seen)
}

// allProxied checks, where the machine's TCP table can be read, that
// every connection a route listener accepted comes from a proxy, and that
// node isolated ("" for none) has none.
func allProxied(rn *routeNet, isolated string) error {
	return poll(10*time.Second, 100*time.Millisecond, func() (bool, error) {
		accepted, direct, ok := rn.routeConns()
		switch {
		case !ok:
			return true, nil // not Linux: the proxies' counts have to do
		case len(direct) > 0:
			return false, errors.New(strings.Join(direct, "; "))
		case accepted[isolated] > 0:
			return false, fmt.Errorf("%s's route listener has %d connections", isolated, accepted[isolated])
		case len(accepted) == 0:
			return false, errors.New("no route listener has a connection")
		}
		return true, nil
	})
}

// startProxiedCluster starts three nodes whose routes go through a
// routeNet, and waits until they serve and agree.
func startProxiedCluster(t *testing.T) (*cluster, *routeNet) {
	t.Helper()
	var rn *routeNet
	c := startWired(t, func(names, routes []string) (peers, extra func(int) []string) {
		var err error
		if rn, err = newRouteNet(names, routes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rn.close) // after the nodes are killed
		return func(i int) []string { return rn.peers(names[i], routes[i]) },
			func(i int) []string { return []string{"--cluster-advertise", rn.advertised(names[i])} }
	})
	return c, rn
}

// metric reads a metric without labels from n's /metrics.
func (n *node) metric(name string) (float64, error) {
	hc := &http.Client{Transport: n.tr, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + n.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: /metrics has no %s", n.name, name)
}

// call is one request of a probe's.
type call struct {
	send       bool // a SendMessage; else a ReceiveMessage (and its deletes)
	start, end time.Time
	err        error
	got        int // messages received
}

func (k call) outcome() string {
	switch {
	case k.err != nil:
		return "failed: " + traffic.ErrKind(k.err)
	case k.send:
		return "acknowledged"
	}
	return fmt.Sprintf("%d messages", k.got)
}

// probe sends one message at a time, and receives at most ten at a time,
// through one node, and keeps what each request got.
type probe struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	log []call
}

func startProbe(cl *sqs.Client, url string, l *ledger.Ledger) *probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{cancel: cancel}
	failed := traffic.NewFailures()
	run := func(send bool) {
		for ctx.Err() == nil {
			// The SDK client's own timeout is 45 s: a forwarded request
			// waits for an owner up to 30 s.
			rctx, rcancel := context.WithTimeout(ctx, 40*time.Second)
			k := call{send: send, start: time.Now()}
			if send {
				k.err = traffic.SendOne(rctx, cl, url, l)
			} else {
				k.got, k.err = traffic.Consume(rctx, cl, url, l, loadVis, leave, failed)
			}
			rcancel()
			k.end = time.Now()
			if ctx.Err() != nil {
				return // stopped: the request was cut short
			}
			p.mu.Lock()
			p.log = append(p.log, k)
			p.mu.Unlock()
			traffic.Backoff(ctx)
		}
	}
	p.wg.Go(func() { run(true) })
	p.wg.Go(func() { run(false) })
	return p
}

func (p *probe) calls() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// await waits until cond holds for the calls so far, and returns them.
func (p *probe) await(timeout time.Duration, cond func([]call) bool) ([]call, error) {
	var calls []call
	err := poll(timeout, 50*time.Millisecond, func() (bool, error) {
		calls = p.calls()
		return cond(calls), fmt.Errorf("%d requests ended", len(calls))
	})
	return calls, err
}

func (p *probe) stop() {
	p.cancel()
	p.wg.Wait()
}

// logSize is how long n's log file is now.
func logSize(n *node) int64 {
	fi, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logFrom returns the lines of n's log file from byte offset off on.
func logFrom(n *node, off int64) ([]string, error) {
	f, err := os.Open(n.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(raw), "\n"), nil
}

// sign is a line of a cut node's log about its partition: when it first
// came (zero: never).
type sign struct {
	name string
	re   *regexp.Regexp
	at   time.Time
}

type signs []sign

func (ss signs) at(name string) time.Time {
	for _, s := range ss {
		if s.name == name {
			return s.at
		}
	}
	return time.Time{}
}

// findSigns finds in lines the first of each line that says what became
// of partition p on a node cut off, in the order they came.
func findSigns(lines []string, p int) signs {
	part := fmt.Sprintf(` partition=%d( |$)`, p)
	key := fmt.Sprintf(` key=part\.%d( |$)`, p)
	ss := signs{
		{name: "renewals unanswered", re: regexp.MustCompile(`msg="renewing a lease failed; retrying".*` + key)},
		{name: "lease may have expired", re: regexp.MustCompile(`msg="a lease may have expired: its renewals fail; serving on until fenced".*` + key)},
		{name: "write failed", re: regexp.MustCompile(`msg="jsstore: write failed".*` + part)},
		{name: "outcome unknown", re: regexp.MustCompile(`msg="jsstore: a write's outcome is unknown; the partition must be taken over again".*` + part)},
		{name: "store fenced", re: regexp.MustCompile(`msg="jsstore: fenced: another writer took the partition over".*` + part)},
		{name: "lease refused", re: regexp.MustCompile(`msg="lost a lease: another node holds it, or it expired".*` + key)},
		{name: "forgot, fenced", re: regexp.MustCompile(`msg="forgot a partition: another node fenced its owner here".*` + part)},
		{name: "stopped serving", re: regexp.MustCompile(`msg="stopped owning a queue's partition".*` + part)},
		{name: "handing over", re: regexp.MustCompile(`msg="giving a partition up".*` + part)},
		{name: "rejoined", re: regexp.MustCompile(`msg="joined the cluster again"`)},
		{name: "took lease", re: regexp.MustCompile(`msg="took a partition's lease".*` + part)},
	}
	for _, line := range lines {
		for i := range ss {
			if ss[i].at.IsZero() && ss[i].re.MatchString(line) {
				ss[i].at = lineTime(line)
			}
		}
	}
	slices.SortStableFunc(ss, func(a, b sign) int {
		switch {
		case a.at.IsZero() && b.at.IsZero():
			return 0
		case a.at.IsZero():
			return 1
		case b.at.IsZero():
			return -1
		}
		return a.at.Compare(b.at)
	})
	return ss
}

var timeAttr = regexp.MustCompile(`^time=(\S+)`)

// lineTime is when a log line was written; a line without a time counts
// as written now (never zero: found).
func lineTime(line string) time.Time {
	if m := timeAttr.FindStringSubmatch(line); m != nil {
		if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			return t
		}
	}
	return time.Now()
}

// since says when t was, from the cut or from the heal.
func since(t, cut, heal time.Time) string {
	if t.Before(heal) {
		return fmt.Sprintf("%.1fs after the cut", t.Sub(cut).Seconds())
	}
	return fmt.Sprintf("%.1fs after the heal", t.Sub(heal).Seconds())
}
