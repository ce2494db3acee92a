// Package sns is Sluice's SNS front: the SNS Query protocol (Version
// 2010-03-31) on the SQS port, over the broker's topics. Package wire
// decodes, checks and renders; this package keeps SNS's semantics
// (idempotent creations and subscriptions, default attributes, pages,
// filter policies) and calls the broker. The SQS front hands it every
// request whose Version is SNS's.
package sns

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sluicemq/sluice/internal/filterpolicy"
	"github.com/sluicemq/sluice/internal/sns/wire"
	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Service answers SNS requests for one broker.
type Service struct {
	b     Topics
	scope wire.Scope
	log   *slog.Logger
}

// New returns the SNS front of b, answering for region and account.
func New(b Topics, region, account string, log *slog.Logger) *Service {
	return &Service{b: b, scope: wire.Scope{Region: region, Account: account}, log: log}
}

// pageSize is how many topics or subscriptions a list action returns.
const pageSize = 100

// Serve answers one request from caller (its access key; "" when
// unsigned): form holds its parameters (the body's form and the URL's
// query). ctx carries the caller's authorizer: a topic and a subscribed
// queue are the caller's to use as the names its key allows.
func (s *Service) Serve(ctx context.Context, w http.ResponseWriter, requestID, caller string, form url.Values) {
	ctx = context.WithValue(ctx, senderKey{}, caller)
	action := form.Get("Action")
	in, err := wire.Decode(action, form)
	if err != nil {
		wire.WriteError(w, err, requestID)
		return
	}
	out, err := s.do(ctx, in)
	if err != nil {
		wire.WriteError(w, s.wireError(err), requestID)
		return
	}
	wire.WriteResponse(w, out, requestID)
}

// wireError turns broker errors into SNS's.
func (s *Service) wireError(err error) error {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return err
	case errors.Is(err, st.ErrNoTopic):
		return wire.TopicNotFound()
	}
	var se *st.Error
	switch {
	case errors.As(err, &se) && se.Code == st.CodeUnsupportedOperation:
		return wire.Errorf(wire.CodeInvalidParameter, "%s", se.Message)
	case se != nil:
		return err // wire maps the codes SNS shares
	}
	s.log.Error("an SNS request failed", "err", err)
	return wire.InternalError(err)
}

func (s *Service) do(ctx context.Context, in any) (wire.Output, error) {
	switch in := in.(type) {
	case wire.CreateTopicInput:
		return s.createTopic(ctx, &in)
	case wire.DeleteTopicInput:
		return s.deleteTopic(ctx, &in)
	case wire.ListTopicsInput:
		return s.listTopics(ctx, &in)
	case wire.GetTopicAttributesInput:
		return s.getTopicAttributes(ctx, &in)
	case wire.SetTopicAttributesInput:
		return s.setTopicAttributes(ctx, &in)
	case wire.SubscribeInput:
		return s.subscribe(ctx, &in)
	case wire.ConfirmSubscriptionInput:
		return s.confirmSubscription(ctx, &in)
	case wire.UnsubscribeInput:
		return s.unsubscribe(ctx, &in)
	case wire.ListSubscriptionsInput:
		return s.listSubscriptions(ctx, "", in.NextToken)
	case wire.ListSubscriptionsByTopicInput:
		name, err := s.topicName(ctx, "TopicArn", in.TopicARN)
		if err != nil {
			return nil, err
		}
		out, err := s.listSubscriptions(ctx, name, in.NextToken)
		if err != nil {
			return nil, err
		}
		return wire.ListSubscriptionsByTopicOutput(out), nil
	case wire.GetSubscriptionAttributesInput:
		return s.getSubscriptionAttributes(ctx, &in)
	case wire.SetSubscriptionAttributesInput:
		return s.setSubscriptionAttributes(ctx, &in)
	case wire.PublishInput:
		return s.publish(ctx, &in)
	case wire.PublishBatchInput:
		return s.publishBatch(ctx, &in)
	case wire.TagResourceInput:
		return s.tagResource(ctx, &in)
	case wire.UntagResourceInput:
		return s.untagResource(ctx, &in)
	case wire.ListTagsForResourceInput:
		return s.listTags(ctx, &in)
	}
	return nil, wire.Errorf(wire.CodeInvalidAction, "Could not find operation for version %s", wire.Version)
}

// topicName checks a topic ARN (param names it in errors) and the
// caller's right to the topic, and returns the topic's name.
func (s *Service) topicName(ctx context.Context, param, arn string) (string, error) {
	name, err := s.scope.ParseTopicARN(param, arn)
	if err != nil {
		return "", err
	}
	if !st.Authorized(ctx, name) {
		return "", wire.Errorf(wire.CodeAuthorizationError, "User is not authorized to access topic %s", arn)
	}
	return name, nil
}

// topic returns a topic the caller may use.
func (s *Service) topic(ctx context.Context, param, arn string) (string, st.TopicInfo, error) {
	name, err := s.topicName(ctx, param, arn)
	if err != nil {
		return "", st.TopicInfo{}, err
	}
	info, err := s.b.Topic(name)
	if err != nil {
		if param == "ResourceArn" && errors.Is(err, st.ErrNoTopic) {
			return "", st.TopicInfo{}, wire.ResourceNotFound()
		}
		return "", st.TopicInfo{}, err
	}
	return name, info, nil
}

// ---- topics ----

func (s *Service) createTopic(ctx context.Context, in *wire.CreateTopicInput) (wire.Output, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if !st.Authorized(ctx, in.Name) {
		return nil, wire.Errorf(wire.CodeAuthorizationError, "User is not authorized to create topic %s", in.Name)
	}
	attrs := maps.Clone(in.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	fifo := in.FIFO()
	if !fifo {
		delete(attrs, "FifoTopic") // "false" is the same as none
	}
	tags := map[string]string{}
	for _, t := range in.Tags {
		tags[t.Key] = t.Value
	}
	info, created, err := s.b.CreateTopic(ctx, st.TopicInfo{Name: in.Name, FIFO: fifo, Attrs: attrs, Tags: tags})
	if err != nil {
		return nil, err
	}
	if !created {
		// No attributes asks for the topic as it is; any asks for those.
		if len(in.Attributes) > 0 && !maps.Equal(info.Attrs, attrs) {
			return nil, wire.TopicExistsWithDifferentAttributes()
		}
		for k, v := range tags {
			if hv, ok := info.Tags[k]; !ok || hv != v {
				return nil, wire.TopicExistsWithDifferentTags()
			}
		}
	}
	return wire.CreateTopicOutput{TopicARN: s.scope.TopicARN(in.Name)}, nil
}

func (s *Service) deleteTopic(ctx context.Context, in *wire.DeleteTopicInput) (wire.Output, error) {
	name, err := s.topicName(ctx, "TopicArn", in.TopicARN)
	if wire.CodeOf(err) == wire.CodeNotFound {
		return wire.DeleteTopicOutput{}, nil // another account's: nothing here
	}
	if err != nil {
		return nil, err
	}
	if err := s.b.DeleteTopic(ctx, name); err != nil {
		return nil, err
	}
	return wire.DeleteTopicOutput{}, nil
}

func (s *Service) listTopics(ctx context.Context, in *wire.ListTopicsInput) (wire.Output, error) {
	var names []string
	for _, n := range s.b.Topics() {
		if st.Authorized(ctx, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	start, end, next, err := paginate(names, in.NextToken)
	if err != nil {
		return nil, err
	}
	out := wire.ListTopicsOutput{NextToken: next, TopicARNs: []string{}}
	for _, n := range names[start:end] {
		out.TopicARNs = append(out.TopicARNs, s.scope.TopicARN(n))
	}
	return out, nil
}

// paginate returns the bounds of the page of keys (sorted) that token
// starts, and the next page's token ("" on the last). A token is the
// first key of its page, encoded: a page starts where it would be even if
// that key went meanwhile.
func paginate(keys []string, token string) (start, end int, next string, err error) {
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return 0, 0, "", wire.InvalidParameter("Invalid parameter: NextToken")
		}
		start, _ = slices.BinarySearch(keys, string(b))
	}
	end = min(len(keys), start+pageSize)
	if end < len(keys) {
		next = base64.RawURLEncoding.EncodeToString([]byte(keys[end]))
	}
	return start, end, next, nil
}

// defaultDeliveryPolicy is what GetTopicAttributes shows as
// EffectiveDeliveryPolicy (SNS's default for HTTP endpoints).
const defaultDeliveryPolicy = `{"http":{"defaultHealthyRetryPolicy":{"minDelayTarget":20,"maxDelayTarget":20,"numRetries":3,"numMaxDelayRetries":0,"numNoDelayRetries":0,"numMinDelayRetries":0,"backoffFunction":"linear"},"disableSubscriptionOverrides":false,"defaultRequestPolicy":{"headerContentType":"text/plain; charset=UTF-8"}}}`

func (s *Service) defaultPolicy(arn string) string {
	return fmt.Sprintf(`{"Version":"2008-10-17","Id":"__default_policy_ID","Statement":[{"Sid":"__default_statement_ID","Effect":"Allow","Principal":{"AWS":"*"},"Action":["SNS:GetTopicAttributes","SNS:SetTopicAttributes","SNS:AddPermission","SNS:RemovePermission","SNS:DeleteTopic","SNS:Subscribe","SNS:ListSubscriptionsByTopic","SNS:Publish"],"Resource":"%s","Condition":{"StringEquals":{"AWS:SourceOwner":"%s"}}}]}`, arn, s.scope.Account)
}

func (s *Service) getTopicAttributes(ctx context.Context, in *wire.GetTopicAttributesInput) (wire.Output, error) {
	name, info, err := s.topic(ctx, "TopicArn", in.TopicARN)
	if err != nil {
		return nil, err
	}
	arn := s.scope.TopicARN(name)
	attrs := map[string]string{
		"DisplayName":             "",
		"EffectiveDeliveryPolicy": defaultDeliveryPolicy,
		"Owner":                   s.scope.Account,
		"Policy":                  s.defaultPolicy(arn),
		"SubscriptionsConfirmed":  strconv.Itoa(len(info.Subs)),
		"SubscriptionsDeleted":    "0",
		"SubscriptionsPending":    "0",
		"TopicArn":                arn,
	}
	if info.FIFO {
		attrs["FifoTopic"] = "true"
		attrs["ContentBasedDeduplication"] = "false"
	}
	maps.Copy(attrs, info.Attrs)
	return wire.GetTopicAttributesOutput{Attributes: attrs}, nil
}

func (s *Service) setTopicAttributes(ctx context.Context, in *wire.SetTopicAttributesInput) (wire.Output, error) {
	name, info, err := s.topic(ctx, "TopicArn", in.TopicARN)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(info.FIFO); err != nil {
		return nil, err
	}
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		if t.Attrs == nil {
			t.Attrs = map[string]string{}
		}
		if in.AttributeValue == "" && in.AttributeName != "DisplayName" {
			delete(t.Attrs, in.AttributeName)
		} else {
			t.Attrs[in.AttributeName] = in.AttributeValue
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wire.SetTopicAttributesOutput{}, nil
}

// ---- subscriptions ----

// subscriptionDefaults are the values a Subscribe attribute may be sent
// with and still be the same as not sent.
var subscriptionDefaults = map[string]string{"RawMessageDelivery": "false", "FilterPolicyScope": "MessageAttributes"}

// sameSubscription reports whether a Subscribe's attributes match an
// existing subscription's (defaults equal absence).
func sameSubscription(have, asked map[string]string) bool {
	norm := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if d, ok := subscriptionDefaults[k]; ok && v == d || v == "" {
				continue
			}
			out[k] = v
		}
		return out
	}
	return maps.Equal(norm(have), norm(asked))
}

// checkFilter parses a subscription's filter policy in its scope, so that
// an invalid one is refused as SNS refuses it.
func checkFilter(attrs map[string]string, op filterpolicy.Operation) error {
	text := attrs["FilterPolicy"]
	if text == "" {
		return nil
	}
	scope := filterpolicy.MessageAttributes
	if v := attrs["FilterPolicyScope"]; v != "" {
		var err error
		if scope, err = filterpolicy.ParseScope(v); err != nil {
			return filterError(err, op)
		}
	}
	if _, err := filterpolicy.Parse(text, scope); err != nil {
		return filterError(err, op)
	}
	return nil
}

func filterError(err error, op filterpolicy.Operation) error {
	var fe *filterpolicy.Error
	if errors.As(err, &fe) {
		return wire.InvalidParameter(fe.Message(op))
	}
	return wire.InvalidParameter("Invalid parameter: FilterPolicy")
}

func (s *Service) subscribe(ctx context.Context, in *wire.SubscribeInput) (wire.Output, error) {
	name, info, err := s.topic(ctx, "TopicArn", in.TopicARN)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(info.FIFO); err != nil {
		return nil, err
	}
	if err := checkFilter(in.Attributes, filterpolicy.Subscribe); err != nil {
		return nil, err
	}
	if q, err := wire.ParseQueueARN(in.Endpoint); err == nil && q.Account == s.scope.Account {
		if qname, _ := s.b.QueueNameFromARN(in.Endpoint); qname != "" && !st.Authorized(ctx, qname) {
			// SNS refuses a queue of another principal without a queue
			// policy that lets the topic send to it.
			return nil, wire.Errorf(wire.CodeAuthorizationError, "User is not authorized to subscribe queue %s", in.Endpoint)
		}
	}
	topicARN := s.scope.TopicARN(name)
	var subARN string
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		for _, id := range slices.Sorted(maps.Keys(t.Subs)) {
			sub := t.Subs[id]
			if sub.Protocol == in.Protocol && sub.Endpoint == in.Endpoint {
				if !sameSubscription(sub.Attrs, in.Attributes) {
					return wire.SubscriptionExistsWithDifferentAttributes()
				}
				subARN = topicARN + ":" + id
				return errSame
			}
		}
		id := uuid.NewString()
		if t.Subs == nil {
			t.Subs = map[string]st.Subscription{}
		}
		attrs := map[string]string{}
		for k, v := range in.Attributes {
			if v != "" {
				attrs[k] = v
			}
		}
		t.Subs[id] = st.Subscription{Protocol: in.Protocol, Endpoint: in.Endpoint, Account: s.scope.Account, Attrs: attrs}
		subARN = topicARN + ":" + id
		return nil
	})
	if err != nil && !errors.Is(err, errSame) {
		return nil, err
	}
	return wire.SubscribeOutput{SubscriptionARN: subARN}, nil
}

// errSame ends an update that found the subscription there already.
var errSame = errors.New("sns: the subscription exists")

func (s *Service) confirmSubscription(ctx context.Context, in *wire.ConfirmSubscriptionInput) (wire.Output, error) {
	// SQS subscriptions of the account are confirmed at once: there is
	// nothing to confirm.
	if _, _, err := s.topic(ctx, "TopicArn", in.TopicARN); err != nil {
		return nil, err
	}
	return nil, wire.InvalidParameter("Invalid token")
}

// subscription finds a subscription by ARN: its topic's name, its id and
// itself.
func (s *Service) subscription(ctx context.Context, arn string) (string, string, st.TopicInfo, error) {
	topicARN, err := s.scope.ParseSubscriptionARN(arn)
	if err != nil {
		return "", "", st.TopicInfo{}, err
	}
	name, info, err := s.topic(ctx, "TopicArn", topicARN)
	if errors.Is(err, st.ErrNoTopic) || wire.CodeOf(err) == wire.CodeNotFound {
		return "", "", st.TopicInfo{}, wire.SubscriptionNotFound()
	}
	if err != nil {
		return "", "", st.TopicInfo{}, err
	}
	id := strings.TrimPrefix(arn, topicARN+":")
	if _, ok := info.Subs[id]; !ok {
		return "", "", st.TopicInfo{}, wire.SubscriptionNotFound()
	}
	return name, id, info, nil
}

func (s *Service) unsubscribe(ctx context.Context, in *wire.UnsubscribeInput) (wire.Output, error) {
	name, id, _, err := s.subscription(ctx, in.SubscriptionARN)
	if wire.CodeOf(err) == wire.CodeNotFound {
		return wire.UnsubscribeOutput{}, nil // idempotent
	}
	if err != nil {
		return nil, err
	}
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		delete(t.Subs, id)
		return nil
	})
	if err != nil && !errors.Is(err, st.ErrNoTopic) {
		return nil, err
	}
	return wire.UnsubscribeOutput{}, nil
}

// listSubscriptions lists the subscriptions of topic name, or of every
// topic the caller may use ("").
func (s *Service) listSubscriptions(ctx context.Context, name, token string) (wire.ListSubscriptionsOutput, error) {
	var infos []st.TopicInfo
	if name == "" {
		infos = s.b.AllTopics(ctx) // in a cluster, each from its owner
	} else {
		info, err := s.b.Topic(name)
		if err != nil {
			return wire.ListSubscriptionsOutput{}, err
		}
		infos = append(infos, info)
	}
	type entry struct {
		key string
		sub wire.Subscription
	}
	var all []entry
	for _, info := range infos {
		n := info.Name
		if !st.Authorized(ctx, n) {
			continue
		}
		arn := s.scope.TopicARN(n)
		for id, sub := range info.Subs {
			all = append(all, entry{n + "\x00" + id, wire.Subscription{SubscriptionARN: arn + ":" + id, Owner: s.scope.Account,
				Protocol: sub.Protocol, Endpoint: sub.Endpoint, TopicARN: arn}})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	keys := make([]string, len(all))
	for i, e := range all {
		keys[i] = e.key
	}
	start, end, next, err := paginate(keys, token)
	if err != nil {
		return wire.ListSubscriptionsOutput{}, err
	}
	out := wire.ListSubscriptionsOutput{NextToken: next, Subscriptions: []wire.Subscription{}}
	for _, e := range all[start:end] {
		out.Subscriptions = append(out.Subscriptions, e.sub)
	}
	return out, nil
}

func (s *Service) getSubscriptionAttributes(ctx context.Context, in *wire.GetSubscriptionAttributesInput) (wire.Output, error) {
	name, id, info, err := s.subscription(ctx, in.SubscriptionARN)
	if err != nil {
		return nil, err
	}
	sub := info.Subs[id]
	arn := s.scope.TopicARN(name)
	attrs := map[string]string{
		"ConfirmationWasAuthenticated": "true",
		"Endpoint":                     sub.Endpoint,
		"Owner":                        s.scope.Account,
		"PendingConfirmation":          "false",
		"Protocol":                     sub.Protocol,
		"RawMessageDelivery":           "false",
		"SubscriptionArn":              arn + ":" + id,
		"SubscriptionPrincipal":        "arn:aws:iam::" + s.scope.Account + ":root",
		"TopicArn":                     arn,
	}
	maps.Copy(attrs, sub.Attrs)
	if sub.Attrs["FilterPolicy"] != "" && sub.Attrs["FilterPolicyScope"] == "" {
		attrs["FilterPolicyScope"] = "MessageAttributes"
	}
	return wire.GetSubscriptionAttributesOutput{Attributes: attrs}, nil
}

func (s *Service) setSubscriptionAttributes(ctx context.Context, in *wire.SetSubscriptionAttributesInput) (wire.Output, error) {
	name, id, info, err := s.subscription(ctx, in.SubscriptionARN)
	if err != nil {
		return nil, err
	}
	sub := info.Subs[id]
	if err := in.Validate(wire.SubscriptionContext{TopicFIFO: info.FIFO, Protocol: sub.Protocol, Endpoint: sub.Endpoint}); err != nil {
		return nil, err
	}
	next := maps.Clone(sub.Attrs)
	if next == nil {
		next = map[string]string{}
	}
	if in.AttributeValue == "" {
		delete(next, in.AttributeName)
	} else {
		next[in.AttributeName] = in.AttributeValue
	}
	if err := checkFilter(next, filterpolicy.SetSubscriptionAttributes); err != nil {
		return nil, err
	}
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		cur, ok := t.Subs[id]
		if !ok {
			return wire.SubscriptionNotFound()
		}
		cur.Attrs = next
		t.Subs[id] = cur
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wire.SetSubscriptionAttributesOutput{}, nil
}

// ---- publishing ----

// spec is a checked message as the topic stores it.
func spec(m *wire.PublishMessage, t wire.TopicSettings, sender string) topic.PublishSpec {
	p := topic.PublishSpec{ID: uuid.NewString(), Message: m.Message, Group: m.MessageGroupID, Dedup: m.MessageDeduplicationID,
		Sender: sender, JSON: m.MessageStructure == "json"}
	if m.Subject != nil {
		p.Subject = *m.Subject
	}
	if t.FIFO && p.Dedup == "" && t.ContentBasedDeduplication {
		p.Dedup = contentDedup(m.Message)
	}
	if len(m.MessageAttributes) > 0 {
		p.Attrs = make(map[string]st.AttributeValue, len(m.MessageAttributes))
		for name, a := range m.MessageAttributes {
			p.Attrs[name] = st.AttributeValue{DataType: a.DataType, StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		}
	}
	return p
}

func settings(info st.TopicInfo) wire.TopicSettings {
	t := wire.ParseTopicSettings(info.Attrs)
	t.FIFO = info.FIFO
	return t
}

func (s *Service) publish(ctx context.Context, in *wire.PublishInput) (wire.Output, error) {
	arn, err := in.Target()
	if err != nil {
		return nil, err
	}
	param := "TopicArn"
	if in.TopicARN == "" {
		param = "TargetArn"
	}
	name, info, err := s.topic(ctx, param, arn)
	if err != nil {
		return nil, err
	}
	t := settings(info)
	if err := in.Validate(t); err != nil {
		return nil, err
	}
	res, err := s.b.Publish(ctx, name, []topic.PublishSpec{spec(&in.PublishMessage, t, sender(ctx))})
	if err != nil {
		return nil, err
	}
	return wire.PublishOutput{MessageID: res[0].ID, SequenceNumber: res[0].SeqNum}, nil
}

func (s *Service) publishBatch(ctx context.Context, in *wire.PublishBatchInput) (wire.Output, error) {
	if err := in.CheckEntries(); err != nil {
		return nil, err
	}
	name, info, err := s.topic(ctx, "TopicArn", in.TopicARN)
	if err != nil {
		return nil, err
	}
	t := settings(info)
	if err := in.Validate(t); err != nil {
		return nil, err
	}
	specs := make([]topic.PublishSpec, len(in.Entries))
	for i := range in.Entries {
		specs[i] = spec(&in.Entries[i].PublishMessage, t, sender(ctx))
	}
	res, err := s.b.Publish(ctx, name, specs)
	if err != nil {
		return nil, err
	}
	out := wire.PublishBatchOutput{Successful: []wire.PublishBatchResultEntry{}, Failed: []wire.BatchResultErrorEntry{}}
	for i, r := range res {
		out.Successful = append(out.Successful, wire.PublishBatchResultEntry{ID: in.Entries[i].ID, MessageID: r.ID, SequenceNumber: r.SeqNum})
	}
	return out, nil
}

// senderKey carries the caller's name (its access key) in a request's
// context, for the publishes it makes.
type senderKey struct{}

func sender(ctx context.Context) string {
	name, _ := ctx.Value(senderKey{}).(string)
	return name
}

// contentDedup is a FIFO topic's deduplication id of a message with
// ContentBasedDeduplication: the SHA-256 of the message, in hex.
func contentDedup(message string) string {
	sum := sha256.Sum256([]byte(message))
	return hex.EncodeToString(sum[:])
}

// ---- tags ----

func (s *Service) tagResource(ctx context.Context, in *wire.TagResourceInput) (wire.Output, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	name, _, err := s.topic(ctx, "ResourceArn", in.ResourceARN)
	if err != nil {
		return nil, err
	}
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		if t.Tags == nil {
			t.Tags = map[string]string{}
		}
		for _, tag := range in.Tags {
			t.Tags[tag.Key] = tag.Value
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wire.TagResourceOutput{}, nil
}

func (s *Service) untagResource(ctx context.Context, in *wire.UntagResourceInput) (wire.Output, error) {
	name, _, err := s.topic(ctx, "ResourceArn", in.ResourceARN)
	if err != nil {
		return nil, err
	}
	err = s.b.UpdateTopic(ctx, name, func(t *st.TopicInfo) error {
		for _, k := range in.TagKeys {
			delete(t.Tags, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wire.UntagResourceOutput{}, nil
}

func (s *Service) listTags(ctx context.Context, in *wire.ListTagsForResourceInput) (wire.Output, error) {
	_, info, err := s.topic(ctx, "ResourceArn", in.ResourceARN)
	if err != nil {
		return nil, err
	}
	out := wire.ListTagsForResourceOutput{Tags: []wire.Tag{}}
	for _, k := range slices.Sorted(maps.Keys(info.Tags)) {
		out.Tags = append(out.Tags, wire.Tag{Key: k, Value: info.Tags[k]})
	}
	return out, nil
}
