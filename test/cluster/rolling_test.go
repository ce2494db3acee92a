package cluster

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/test/process"
)

// TestClusterRollingRestart runs load through all three nodes with SDK
// clients that retry as applications do (the standard retryer), and
// restarts each node in turn, as a rolling upgrade does: SIGTERM (it must
// exit 0), start it again on its data directory, and wait until the
// cluster is whole before the next. Nothing acknowledged may be lost, no
// acknowledged delete may come back, no receive count may go backwards;
// the errors the clients saw are counted and logged (a retried send may
// leave a body twice in the queue: each copy is a message of its own).
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes and restarts them")
	}
	c := startCluster(t)
	url := c.createQueue(0, queueName, queueAttributes)
	part, stream := c.queuePartition()
	l := newLedger(true)
	clients := []*sqs.Client{c.client(0, true), c.client(1, true), c.client(2, true)}
	tr := startTraffic(c, l, url, clients)
	defer tr.Stop()
	settle(t, l, time.Now(), 0)

	for i, n := range c.nodes {
		own, _, _, err := c.owner(queueName, part, time.Minute)
		if err != nil {
			t.Fatalf("restart %d: the queue's owner: %v", i+1, err)
		}
		leader, err := c.streamLeader(stream)
		if err != nil {
			t.Fatalf("restart %d: the leader of stream %s: %v", i+1, stream, err)
		}
		all, toServing := tr.Failed().Count()
		acks := l.Acks()
		tr.Slowest()
		took, err := n.stop(process.Term)
		if err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		serving, healthy, err := c.restart(n)
		if err != nil {
			t.Fatalf("restart %d: starting %s again: %v", i+1, n.name, err)
		}
		newOwner, _, _, err := c.owner(queueName, part, time.Minute)
		if err != nil {
			t.Fatalf("restart %d: the queue's owner after it: %v", i+1, err)
		}
		settle(t, l, time.Now(), l.Acks())
		all2, toServing2 := tr.Failed().Count()
		send, receive := tr.Slowest()
		t.Logf("restart %d: SIGTERM of %s (the queue's owner was %s, its stream's leader %s) after %d acknowledged sends: exited in %v, serves %v after exec, "+
			"the cluster is whole %v after exec, %s owns the queue; %d client errors meanwhile, %d of them from nodes that served; "+
			"the slowest acknowledged send took %v, the slowest receive %v",
			i+1, n.name, own.name, leader, acks, took.Round(time.Millisecond), serving.Round(time.Millisecond), healthy.Round(time.Millisecond),
			newOwner.name, all2-all, toServing2-toServing, send, receive)
	}

	tr.Stop()
	v := finish(t, c, clients, url, l, tr)
	if v.Failed() {
		t.Errorf("after a rolling restart under load: %v", v)
	}
}
