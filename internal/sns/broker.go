package sns

import (
	"context"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/topic"
)

// Topics is what the SNS front asks of the server: its topics, their
// subscriptions and publishing (internal/broker's Broker is one).
type Topics interface {
	CreateTopic(info record.TopicInfo) (record.TopicInfo, bool, error)
	DeleteTopic(ctx context.Context, name string) error
	Topics() []string
	Topic(name string) (record.TopicInfo, error)
	UpdateTopic(name string, f func(*record.TopicInfo) error) error
	Publish(ctx context.Context, name string, in []topic.PublishSpec) ([]topic.PublishResult, error)
	AllTopics(ctx context.Context) []record.TopicInfo
	QueueNameFromARN(arn string) (string, error)
	SNSCertificate(ctx context.Context, p string) ([]byte, bool)
}
