package sns

import (
	"context"

	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Topics is what the SNS front asks of the server: its topics, their
// subscriptions and publishing (internal/broker's Broker is one).
type Topics interface {
	CreateTopic(ctx context.Context, info st.TopicInfo) (st.TopicInfo, bool, error)
	DeleteTopic(ctx context.Context, name string) error
	Topics() []string
	Topic(name string) (st.TopicInfo, error)
	UpdateTopic(ctx context.Context, name string, f func(*st.TopicInfo) error) error
	Publish(ctx context.Context, name string, in []topic.PublishSpec) ([]topic.PublishResult, error)
	AllTopics(ctx context.Context) []st.TopicInfo
	QueueNameFromARN(arn string) (string, error)
	SNSCertificate(ctx context.Context, p string) ([]byte, bool)
}
