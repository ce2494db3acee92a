package sns

import (
	"net/url"
)

// Where is the node of a cluster that answers an SNS request.
type Where int

const (
	// Here: any node answers (from its view, or by asking the others),
	// or the request is refused before any topic is reached.
	Here Where = iota
	// TopicOwner: the node that owns the topic Route names.
	TopicOwner
	// CatalogOwner: the node that owns the catalog (it creates and
	// deletes topics).
	CatalogOwner
	// TopicOrCatalog: the topic's owner if the topic exists, else the
	// catalog's owner (CreateTopic: the owner compares the settings of
	// an existing topic).
	TopicOrCatalog
)

// Route says which node of a cluster answers an SNS request, and the
// topic it is about. A request whose ARN does not parse is answered here
// (the action refuses it as on a single node).
func (s *Service) Route(form url.Values) (topic string, where Where) {
	arnOf := func(param string) (string, Where) {
		name, err := s.scope.ParseTopicARN(param, form.Get(param))
		if err != nil {
			return "", Here
		}
		return name, TopicOwner
	}
	switch form.Get("Action") {
	case "CreateTopic":
		if name := form.Get("Name"); name != "" {
			return name, TopicOrCatalog
		}
		return "", Here
	case "DeleteTopic":
		return "", CatalogOwner
	case "GetTopicAttributes", "SetTopicAttributes", "Subscribe", "ListSubscriptionsByTopic", "PublishBatch", "ConfirmSubscription":
		return arnOf("TopicArn")
	case "Publish":
		if form.Get("TargetArn") != "" && form.Get("TopicArn") == "" {
			return arnOf("TargetArn")
		}
		return arnOf("TopicArn")
	case "Unsubscribe", "GetSubscriptionAttributes", "SetSubscriptionAttributes":
		topicARN, err := s.scope.ParseSubscriptionARN(form.Get("SubscriptionArn"))
		if err != nil {
			return "", Here
		}
		name, err := s.scope.ParseTopicARN("TopicArn", topicARN)
		if err != nil {
			return "", Here
		}
		return name, TopicOwner
	case "TagResource", "UntagResource", "ListTagsForResource":
		return arnOf("ResourceArn")
	}
	return "", Here // ListTopics, ListSubscriptions, unknown actions
}
