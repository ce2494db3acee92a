package broker

import (
	"context"
	"net/http"

	"github.com/sluicemq/sluice/internal/forward"
)

// Crash stops a broker as a crash of its process would, for tests: a
// cluster node's NATS server and connection go first, so that it writes
// nothing more and its leases expire (nothing is handed over), then the
// rest of it stops, the engine before the move tasks' runners (which
// would write their progress); last, the data directory's lock goes, as
// the process's death releases it.
func Crash(b *Broker) {
	if b.cl != nil {
		b.cl.closeNATS()
		b.cl.live.Close()
		if m := b.cl.m.Load(); m != nil {
			m.Abandon()
		}
	}
	_ = b.e.Close()
	b.tools.StopAll()
	b.lock.Close()
}

// SnapshotQueue renews one queue's snapshot, for tests: it waits for
// every write of the queue under way first (those the broker made on its
// own included), so that they meet the file system as it is now.
func SnapshotQueue(b *Broker, name string) error {
	o, err := b.e.Queue(name)
	if err != nil {
		return err
	}
	return o.Snapshot()
}

// ForwardsInFlight is how many requests other nodes forwarded to b are
// being served, for tests.
func ForwardsInFlight(b *Broker) int64 {
	b.cl.mu.Lock()
	defer b.cl.mu.Unlock()
	var n int64
	for _, s := range b.cl.fronts {
		n += s.Metrics().InFlight
	}
	return n
}

// ForwardToNode forwards r on node's front (service "sqs" or "admin") for
// queue's partition, whoever owns it: as a node whose view of the leases
// is behind would, for tests.
func ForwardToNode(ctx context.Context, b *Broker, node, queue, service string, r *http.Request, body []byte) (*forward.Response, error) {
	p, _, err := b.e.Route(queue)
	if err != nil {
		return nil, err
	}
	return forward.Do(ctx, b.cl.nc, b.cl.partitionSubject(node, service, p), r, body)
}
