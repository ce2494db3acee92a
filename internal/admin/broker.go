package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Broker is what the admin API asks of the server (internal/broker's
// Broker is one).
type Broker interface {
	Queues
	Topics
	Cluster
}

// Queues are the operator's views and tools on queues: figures, tenants,
// peeking, filtered purges and redrives, move tasks, watermarks.
type Queues interface {
	GetQueue(name string) (st.QueueInfo, error)
	QueueNameFromARN(arn string) (string, error)
	Stats() []st.QueueStats
	StoreStats() st.StoreStats
	Tenants(queue string, max int) ([]st.TenantInfo, error)
	Tenant(queue, tenant string) (st.TenantInfo, error)
	SetTenantLimits(ctx context.Context, queue, tenant string, l st.TenantLimits) error
	DropBefore(ctx context.Context, queue string, before time.Time, tenant string, allTenants bool) (int, error)
	Peek(queue string, f st.PeekFilter) ([]st.PeekedMessage, string, error)
	PurgeFiltered(ctx context.Context, queue string, f st.PeekFilter) (int, error)
	RedriveFiltered(ctx context.Context, queue string, f st.PeekFilter, dest string) (int, error)
	StartRedrive(ctx context.Context, queue string, f st.PeekFilter, dest string, rate int) (string, error)
	StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (taskHandle string, err error)
	ListMoveTasks(ctx context.Context, sourceArn string, max int) ([]st.MoveTask, error)
}

// Topics are the operator's views of topics and their deliveries.
type Topics interface {
	Topics() []string
	Topic(name string) (st.TopicInfo, error)
	AllTopics(ctx context.Context) []st.TopicInfo
	TopicFigures(name string) (topic.Figures, error)
	SubscriptionFirstAttempts() []engine.OriginAge
}

// Cluster is what the admin API asks of a cluster node (Clustered false:
// one node).
type Cluster interface {
	Clustered() bool
	ClusterStatus() *st.ClusterStatus
	ClusterStats(ctx context.Context) []st.QueueStats
	StreamLeaders(ctx context.Context) map[string]string
	Route(queue, service string) (string, error)
	RouteTopic(name, service string) (string, error)
	Forward(ctx context.Context, rt string, r *http.Request, body []byte, how forward.How) (*forward.Response, error)
}
