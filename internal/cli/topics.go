package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/internal/cmdkit"
)

// topicsCmd is `sluice topics ...`: the server's topics over the SNS API.
type topicsCmd struct {
	*clientCmd
	sns *awssns.Client
	// account is the account id in the ARNs built from names: the
	// server's (--account-id).
	account string
}

// topics runs `sluice topics [SUBCOMMAND] ...` (args without "topics").
// A topic or queue is named, and its ARN built from --region and
// --account-id, or given by ARN.
func topics(ctx context.Context, args []string, env Env) error {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("topics "+sub, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	k := clientFlags(fs, env)
	account := env.Getenv("SLUICE_ACCOUNT_ID")
	if account == "" {
		account = "000000000000"
	}
	fs.StringVar(&account, "account-id", account, "the server's account id, in the ARNs built from names")
	var attrs repeated
	fs.Var(&attrs, "attr", "create: topic attribute KEY=VALUE; publish: String message attribute NAME=VALUE (repeatable)")
	fifo := fs.Bool("fifo", false, "create a FIFO topic (its name ends with .fifo)")
	contentDedup := fs.Bool("content-dedup", false, "create: ContentBasedDeduplication on a FIFO topic")
	raw := fs.Bool("raw", false, "subscribe: raw message delivery (no JSON envelope)")
	filter := fs.String("filter", "", "subscribe: filter policy (JSON)")
	filterScope := fs.String("filter-scope", "", "subscribe: what the filter policy matches: MessageAttributes (default) or MessageBody")
	dlq := fs.String("dlq", "", "subscribe: dead-letter queue for deliveries that fail for good (RedrivePolicy)")
	subject := fs.String("subject", "", "publish: Subject")
	group := fs.String("group", "", "publish: MessageGroupId (FIFO topics)")
	dedup := fs.String("dedup", "", "publish: MessageDeduplicationId (FIFO topics)")
	pos, err := cmdkit.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	k.c = cmdkit.NewSQS(k.endpoint, k.region, env)
	t := &topicsCmd{clientCmd: k, account: account, sns: awssns.New(awssns.Options{
		Region:       k.region,
		BaseEndpoint: aws.String(k.endpoint),
		Credentials:  k.c.Options().Credentials, // the SQS commands' credentials, from the same environment
	})}
	args = pos
	// want checks that the command has exactly its positional arguments.
	want := func(what ...string) error {
		if len(args) < len(what) {
			return fmt.Errorf("topics %s: missing %s", sub, strings.Join(what[len(args):], " and "))
		}
		if len(args) > len(what) {
			return fmt.Errorf("topics %s: unexpected argument %q", sub, args[len(what)])
		}
		return nil
	}
	switch sub {
	case "list":
		if err := want(); err != nil {
			return err
		}
		return t.list(ctx)
	case "create":
		if err := want("NAME"); err != nil {
			return err
		}
		a, err := kvs(attrs)
		if err != nil {
			return err
		}
		if *fifo {
			a["FifoTopic"] = "true"
		}
		if *contentDedup {
			a["ContentBasedDeduplication"] = "true"
		}
		out, err := t.sns.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String(args[0]), Attributes: a})
		if err != nil {
			return err
		}
		return t.print(map[string]string{"TopicArn": *out.TopicArn}, *out.TopicArn)
	case "delete":
		if err := want("NAME"); err != nil {
			return err
		}
		_, err := t.sns.DeleteTopic(ctx, &awssns.DeleteTopicInput{TopicArn: aws.String(t.topicARN(args[0]))})
		return err
	case "subscriptions":
		if err := want("NAME"); err != nil {
			return err
		}
		return t.subscriptions(ctx, args[0])
	case "subscribe":
		if err := want("NAME", "QUEUE"); err != nil {
			return err
		}
		a := map[string]string{}
		if *raw {
			a["RawMessageDelivery"] = "true"
		}
		if *filter != "" {
			a["FilterPolicy"] = *filter
		}
		if *filterScope != "" {
			a["FilterPolicyScope"] = *filterScope
		}
		if *dlq != "" {
			rp, err := json.Marshal(map[string]string{"deadLetterTargetArn": t.queueARN(*dlq)})
			if err != nil {
				return err
			}
			a["RedrivePolicy"] = string(rp)
		}
		out, err := t.sns.Subscribe(ctx, &awssns.SubscribeInput{TopicArn: aws.String(t.topicARN(args[0])), Protocol: aws.String("sqs"),
			Endpoint: aws.String(t.queueARN(args[1])), Attributes: a, ReturnSubscriptionArn: true})
		if err != nil {
			return err
		}
		return t.print(map[string]string{"SubscriptionArn": *out.SubscriptionArn}, *out.SubscriptionArn)
	case "unsubscribe":
		if err := want("SUBSCRIPTION_ARN"); err != nil {
			return err
		}
		_, err := t.sns.Unsubscribe(ctx, &awssns.UnsubscribeInput{SubscriptionArn: aws.String(args[0])})
		return err
	case "publish":
		if err := want("NAME", "MESSAGE"); err != nil {
			return err
		}
		in := &awssns.PublishInput{TopicArn: aws.String(t.topicARN(args[0])), Message: aws.String(args[1])}
		if *subject != "" {
			in.Subject = subject
		}
		if *group != "" {
			in.MessageGroupId = group
		}
		if *dedup != "" {
			in.MessageDeduplicationId = dedup
		}
		a, err := kvs(attrs)
		if err != nil {
			return err
		}
		if len(a) > 0 {
			in.MessageAttributes = map[string]snstypes.MessageAttributeValue{}
			for n, v := range a {
				in.MessageAttributes[n] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
		}
		out, err := t.sns.Publish(ctx, in)
		if err != nil {
			return err
		}
		res, text := map[string]string{"MessageId": *out.MessageId}, *out.MessageId
		if out.SequenceNumber != nil {
			res["SequenceNumber"] = *out.SequenceNumber
			text += " (sequence number " + *out.SequenceNumber + ")"
		}
		return t.print(res, text)
	}
	return fmt.Errorf("unknown command %q (see sluice --help)", "topics "+sub)
}

// topicARN is the ARN of the topic name on the server, or name if it is
// an ARN.
func (t *topicsCmd) topicARN(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return "arn:aws:sns:" + t.region + ":" + t.account + ":" + name
}

// queueARN is the ARN of the queue name on the server, or name if it is
// an ARN. It is built, not asked for: SNS takes a subscription of a
// queue that does not exist yet.
func (t *topicsCmd) queueARN(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return "arn:aws:sqs:" + t.region + ":" + t.account + ":" + name
}

// arnName is the last element of an ARN: a topic's or a queue's name.
func arnName(arn string) string { return arn[strings.LastIndex(arn, ":")+1:] }

// isNotFound reports whether err is SNS's NotFound: a topic or
// subscription deleted while the command listed it.
func isNotFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NotFound"
}

type topicRow struct {
	Name          string `json:"name"`
	ARN           string `json:"arn"`
	Subscriptions int    `json:"subscriptions"`
}

func (t *topicsCmd) list(ctx context.Context) error {
	rows := []topicRow{}
	for pages := awssns.NewListTopicsPaginator(t.sns, &awssns.ListTopicsInput{}); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, tp := range out.Topics {
			a, err := t.sns.GetTopicAttributes(ctx, &awssns.GetTopicAttributesInput{TopicArn: tp.TopicArn})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(a.Attributes["SubscriptionsConfirmed"])
			rows = append(rows, topicRow{Name: arnName(*tp.TopicArn), ARN: *tp.TopicArn, Subscriptions: n})
		}
	}
	if t.json {
		return cmdkit.WriteJSON(t.env.Stdout, rows)
	}
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{r.Name, strconv.Itoa(r.Subscriptions), r.ARN})
	}
	cmdkit.Table(t.env.Stdout, []string{"TOPIC", "SUBSCRIPTIONS", "ARN"}, out)
	return nil
}

type subscriptionRow struct {
	ARN      string `json:"subscription_arn"`
	Queue    string `json:"queue"`
	Endpoint string `json:"endpoint"`
	Raw      bool   `json:"raw"`
	Filter   string `json:"filter_policy,omitempty"`
	// FilterScope is MessageAttributes or MessageBody, when there is a
	// filter policy.
	FilterScope string `json:"filter_policy_scope,omitempty"`
	DeadLetter  string `json:"dead_letter_queue,omitempty"`
}

func (t *topicsCmd) subscriptions(ctx context.Context, topic string) error {
	rows := []subscriptionRow{}
	in := &awssns.ListSubscriptionsByTopicInput{TopicArn: aws.String(t.topicARN(topic))}
	for pages := awssns.NewListSubscriptionsByTopicPaginator(t.sns, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, s := range out.Subscriptions {
			a, err := t.sns.GetSubscriptionAttributes(ctx, &awssns.GetSubscriptionAttributesInput{SubscriptionArn: s.SubscriptionArn})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			endpoint := aws.ToString(s.Endpoint)
			r := subscriptionRow{ARN: *s.SubscriptionArn, Queue: arnName(endpoint), Endpoint: endpoint,
				Raw: a.Attributes["RawMessageDelivery"] == "true", Filter: a.Attributes["FilterPolicy"]}
			if r.Filter != "" {
				r.FilterScope = a.Attributes["FilterPolicyScope"]
			}
			if rp := a.Attributes["RedrivePolicy"]; rp != "" {
				var p struct{ DeadLetterTargetArn string }
				if json.Unmarshal([]byte(rp), &p) == nil {
					r.DeadLetter = p.DeadLetterTargetArn
				}
			}
			rows = append(rows, r)
		}
	}
	if t.json {
		return cmdkit.WriteJSON(t.env.Stdout, rows)
	}
	var out [][]string
	for _, r := range rows {
		delivery := "envelope"
		if r.Raw {
			delivery = "raw"
		}
		dl := "-"
		if r.DeadLetter != "" {
			dl = arnName(r.DeadLetter)
		}
		out = append(out, []string{r.ARN, r.Queue, delivery, abbreviateFilter(r.Filter, r.FilterScope), dl})
	}
	cmdkit.Table(t.env.Stdout, []string{"SUBSCRIPTION", "QUEUE", "DELIVERY", "FILTER", "DEAD-LETTER QUEUE"}, out)
	return nil
}

// filterWidth is how many characters of a filter policy the table shows.
const filterWidth = 40

// abbreviateFilter is a filter policy for a table cell: on one line
// without spaces, cut to filterWidth characters, marked "body:" when it
// matches the message body.
func abbreviateFilter(policy, scope string) string {
	if policy == "" {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(policy)) == nil {
		policy = b.String()
	} else {
		policy = strings.Join(strings.Fields(policy), " ")
	}
	if scope == "MessageBody" {
		policy = "body:" + policy
	}
	if r := []rune(policy); len(r) > filterWidth {
		policy = string(r[:filterWidth-3]) + "..."
	}
	return policy
}
