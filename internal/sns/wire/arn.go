package wire

import (
	"fmt"
	"strings"
)

// ARN is an Amazon Resource Name, arn:partition:service:region:account:resource.
// Resource keeps any further colons.
type ARN struct {
	Partition string
	Service   string
	Region    string
	Account   string
	Resource  string
}

func (a ARN) String() string {
	return "arn:" + a.Partition + ":" + a.Service + ":" + a.Region + ":" + a.Account + ":" + a.Resource
}

// ParseARN splits s into its parts. It needs the "arn" prefix, at least
// six colon-separated elements and a partition, a service and a resource;
// region and account may be empty (as in S3 ARNs).
func ParseARN(s string) (ARN, bool) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" || parts[1] == "" || parts[2] == "" || parts[5] == "" {
		return ARN{}, false
	}
	return ARN{Partition: parts[1], Service: parts[2], Region: parts[3], Account: parts[4], Resource: parts[5]}, true
}

// elements is how many colon-separated elements s has, the number AWS
// quotes when an ARN is too short.
func elements(s string) int { return strings.Count(s, ":") + 1 }

// Scope is the partition, region and account a server answers for: the
// ARNs of its topics and subscriptions are in it, and an ARN outside it
// names nothing the server holds.
type Scope struct {
	// Partition is the ARN partition; "aws" when empty.
	Partition string
	Region    string
	Account   string
}

func (s Scope) partition() string {
	if s.Partition == "" {
		return "aws"
	}
	return s.Partition
}

// TopicARN is the ARN of the topic name in the scope.
func (s Scope) TopicARN(name string) string {
	return ARN{Partition: s.partition(), Service: "sns", Region: s.Region, Account: s.Account, Resource: name}.String()
}

// ParseTopicARN checks a topic ARN sent as the parameter param
// ("TopicArn", "TargetArn" or "ResourceArn") and returns the topic's
// name:
//
//   - fewer than 6 elements: InvalidParameter "Invalid parameter: TopicArn
//     Reason: An ARN must have at least 6 elements, not N";
//   - not an SNS ARN in the scope's partition and region, or not a valid
//     topic name: InvalidParameter "Invalid parameter: TopicArn";
//   - another account: the topic does not exist here (NotFound "Topic does
//     not exist"; ResourceNotFound for ResourceArn).
//
// The name is not checked against stored topics: that is the caller's
// NotFound.
func (s Scope) ParseTopicARN(param, arn string) (string, error) {
	if n := elements(arn); n < 6 {
		return "", InvalidParameter(fmt.Sprintf("Invalid parameter: %s Reason: An ARN must have at least 6 elements, not %d", param, n))
	}
	a, ok := ParseARN(arn)
	if !ok || a.Service != "sns" || a.Partition != s.partition() || a.Region != s.Region || !validTopicName(a.Resource) {
		return "", InvalidParameter("Invalid parameter: " + param)
	}
	if a.Account != s.Account {
		if param == "ResourceArn" {
			return "", ResourceNotFound()
		}
		return "", TopicNotFound()
	}
	return a.Resource, nil
}

// ParseSubscriptionARN checks a subscription ARN, {topic ARN}:{id}, and
// returns its topic's ARN:
//
//   - fewer than 6 elements: InvalidParameter "Invalid parameter:
//     SubscriptionArn Reason: An ARN must have at least 6 elements, not N";
//   - not an SNS ARN in the scope's partition and region: InvalidParameter
//     "Invalid parameter: SubscriptionArn";
//   - no subscription id after the topic name (a topic's ARN):
//     InvalidParameter "Invalid parameter: SubscriptionId";
//   - another account: NotFound "Subscription does not exist".
func (s Scope) ParseSubscriptionARN(arn string) (topicARN string, err error) {
	if n := elements(arn); n < 6 {
		return "", InvalidParameter(fmt.Sprintf("Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not %d", n))
	}
	a, ok := ParseARN(arn)
	if !ok || a.Service != "sns" || a.Partition != s.partition() || a.Region != s.Region {
		return "", InvalidParameter("Invalid parameter: SubscriptionArn")
	}
	topic, id, ok := strings.Cut(a.Resource, ":")
	if !ok || id == "" || strings.Contains(id, ":") {
		return "", InvalidParameter("Invalid parameter: SubscriptionId")
	}
	if !validTopicName(topic) {
		return "", InvalidParameter("Invalid parameter: SubscriptionArn")
	}
	if a.Account != s.Account {
		return "", SubscriptionNotFound()
	}
	a.Resource = topic
	return a.String(), nil
}

// ParseQueueARN checks the endpoint of an sqs subscription: an SQS
// queue's ARN, arn:partition:sqs:region:account:name, in any region or
// account (a queue that does not exist is accepted, as AWS does). Anything
// else (a queue URL, a name) is InvalidParameter "Invalid parameter: SQS
// endpoint ARN".
func ParseQueueARN(endpoint string) (ARN, error) {
	a, ok := ParseARN(endpoint)
	if !ok || a.Service != "sqs" || a.Account == "" || strings.Contains(a.Resource, ":") {
		return ARN{}, InvalidParameter("Invalid parameter: SQS endpoint ARN")
	}
	return a, nil
}

// IsFIFOQueueARN reports whether the queue ARN (or name) is a FIFO
// queue's: its name ends with ".fifo".
func IsFIFOQueueARN(arn string) bool { return strings.HasSuffix(arn, ".fifo") }

// validTopicName reports whether name is a topic name of either kind.
func validTopicName(name string) bool {
	base, _ := strings.CutSuffix(name, ".fifo")
	return len(name) <= 256 && wordChars(base)
}

// wordChars reports whether s is 1 or more of [A-Za-z0-9_-], the
// characters of topic names and batch entry ids.
func wordChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
