// Package cluster checks, from the outside, what a three-node Sluice
// cluster promises when its nodes die and restart: it runs three real
// `sluice serve --cluster` processes on loopback ports, drives them with
// AWS SDK clients spread over the nodes, SIGKILLs or SIGTERMs a node
// under load and starts it again on the same data directory and ports,
// and compares what comes back with what the nodes acknowledged.
//
// It reaches the nodes only through what an operator has: the SQS port,
// the admin API (/healthz, /api/cluster), each node's log, and the
// embedded NATS server's client port (--nats-addr, with the token
// SLUICE_NATS_TOKEN gives it), where JetStream says which node leads a
// stream.
package cluster

import (
	"flag"
	"testing"

	"github.com/sluicemq/sluice/test/testkit"
)

var (
	kills = flag.Int("cluster.kills", 2, "TestClusterKillOwner: SIGKILLs, each followed by a restart; odd ones kill the queue's owner, "+
		"even ones its stream's JetStream leader (the issue's run: 10, about 3 minutes; give go test a -timeout above 10m for more)")
	load   = flag.Int("cluster.load", 200, "messages a second the senders send, over all of them (0: as fast as they go)")
	logDir = flag.String("cluster.log-dir", "", "keep every node's full log in this directory (default: a temp dir, "+
		"removed; a failed test prints each node's last lines)")
)

// TestMain builds the real binary once (not for -short, which skips
// every test), runs the tests against it, and fails them if any goroutine
// outlives them.
func TestMain(m *testing.M) {
	flag.Parse()
	testkit.Main(m, "sluice-cluster-", !testing.Short(), &bin)
}

// bin is the `sluice` binary TestMain built, set before any test runs and
// never changed.
var bin string
