package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sns/signkey"
	snswire "github.com/sluicemq/sluice/internal/sns/wire"
	"github.com/sluicemq/sluice/internal/topic"
	"github.com/sluicemq/sluice/sluicetype"
)

// Topics: SNS-compatible fan-out. A topic is a log of its own: a publish is
// one durable write, and each subscription's queue gets every publish its
// filter policy admits, at least once, in publish order (package
// internal/topic). The SNS wire front (internal/sns) is built on these.

type (
	// TopicInfo is a topic's settings and subscriptions.
	TopicInfo = sluicetype.TopicInfo
	// Subscription is one subscription of a topic.
	Subscription = sluicetype.Subscription
	// PublishInput is a message to publish, checked already.
	PublishInput = topic.PublishSpec
	// PublishResult is a publish's outcome.
	PublishResult = topic.PublishResult
	// TopicFigures are a topic's delivery counters.
	TopicFigures = topic.Figures
)

// ErrNoTopic: no topic has the name.
var ErrNoTopic = sluicetype.ErrNoTopic

// CreateTopic creates a topic with info's name, kind, attributes and tags,
// or returns the existing one of that name (created false: compare its
// settings). A ctx that has ended writes nothing.
func (b *Broker) CreateTopic(ctx context.Context, info TopicInfo) (TopicInfo, bool, error) {
	if err := ctx.Err(); err != nil { // nothing written
		return TopicInfo{}, false, err
	}
	o, created, err := b.e.CreateTopic(topicIn(info))
	if err != nil {
		return TopicInfo{}, false, err
	}
	return topicOut(o.Info()), created, nil
}

// topicIn is a topic's settings as the log keeps them, topicOut as the
// broker shows them: two types, so that neither's names bind the other.
func topicIn(t TopicInfo) record.TopicInfo {
	r := record.TopicInfo{ID: t.ID, Name: t.Name, FIFO: t.FIFO, Attrs: t.Attrs, Tags: t.Tags, Created: t.Created, Modified: t.Modified}
	if t.Subs != nil {
		r.Subs = make(map[string]record.Subscription, len(t.Subs))
		for id, s := range t.Subs {
			r.Subs[id] = record.Subscription{Protocol: s.Protocol, Endpoint: s.Endpoint, Account: s.Account, Attrs: s.Attrs, Created: s.Created, From: s.From}
		}
	}
	return r
}

func topicOut(r record.TopicInfo) TopicInfo {
	t := TopicInfo{ID: r.ID, Name: r.Name, FIFO: r.FIFO, Attrs: r.Attrs, Tags: r.Tags, Created: r.Created, Modified: r.Modified}
	if r.Subs != nil {
		t.Subs = make(map[string]Subscription, len(r.Subs))
		for id, s := range r.Subs {
			t.Subs[id] = Subscription{Protocol: s.Protocol, Endpoint: s.Endpoint, Account: s.Account, Attrs: s.Attrs, Created: s.Created, From: s.From}
		}
	}
	return t
}

// DeleteTopic deletes a topic and its subscriptions; a topic that does
// not exist is no error.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	return b.e.DeleteTopic(ctx, name)
}

// Topics lists the topics' names, sorted.
func (b *Broker) Topics() []string { return b.e.Topics() }

// Topic returns a topic's settings and subscriptions.
func (b *Broker) Topic(name string) (TopicInfo, error) {
	o, err := b.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	return topicOut(o.Info()), nil
}

// UpdateTopic changes a topic's settings or subscriptions: f edits a copy
// (its error changes nothing), written whole. A ctx that has ended writes
// nothing.
func (b *Broker) UpdateTopic(ctx context.Context, name string, f func(*TopicInfo) error) error {
	if err := ctx.Err(); err != nil { // nothing written
		return err
	}
	o, err := b.topic(name)
	if err != nil {
		return err
	}
	return moving(o.Update(func(r *record.TopicInfo) error {
		t := topicOut(*r)
		if err := f(&t); err != nil {
			return err
		}
		*r = topicIn(t)
		return nil
	}))
}

// Publish publishes messages to a topic in one durable write.
func (b *Broker) Publish(ctx context.Context, name string, in []PublishInput) ([]PublishResult, error) {
	o, err := b.topic(name)
	if err != nil {
		return nil, err
	}
	res, err := o.Publish(ctx, in)
	return res, moving(err)
}

// AllTopics returns the settings and subscriptions of every topic: in a
// cluster, each from the node that owns it (a topic between owners is
// left out).
func (b *Broker) AllTopics(ctx context.Context) []TopicInfo {
	if b.cl != nil {
		return b.cl.gatherTopics(ctx)
	}
	var out []TopicInfo
	for _, name := range b.e.Topics() {
		if o, err := b.e.Topic(name); err == nil {
			out = append(out, topicOut(o.Info()))
		}
	}
	return out
}

// SubscriptionAge is how long one subscription's messages waited from
// their publish to their first receive from its queue.
type SubscriptionAge = engine.OriginAge

// SubscriptionFirstAttempts returns the SubscriptionAge of every
// subscription whose queue this node owns (since it took the queue).
func (b *Broker) SubscriptionFirstAttempts() []SubscriptionAge { return b.e.OriginAges() }

// TopicFigures returns a topic's delivery counters since it was taken here.
func (b *Broker) TopicFigures(name string) (TopicFigures, error) {
	o, err := b.topic(name)
	if err != nil {
		return TopicFigures{}, err
	}
	return o.Figures(), nil
}

// moving turns a topic owner's ErrNotOwner (another node took the topic
// meanwhile, or it was deleted) into a refusal for a while.
func moving(err error) error {
	if errors.Is(err, topic.ErrNotOwner) {
		return &sluicetype.Error{Code: sluicetype.CodeServiceUnavailable, RetryAfter: time.Second,
			Message: "The topic is moving to another owner; retry the request.", Cause: err}
	}
	return err
}

func (b *Broker) topic(name string) (*topic.Owner, error) { return b.e.Topic(name) }

// topicFormat makes the message a subscription's queue gets for a publish,
// as SNS makes it: the JSON envelope, or with RawMessageDelivery the
// message and its attributes. The envelopes of a standard topic whose
// SignatureVersion attribute is set are signed (signing.go); those of a
// topic without it are not (no SignatureVersion, Signature or
// SigningCertURL): an RSA signature costs about a millisecond of CPU a
// publish, more than the rest of its delivery. A publish is signed once
// for all its subscriptions (prepared, below).
func topicFormat(region, account, base string, sign *signkey.Key) topic.Formatter {
	scope := snswire.Scope{Region: region, Account: account}
	plain := snswire.Deliverer{UnsubscribeURL: base + "/"}
	signed := plain
	if sign != nil {
		signed.Signer = sign
	}
	cache := &preparedCache{byKey: map[preparedKey]*snswire.Prepared{}}
	return func(info *record.TopicInfo, subID string, sub record.Subscription, pub *record.Record) (sluicetype.SendInput, error) {
		arn := scope.TopicARN(info.Name)
		t := snswire.ParseTopicSettings(info.Attrs)
		t.FIFO = info.FIFO
		n := snswire.Notification{MessageID: pub.Payload.ID, TopicARN: arn, Subject: pub.Subject, Message: pub.Payload.Body,
			Timestamp: time.UnixMilli(pub.Published).UTC(), SequenceNumber: pub.Payload.SeqNum, GroupID: pub.Group,
			DedupID: pub.Payload.Dedup, Topic: t}
		if pub.JSON {
			n.MessageStructure = "json"
		}
		if len(pub.Payload.Attrs) > 0 {
			n.Attributes = make(map[string]snswire.MessageAttribute, len(pub.Payload.Attrs))
			for name, a := range pub.Payload.Attrs {
				n.Attributes[name] = snswire.MessageAttribute{DataType: a.DataType, StringValue: a.StringValue, BinaryValue: a.BinaryValue}
			}
		}
		target := snswire.Target{SubscriptionARN: arn + ":" + subID, Endpoint: sub.Endpoint,
			Raw: strings.EqualFold(sub.Attrs["RawMessageDelivery"], "true")}
		if t.FIFO || t.SignatureVersion == "" || target.Raw {
			return plain.SQSMessage(n, target)
		}
		p, err := cache.get(preparedKey{info.ID, pub.Number, t.SignatureVersion}, func() (*snswire.Prepared, error) { return signed.Prepare(n) })
		if err != nil {
			return sluicetype.SendInput{}, err
		}
		return p.SQSMessage(target)
	}
}

// preparedKey names a publish of a topic as signed with a version.
type preparedKey struct {
	topic, seq uint64
	version    string
}

// preparedCache keeps the latest signed publishes, so that the
// subscriptions of a topic, delivering in their own rounds, share one
// signature a publish.
type preparedCache struct {
	mu    sync.Mutex
	byKey map[preparedKey]*snswire.Prepared
	order []preparedKey
}

// preparedKept is how many signed publishes preparedCache keeps.
const preparedKept = 4096

func (c *preparedCache) get(k preparedKey, make func() (*snswire.Prepared, error)) (*snswire.Prepared, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.byKey[k]; p != nil {
		return p, nil
	}
	p, err := make()
	if err != nil {
		return nil, err
	}
	c.byKey[k] = p
	c.order = append(c.order, k)
	if len(c.order) > preparedKept {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
	return p, nil
}

// SNSCertificate returns the certificate (PEM) served at path p
// (/SimpleNotificationService-<hex>.pem), which verifies the signatures of
// SNS envelopes: this node's, or in a cluster another node's.
func (b *Broker) SNSCertificate(ctx context.Context, p string) ([]byte, bool) {
	if !signkey.IsCertificatePath(p) {
		return nil, false
	}
	if b.sign != nil {
		if pem, ok := b.sign.Certificate(p); ok {
			return pem, true
		}
	}
	if b.cl != nil {
		return b.cl.certificate(ctx, p)
	}
	return nil, false
}
