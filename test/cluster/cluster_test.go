package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/testkit"
)

// cluster is three nodes of one Sluice cluster on loopback ports.
type cluster struct {
	t     *testing.T
	name  string // the cluster's name, and its streams' prefix
	token string // every node's NATS client token (SLUICE_NATS_TOKEN)
	nodes []*node

	mu  sync.Mutex
	trs []*http.Transport // the SDK clients', closed at cleanup
}

// startCluster starts three nodes together and waits until each serves
// and the cluster is healthy (healthy).
func startCluster(t *testing.T) *cluster { return startWired(t, nil) }

// wiring gives each node (by index) the route addresses its --peers
// lists and further flags, from the nodes' names and route addresses.
type wiring func(names, routes []string) (peers, extra func(i int) []string)

// startWired is startCluster with the routes wired by wire (nil: every
// node's --peers lists every node's route address).
func startWired(t *testing.T, wire wiring) *cluster {
	t.Helper()
	// A port found free may be taken by another test's process before a
	// node binds it: start again on other ports.
	for attempt := 1; ; attempt++ {
		c, err := tryWired(t, wire)
		if err == nil {
			return c
		}
		if attempt == 3 || !c.portTaken() {
			t.Fatal(err)
		}
		t.Logf("starting the cluster again on other ports: %v", err)
		for _, n := range c.nodes {
			n.kill()
		}
	}
}

// portTaken reports whether a node's log says that an address it was to
// listen on was in use.
func (c *cluster) portTaken() bool {
	for _, n := range c.nodes {
		if log, err := os.ReadFile(n.logPath); err == nil && strings.Contains(string(log), "address already in use") {
			return true
		}
	}
	return false
}

// tryWired is one try of startWired: an error when a node does not serve.
func tryWired(t *testing.T, wire wiring) (*cluster, error) {
	t.Helper()
	ports, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	c := &cluster{t: t, name: "t" + strings.ToLower(rand.Text()[:8]), token: rand.Text()}
	var names, routes []string
	for i := range 3 {
		names, routes = append(names, fmt.Sprintf("n%d", i+1)), append(routes, addr(4*i+2))
	}
	peers, extra := func(int) []string { return routes }, func(int) []string { return nil }
	if wire != nil {
		peers, extra = wire(names, routes)
	}
	dir := t.TempDir()
	for i, name := range names {
		n := &node{name: name, dir: filepath.Join(dir, name),
			sqs: addr(4 * i), admin: addr(4*i + 1), route: routes[i], nats: addr(4*i + 3),
			tr:  &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
			env: []string{"SLUICE_NATS_TOKEN=" + c.token}} // as an operator would: a flag shows in ps
		if n.logPath, err = logFile(dir, t.Name(), n.name); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.logPath, nil, 0o644); err != nil { // a log kept from an earlier run
			t.Fatal(err)
		}
		n.args = append([]string{"serve", "--cluster", c.name, "--node", n.name, "--peers", strings.Join(peers(i), ","),
			"--cluster-addr", n.route, "--sqs-addr", n.sqs, "--admin-addr", n.admin, "--nats-addr", n.nats,
			"--data-dir", n.dir, "--log-level", "info"}, extra(i)...)
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(func() {
		var tails []string
		if t.Failed() { // before the kills, which let the processes' tails go
			for _, n := range c.nodes {
				tails = append(tails, fmt.Sprintf("---- %s (full log: %s): %v\n%s", n.name, n.logPath, n.figures(), n.tails()))
			}
		}
		for _, n := range c.nodes {
			n.kill()
		}
		c.mu.Lock()
		for _, tr := range c.trs {
			tr.CloseIdleConnections()
		}
		c.mu.Unlock()
		for _, tail := range tails {
			t.Log(tail)
		}
	})
	begin := time.Now()
	procs := make([]*process.Process, 3)
	for i, n := range c.nodes {
		if procs[i], err = n.start(); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.awaitServing(procs[i], startTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := c.healthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s: three nodes serve and agree %v after exec", c.name, time.Since(begin).Round(time.Millisecond))
	if err := c.natsRefusesStrangers(); err != nil {
		t.Fatal(err)
	}
	return c, nil
}

// natsRefusesStrangers checks that every node's NATS client port (which
// serves every stream) refuses a client without the cluster's token, or
// with another one.
func (c *cluster) natsRefusesStrangers() error {
	for _, n := range c.nodes {
		for _, opts := range [][]nats.Option{nil, {nats.Token("not-" + c.token)}} {
			nc, err := nats.Connect("nats://"+n.nats, append(opts, nats.Timeout(5*time.Second), nats.NoReconnect())...)
			if err == nil {
				nc.Close()
				return fmt.Errorf("%s: a NATS client without the token (none, or another) connected to %s", n.name, n.nats)
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				return fmt.Errorf("%s: a NATS client without the token (none, or another): %v, want %v", n.name, err, nats.ErrAuthorization)
			}
		}
	}
	return nil
}

// freePorts returns n loopback ports that were free a moment ago (each
// node binds the same ones at every start, so that its peers find it).
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// restart starts n again after a stop and waits until it serves and the
// cluster is healthy again. It returns how long each took.
func (c *cluster) restart(n *node) (serving, healthy time.Duration, err error) {
	begin := time.Now()
	p, err := n.start()
	if err != nil {
		return 0, 0, err
	}
	if err := n.awaitServing(p, startTimeout); err != nil {
		return 0, 0, err
	}
	serving = time.Since(begin)
	if err := c.healthy(2 * time.Minute); err != nil {
		return serving, 0, err
	}
	if err := c.answers(n, queueName); err != nil {
		return serving, 0, err
	}
	return serving, time.Since(begin), nil
}

// answers waits until n's SQS port answers a GetQueueUrl of queue.
func (c *cluster) answers(n *node, queue string) error {
	cl := c.client(slices.Index(c.nodes, n), false)
	return poll(time.Minute, 100*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
		if err != nil {
			return false, fmt.Errorf("%s: GetQueueUrl %s: %w", n.name, queue, err)
		}
		return true, nil
	})
}

// client is an SDK client of node i. With retry it uses the SDK's
// standard retryer (3 attempts, backoff, a retry quota), as every
// application does; without, one attempt a request: a request the
// cluster did not answer is unknown (it may or may not have happened),
// never retried into something that looks acknowledged twice.
func (c *cluster) client(i int, retry bool) *sqs.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	c.mu.Lock()
	c.trs = append(c.trs, tr)
	c.mu.Unlock()
	o := sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + c.nodes[i].sqs),
		Credentials: credentials.NewStaticCredentialsProvider("cluster", "cluster", ""),
		// A forwarded request waits up to 30 s for the owner.
		HTTPClient: &http.Client{Transport: testkit.BufferedBodies{Next: tr}, Timeout: 45 * time.Second}}
	if !retry {
		o.RetryMaxAttempts = 1
	}
	return sqs.New(o)
}

// createQueue creates queue name through node i with attributes, retrying
// while the new cluster cannot place a stream yet, and returns its URL.
func (c *cluster) createQueue(i int, name string, attrs map[string]string) string {
	c.t.Helper()
	cl := c.client(i, false)
	var url string
	err := poll(time.Minute, 100*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := cl.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return false, err
		}
		url = aws.ToString(out.QueueUrl)
		return true, nil
	})
	if err != nil {
		c.t.Fatalf("creating queue %s: %v", name, err)
	}
	for _, n := range c.nodes {
		if err := c.answers(n, name); err != nil {
			c.t.Fatal(err)
		}
	}
	return url
}

// clusterJSON is what a node's GET /api/cluster says, with its counters.
type clusterJSON struct {
	Node          string            `json:"node"`
	Members       []string          `json:"members"`
	CatalogOwner  string            `json:"catalog_owner"`
	Owners        map[string]string `json:"owners"`
	Owned         int               `json:"owned"`
	Failovers     uint64            `json:"failovers"`
	RenewFailures uint64            `json:"lease_renew_failures"`
}

// clusterStatus asks n for the cluster as it sees it.
func (n *node) clusterStatus() (clusterJSON, error) {
	var cs clusterJSON
	hc := &http.Client{Transport: n.tr, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + n.admin + "/api/cluster")
	if err != nil {
		return cs, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return cs, err
	}
	if resp.StatusCode != http.StatusOK {
		return cs, fmt.Errorf("%s: /api/cluster answered %s: %s", n.name, resp.Status, raw)
	}
	return cs, json.Unmarshal(raw, &cs)
}

// owner waits until one node owns queue (its partition is p): its log
// says it serves p, no other node's does, and every node that serves
// names it as the owner in /api/cluster (the lease bucket as it sees it).
// It returns the node, when its log said it serves, and the last
// disagreement it waited out ("" if none).
func (c *cluster) owner(queue string, p int, timeout time.Duration) (own *node, since time.Time, waited string, err error) {
	err = poll(timeout, 50*time.Millisecond, func() (bool, error) {
		var serving []*node
		for _, n := range c.nodes {
			if t, ok := n.serves(p); ok {
				serving = append(serving, n)
				since = t
			}
		}
		if len(serving) != 1 {
			return false, fmt.Errorf("%d nodes' logs say they serve partition %d", len(serving), p)
		}
		for _, n := range c.nodes {
			if !n.serving.Load() {
				continue
			}
			cs, err := n.clusterStatus()
			if err != nil {
				return false, err
			}
			if cs.Owners[queue] != serving[0].name {
				waited = fmt.Sprintf("%s serves partition %d, but %s's /api/cluster says %q owns %s", serving[0].name, p, n.name, cs.Owners[queue], queue)
				return false, errors.New(waited)
			}
		}
		own = serving[0]
		return true, nil
	})
	return own, since, waited, err
}

// jetStream runs f against JetStream through the serving nodes' NATS
// client ports.
func (c *cluster) jetStream(f func(ctx context.Context, js jetstream.JetStream) error) error {
	var urls []string
	for _, n := range c.nodes {
		if n.serving.Load() {
			urls = append(urls, "nats://"+n.nats)
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Token(c.token), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f(ctx, js)
}

// leaseTimes is what polling a partition's lease in the lease bucket
// saw after its holder was killed: when the holder last renewed it (the
// server's timestamp), when the key was first found gone (expired), and
// when another node's lease was first found on it (zero: not seen); and
// how many of the reads the stream's leader answered got another answer
// from a direct get (which any replica answers).
type leaseTimes struct {
	renewed, gone, taken time.Time
	takenBy              string
	reads, disagreed     int
	disagreement         string // the first
	err                  error
}

// watchLease polls the lease of partition p (key part.<p> in bucket
// <cluster>-leases, docs/cluster.md) every 50 ms through the NATS ports of
// the nodes but holder, until another node holds it or ctx ends, and
// sends what it saw. It reads the stream's last message for the key from
// the stream's leader, not through a watcher (a consumer, which a dead
// stream leader may take with it), and compares each read with a KV Get
// (a direct get, which any replica may answer).
func (c *cluster) watchLease(ctx context.Context, p int, holder *node) <-chan leaseTimes {
	var urls []string
	for _, n := range c.nodes {
		if n != holder && n.serving.Load() {
			urls = append(urls, "nats://"+n.nats)
		}
	}
	out := make(chan leaseTimes, 1)
	go func() {
		var lt leaseTimes
		defer func() { out <- lt }()
		nc, err := nats.Connect(strings.Join(urls, ","), nats.Token(c.token), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
		if err != nil {
			lt.err = err
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			lt.err = err
			return
		}
		bucket, key := c.name+"-leases", "part."+strconv.Itoa(p)
		var (
			st jetstream.Stream
			kv jetstream.KeyValue
		)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for ; ctx.Err() == nil; <-tick.C {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if st == nil {
				st, err = js.Stream(actx, "KV_"+bucket)
			}
			if kv == nil && err == nil {
				kv, err = js.KeyValue(actx, bucket)
			}
			var m *jetstream.RawStreamMsg
			if err == nil {
				m, err = st.GetLastMsgForSubject(actx, "$KV."+bucket+"."+key)
			}
			var direct string
			if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
				e, derr := kv.Get(actx, key)
				switch {
				case derr == nil:
					direct = string(e.Value())
				case !errors.Is(derr, jetstream.ErrKeyNotFound):
					direct = "error: " + derr.Error()
				}
			}
			cancel()
			now := time.Now()
			var value string
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
			case err != nil:
				lt.err = err // the bucket is between leaders: try again
				continue
			case m.Header.Get("KV-Operation") == "" && m.Header.Get("Nats-Marker-Reason") == "":
				value = string(m.Data)
			}
			lt.reads++
			if direct != value {
				lt.disagreed++
				if lt.disagreement == "" {
					lt.disagreement = fmt.Sprintf("at %s the leader had %q, a direct get answered %q", now.Format("15:04:05.000"), value, direct)
				}
			}
			if value == "" {
				if lt.gone.IsZero() {
					lt.gone = now
				}
				continue
			}
			var h struct {
				Node string `json:"node"`
			}
			if json.Unmarshal([]byte(value), &h) != nil || h.Node == holder.name {
				lt.renewed = m.Time
				continue
			}
			lt.taken, lt.takenBy, lt.err = now, h.Node, nil
			return
		}
	}()
	return out
}

// consumerHosts counts the consumers of the lease bucket's stream (the
// nodes' lease watchers, R1 ordered consumers) by the node that hosts
// each.
func (c *cluster) consumerHosts() (map[string]int, error) {
	hosts := map[string]int{}
	err := c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
		st, err := js.Stream(ctx, "KV_"+c.name+"-leases")
		if err != nil {
			return err
		}
		l := st.ListConsumers(ctx)
		for ci := range l.Info() {
			host := "?"
			if ci.Cluster != nil && ci.Cluster.Leader != "" {
				host = ci.Cluster.Leader
			}
			hosts[host]++
		}
		return l.Err()
	})
	return hosts, err
}

// streams is the cluster's JetStream streams.
func (c *cluster) streams() ([]*jetstream.StreamInfo, error) {
	var out []*jetstream.StreamInfo
	err := c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
		l := js.ListStreams(ctx)
		for si := range l.Info() {
			out = append(out, si)
		}
		return l.Err()
	})
	return out, err
}

// queuePartition is the partition of the cluster's one queue: the one
// stream <cluster>_P<n> that is not the catalog's (P0).
func (c *cluster) queuePartition() (p int, stream string) {
	c.t.Helper()
	err := poll(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		sis, err := c.streams()
		if err != nil {
			return false, err
		}
		var found []string
		for _, si := range sis {
			if rest, ok := strings.CutPrefix(si.Config.Name, c.name+"_P"); ok && rest != "0" {
				found = append(found, si.Config.Name)
			}
		}
		if len(found) != 1 {
			return false, fmt.Errorf("streams of queues: %v, want one", found)
		}
		stream = found[0]
		p, err = strconv.Atoi(strings.TrimPrefix(stream, c.name+"_P"))
		return err == nil, err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return p, stream
}

// streamLeader is the node that leads stream's Raft group now.
func (c *cluster) streamLeader(stream string) (string, error) {
	var leader string
	err := poll(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		err := c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			ci := s.CachedInfo().Cluster
			if ci == nil || ci.Leader == "" {
				return fmt.Errorf("stream %s has no leader", stream)
			}
			leader = ci.Leader
			return nil
		})
		return err == nil, err
	})
	return leader, err
}

// healthy waits until every node serves, each lists the three as
// members, and every stream (the queues', the catalog's, the lease
// bucket's) has a leader and two current replicas: a node that was down
// has caught up, so that killing another one next leaves a quorum that
// has everything.
func (c *cluster) healthy(timeout time.Duration) error {
	return poll(timeout, 200*time.Millisecond, func() (bool, error) {
		for _, n := range c.nodes {
			if !n.serving.Load() {
				return false, fmt.Errorf("%s does not serve", n.name)
			}
			cs, err := n.clusterStatus()
			if err != nil {
				return false, err
			}
			if len(cs.Members) != len(c.nodes) {
				return false, fmt.Errorf("%s sees members %v", n.name, cs.Members)
			}
		}
		sis, err := c.streams()
		if err != nil {
			return false, err
		}
		if len(sis) == 0 {
			return false, errors.New("no streams")
		}
		for _, si := range sis {
			ci := si.Cluster
			if ci == nil || ci.Leader == "" {
				return false, fmt.Errorf("stream %s has no leader", si.Config.Name)
			}
			if len(ci.Replicas) != len(c.nodes)-1 {
				return false, fmt.Errorf("stream %s has %d replicas besides its leader", si.Config.Name, len(ci.Replicas))
			}
			for _, r := range ci.Replicas {
				if !r.Current || r.Offline {
					return false, fmt.Errorf("stream %s: replica %s is not current (offline %v, lag %d)", si.Config.Name, r.Name, r.Offline, r.Lag)
				}
			}
		}
		return true, nil
	})
}

// poll calls cond every interval until it reports done, or until timeout,
// and then returns cond's last error (or a timeout).
func poll(timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := cond()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("condition not met")
			}
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		<-tick.C
	}
}
