package sqs

import (
	"context"
	"net/http"

	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/sns"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Broker is what the SQS front asks of the server (internal/broker's
// Broker is one): the queue operations of the SQS API, routing in a
// cluster, and the topics the SNS requests on the same port reach.
type Broker interface {
	Queues
	Router
	sns.Topics
}

// Queues are the operations of the SQS API on queues and their messages.
type Queues interface {
	CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (st.QueueInfo, error)
	GetQueue(name string) (st.QueueInfo, error)
	ListQueues(prefix string, max int, nextToken string, allow func(name string) bool) ([]string, string, error)
	DeleteQueue(ctx context.Context, name string) error
	GetQueueAttributes(name string, names []string) (map[string]string, error)
	SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error
	Send(ctx context.Context, queue string, in st.SendInput) (st.SendResult, error)
	SendBatch(ctx context.Context, queue string, in []st.SendInput) (res []st.SendResult, errs []error, err error)
	Receive(ctx context.Context, queue string, in st.ReceiveInput) ([]st.Message, error)
	Delete(ctx context.Context, queue, receiptHandle string) error
	DeleteBatch(ctx context.Context, queue string, receiptHandles []string) (errs []error, err error)
	ChangeVisibility(ctx context.Context, queue, receiptHandle string, seconds int) error
	ChangeVisibilityBatch(ctx context.Context, queue string, in []st.VisibilityChange) (errs []error, err error)
	Purge(ctx context.Context, queue string) error
	ListDeadLetterSourceQueues(queue string, max int, nextToken string) ([]string, string, error)
	TagQueue(ctx context.Context, queue string, tags map[string]string) error
	UntagQueue(ctx context.Context, queue string, keys []string) error
	ListQueueTags(queue string) (map[string]string, error)
	AddPermission(ctx context.Context, queue, label string, accountIDs, actions []string) error
	RemovePermission(ctx context.Context, queue, label string) error
	StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (taskHandle string, err error)
	ListMoveTasks(ctx context.Context, sourceArn string, max int) ([]st.MoveTask, error)
	CancelMoveTask(ctx context.Context, taskHandle string) (moved int64, err error)
	QueueNameFromARN(arn string) (string, error)
	RetryMessage(ctx context.Context, queue, receiptHandle string, delaySeconds *int, reason string) error
	RejectMessage(ctx context.Context, queue, receiptHandle, reason string) error
	DeferMessage(ctx context.Context, queue, receiptHandle string, delaySeconds int) error
}

// Router sends a request to the node that serves its queue or topic, in
// a cluster (Clustered false: one node serves everything, and routes are
// always "").
type Router interface {
	Clustered() bool
	Route(queue, service string) (string, error)
	RouteTopic(name, service string) (string, error)
	RouteCatalog(service string) string
	Forward(ctx context.Context, rt string, r *http.Request, body []byte, how forward.How) (*forward.Response, error)
	CutOff() error
}
