package cluster

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/testkit"
	"github.com/sluicemq/sluice/test/traffic"
)

// bodies are the test's message bodies: 200 bytes, tagged 'c'.
var bodies = testkit.Bodies{Size: 200, Tag: 'c'}

// newLedger is the tests' ledger. Clients that retry (copies) may send a
// body twice, as two messages: each is a message of its own; clients that
// do not must never see a body under two MessageIds. Every receive counts
// (ApproximateReceiveCount must never go backwards), and a receive may
// take a message an earlier receive's visibility timeout still holds: the
// tests count those (Early) and take a delete they raced as unsure.
func newLedger(copies bool) *ledger.Ledger {
	return ledger.New(ledger.Config{Bodies: bodies, Copies: copies, Counts: true, Early: true})
}

// The load both tests run.
const (
	senders   = 6 // two a node
	receivers = 3 // one a node
	// loadVis is the receivers' visibility timeout: short, so that the
	// messages they leave come back, with a higher receive count, within
	// a round.
	loadVis = 3 * time.Second
	// A receiver leaves every keepEvery-th body to time out until its
	// receive count reaches keepUntil, and deletes the others at once.
	keepEvery = 4
	keepUntil = 3
)

// startTraffic starts the load on the queue at url through clients (one
// a node), -cluster.load messages a second: senders and receivers, each
// through one node's SDK client, moving to another node while theirs is
// down (as behind a load balancer).
func startTraffic(c *cluster, l *ledger.Ledger, url string, clients []*sqs.Client) *traffic.Load {
	return traffic.Start(context.Background(), url, l, traffic.Config{
		Senders: senders, Receivers: receivers, Rate: float64(*load), Vis: loadVis, Leave: leave,
		Route: func(i int) (traffic.Route, bool) {
			n, ok := c.pick(i)
			if !ok {
				return traffic.Route{}, false
			}
			downs := c.nodes[n].downs.Load()
			return traffic.Route{Client: clients[n], Down: func() bool { return c.nodes[n].downs.Load() != downs }}, true
		},
	})
}

// leave says whether a receiver leaves a message to time out instead of
// deleting it.
func leave(m traffic.Received) bool { return m.ID%keepEvery == 0 && m.Count < keepUntil }

// pick is the node worker i sends through: its own (i mod 3), or the
// next one that serves while its own is down.
func (c *cluster) pick(i int) (int, bool) {
	for k := range len(c.nodes) {
		n := (i + k) % len(c.nodes)
		if c.nodes[n].serving.Load() {
			return n, true
		}
	}
	return 0, false
}

// drainAll receives everything in the queue through every node that
// serves, deleting what it receives, and checks it against l (see
// traffic.Drain).
func drainAll(ctx context.Context, c *cluster, clients []*sqs.Client, url string, l *ledger.Ledger, quietAfter time.Time) *traffic.Failures {
	var serving []*sqs.Client
	for i, n := range c.nodes {
		if n.serving.Load() {
			serving = append(serving, clients[i])
		}
	}
	return traffic.Drain(ctx, serving, url, l, quietAfter)
}
