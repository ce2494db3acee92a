// Package sluice is the embeddable broker: it opens a data directory (or a
// store in memory), owns the queues and topics in it and offers the SQS and
// SNS operations as Go calls.
//
// This package is what an embedder uses and nothing else: Config, Open,
// Verify and the Broker's operations on queues, messages, tenants,
// dead-letter tools and topics. The server is assembled in
// internal/broker, which the protocol fronts (internal/sqs, internal/sns,
// internal/admin) and the command line drive; a Broker here is one of
// those with only its public operations. docs/architecture.md describes the
// packages, the message lifecycle and the store seam.
//
// Queues are named as in SQS (1-80 characters of [A-Za-z0-9_-], FIFO names
// end in ".fifo"); the broker serves one account (Config.AccountID) in one
// region, which it uses to build ARNs.
package sluice

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/sluicetype"
)

// Config configures Open; ClusterConfig makes the broker a node of a
// cluster (Config.Cluster). Zero values mean the documented default.
type (
	Config        = broker.Config
	ClusterConfig = broker.ClusterConfig
	// SyncMode says when a write is acknowledged.
	SyncMode = broker.SyncMode
	// Clock is the time source (Config.Clock); Timer a stoppable timer
	// from it.
	Clock = broker.Clock
	Timer = broker.Timer
)

// The sync modes (Config.Sync).
const (
	SyncAlways = broker.SyncAlways
	SyncBatch  = broker.SyncBatch
	SyncNone   = broker.SyncNone
)

// The public types, defined in the leaf package sluicetype.
type (
	QueueInfo        = sluicetype.QueueInfo
	MoveTask         = sluicetype.MoveTask
	VisibilityChange = sluicetype.VisibilityChange
	PeekFilter       = sluicetype.PeekFilter
	PeekedMessage    = sluicetype.PeekedMessage
	TenantLimits     = sluicetype.TenantLimits
	TenantInfo       = sluicetype.TenantInfo
	QueueStats       = sluicetype.QueueStats
	StoreStats       = sluicetype.StoreStats
	VerifyReport     = sluicetype.VerifyReport
	QueueCheck       = sluicetype.QueueCheck
	SalvageReport    = sluicetype.SalvageReport
)

// The topic types.
type (
	TopicInfo     = sluicetype.TopicInfo
	Subscription  = sluicetype.Subscription
	PublishInput  = broker.PublishInput
	PublishResult = broker.PublishResult
	TopicFigures  = broker.TopicFigures
)

var (
	// ErrDamaged: the data directory holds damaged data; Open refuses it
	// unless Config.Salvage is set (see Verify).
	ErrDamaged = broker.ErrDamaged
	// ErrNoTopic: no topic has the name.
	ErrNoTopic = broker.ErrNoTopic
)

// Broker owns the queues and topics of one data directory (or of one node
// of a cluster). All methods are safe for concurrent use. Errors are
// *sluicetype.Error values with SQS codes.
type Broker struct{ b *broker.Broker }

// Open opens (or creates) the store, recovers its queues and starts
// serving.
func Open(cfg Config) (*Broker, error) { return OpenContext(context.Background(), cfg) }

// OpenContext is Open that gives up when ctx ends: a cluster node waits
// for a JetStream quorum (ClusterConfig.ReadyTimeout bounds it too), and
// a signal that stops the process should stop that wait.
func OpenContext(ctx context.Context, cfg Config) (*Broker, error) {
	b, err := broker.OpenContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Broker{b}, nil
}

// Verify checks the data directory cfg names while no broker serves it,
// and with cfg.Salvage salvages it first (see broker.Verify: every frame of
// every segment and snapshot read, every queue rebuilt, every live body
// read back; nothing written but the salvage).
func Verify(cfg Config) (VerifyReport, error) { return broker.Verify(cfg) }

// Salvaged is what the salvage of a broker opened with Config.Salvage
// found and lost: nil when there was no damage (or no salvage).
func (b *Broker) Salvaged() *SalvageReport {
	return b.b.Salvaged()
}

// Close stops background work, wakes long polls (they return empty), and
// flushes and closes the store.
func (b *Broker) Close() error {
	return b.b.Close()
}

// CreateQueue creates a queue, or returns the existing one when every given
// attribute matches (tags are not compared); QueueNameExists otherwise.
// The ctx's authorizer (sluicetype.WithAuthorizer) must allow every queue
// the attributes name (a dead-letter target).
func (b *Broker) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (QueueInfo, error) {
	return b.b.CreateQueue(ctx, name, attrs, tags)
}

// GetQueue returns a queue's identity, or QueueDoesNotExist.
func (b *Broker) GetQueue(name string) (QueueInfo, error) {
	return b.b.GetQueue(name)
}

// ListQueues lists queue names with the prefix in name order, at most max
// (1-1000; 0 means 1000) from nextToken on. allow, when not nil, hides queues
// it returns false for. The returned token is "" when nothing remains.
func (b *Broker) ListQueues(prefix string, max int, nextToken string, allow func(name string) bool) ([]string, string, error) {
	return b.b.ListQueues(prefix, max, nextToken, allow)
}

// DeleteQueue deletes a queue and its messages. The name can be reused
// after 60 seconds (QueueDeletedRecently before that).
func (b *Broker) DeleteQueue(ctx context.Context, name string) error {
	return b.b.DeleteQueue(ctx, name)
}

// GetQueueAttributes returns the named attributes ("All" for all) as SQS
// renders them.
func (b *Broker) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	return b.b.GetQueueAttributes(name, names)
}

// SetQueueAttributes validates and sets attributes.
func (b *Broker) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	return b.b.SetQueueAttributes(ctx, name, attrs)
}

// Send sends one message; it returns after the message is durable.
func (b *Broker) Send(ctx context.Context, queue string, in sluicetype.SendInput) (sluicetype.SendResult, error) {
	return b.b.Send(ctx, queue, in)
}

// SendBatch sends several messages in one durable write (SQS allows 1 to
// 10, which its wire front checks; their total size is checked here).
// errs[i] is nil when entry i succeeded. err is set only when the whole
// call failed (for example QueueDoesNotExist).
func (b *Broker) SendBatch(ctx context.Context, queue string, in []sluicetype.SendInput) (res []sluicetype.SendResult, errs []error, err error) {
	return b.b.SendBatch(ctx, queue, in)
}

// Receive receives up to in.MaxMessages messages, waiting up to the wait
// time for the first one. It returns early, empty, when ctx is done.
func (b *Broker) Receive(ctx context.Context, queue string, in sluicetype.ReceiveInput) ([]sluicetype.Message, error) {
	return b.b.Receive(ctx, queue, in)
}

// Delete deletes the message a receipt handle names.
func (b *Broker) Delete(ctx context.Context, queue, receiptHandle string) error {
	return b.b.Delete(ctx, queue, receiptHandle)
}

// DeleteBatch deletes several messages in one durable write; errs[i] is nil
// when entry i succeeded.
func (b *Broker) DeleteBatch(ctx context.Context, queue string, receiptHandles []string) (errs []error, err error) {
	return b.b.DeleteBatch(ctx, queue, receiptHandles)
}

// ChangeVisibility sets the message's visibility timeout to seconds from
// now (0-43200).
func (b *Broker) ChangeVisibility(ctx context.Context, queue, receiptHandle string, seconds int) error {
	return b.b.ChangeVisibility(ctx, queue, receiptHandle, seconds)
}

// ChangeVisibilityBatch changes several visibility timeouts; errs[i] is nil
// when entry i succeeded.
func (b *Broker) ChangeVisibilityBatch(ctx context.Context, queue string, in []VisibilityChange) (errs []error, err error) {
	return b.b.ChangeVisibilityBatch(ctx, queue, in)
}

// Purge deletes every message in the queue (at most once per 60 seconds).
func (b *Broker) Purge(ctx context.Context, queue string) error {
	return b.b.Purge(ctx, queue)
}

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// queue, paged like ListQueues.
func (b *Broker) ListDeadLetterSourceQueues(queue string, max int, nextToken string) ([]string, string, error) {
	return b.b.ListDeadLetterSourceQueues(queue, max, nextToken)
}

// TagQueue adds or overwrites tags.
func (b *Broker) TagQueue(ctx context.Context, queue string, tags map[string]string) error {
	return b.b.TagQueue(ctx, queue, tags)
}

// UntagQueue removes tags; missing keys are ignored.
func (b *Broker) UntagQueue(ctx context.Context, queue string, keys []string) error {
	return b.b.UntagQueue(ctx, queue, keys)
}

// ListQueueTags returns the queue's tags.
func (b *Broker) ListQueueTags(queue string) (map[string]string, error) {
	return b.b.ListQueueTags(queue)
}

// AddPermission adds a statement to the queue's Policy.
func (b *Broker) AddPermission(ctx context.Context, queue, label string, accountIDs, actions []string) error {
	return b.b.AddPermission(ctx, queue, label, accountIDs, actions)
}

// RemovePermission removes the statement with the label.
func (b *Broker) RemovePermission(ctx context.Context, queue, label string) error {
	return b.b.RemovePermission(ctx, queue, label)
}

// StartMoveTask starts moving messages out of a dead-letter queue, to
// destinationArn or (when "") back to each message's source queue, at most
// rate messages per second (0: as fast as the store allows; at most 500).
func (b *Broker) StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (taskHandle string, err error) {
	return b.b.StartMoveTask(ctx, sourceArn, destinationArn, rate)
}

// ListMoveTasks lists the move tasks of a source queue, newest first, at
// most max (1-10; 0 means 1).
func (b *Broker) ListMoveTasks(ctx context.Context, sourceArn string, max int) ([]MoveTask, error) {
	return b.b.ListMoveTasks(ctx, sourceArn, max)
}

// CancelMoveTask cancels a running move task and returns how many messages
// it has moved.
func (b *Broker) CancelMoveTask(ctx context.Context, taskHandle string) (moved int64, err error) {
	return b.b.CancelMoveTask(ctx, taskHandle)
}

// WaitMoveTask waits until a move task (StartMoveTask, StartRedrive) has
// ended, and returns it as it ended: Status COMPLETED, CANCELLED or
// FAILED. It returns ctx's error if ctx ends first.
func (b *Broker) WaitMoveTask(ctx context.Context, taskHandle string) (MoveTask, error) {
	return b.b.WaitMoveTask(ctx, taskHandle)
}

// QueueNameFromARN returns the queue name of an ARN of this broker's
// account, or an SQS error.
func (b *Broker) QueueNameFromARN(arn string) (string, error) {
	return b.b.QueueNameFromARN(arn)
}

// RetryMessage fails a received message on the consumer's word: it climbs
// the queue's retry ladder (RetryDelays), waiting delaySeconds instead of
// the level's delay when not nil; without a ladder it becomes visible
// again after delaySeconds (0 when nil). reason travels with the message
// (SluiceLastError).
func (b *Broker) RetryMessage(ctx context.Context, queue, receiptHandle string, delaySeconds *int, reason string) error {
	return b.b.RetryMessage(ctx, queue, receiptHandle, delaySeconds, reason)
}

// RejectMessage fails a received message for good: it goes to the
// dead-letter queue at once (or is dropped when there is none), with its
// reason.
func (b *Broker) RejectMessage(ctx context.Context, queue, receiptHandle, reason string) error {
	return b.b.RejectMessage(ctx, queue, receiptHandle, reason)
}

// DeferMessage puts a received message off for delaySeconds without
// counting it as a failure or as a receive.
func (b *Broker) DeferMessage(ctx context.Context, queue, receiptHandle string, delaySeconds int) error {
	return b.b.DeferMessage(ctx, queue, receiptHandle, delaySeconds)
}

// SetTenantLimits sets (or, with a zero value, clears) one tenant's
// overrides on a queue. They are stored with the queue.
func (b *Broker) SetTenantLimits(ctx context.Context, queue, tenant string, l TenantLimits) error {
	return b.b.SetTenantLimits(ctx, queue, tenant, l)
}

// Tenants lists the tenants of a queue that hold messages, largest backlog
// first, at most max (0: all).
func (b *Broker) Tenants(queue string, max int) ([]TenantInfo, error) {
	return b.b.Tenants(queue, max)
}

// Tenant describes one tenant of a queue, including the partitions it
// hashes to, whether or not it holds messages.
func (b *Broker) Tenant(queue, tenant string) (TenantInfo, error) {
	return b.b.Tenant(queue, tenant)
}

// DropBefore drops every message of a queue sent before t, of one tenant
// (all when allTenants): the watermark. The drops are durable and the
// storage is reclaimed. It returns how many were dropped.
func (b *Broker) DropBefore(ctx context.Context, queue string, before time.Time, tenant string, allTenants bool) (int, error) {
	return b.b.DropBefore(ctx, queue, before, tenant, allTenants)
}

// Stats returns every queue's figures (for metrics and the dashboard).
func (b *Broker) Stats() []QueueStats {
	return b.b.Stats()
}

// StoreStats returns the store's figures.
func (b *Broker) StoreStats() StoreStats {
	return b.b.StoreStats()
}

// Peek lists messages of a queue without receiving them (they stay where
// they are, their receive counts untouched), oldest first.
func (b *Broker) Peek(queue string, f PeekFilter) ([]PeekedMessage, string, error) {
	return b.b.Peek(queue, f)
}

// PurgeFiltered deletes the messages that match the filter (Max and After
// are ignored) and returns how many. With an empty filter it deletes
// everything, like PurgeQueue but at once.
func (b *Broker) PurgeFiltered(ctx context.Context, queue string, f PeekFilter) (int, error) {
	return b.b.PurgeFiltered(ctx, queue, f)
}

// RedriveFiltered moves the messages that match the filter to dest (a
// queue name; "" sends each back to the queue it was dead-lettered from),
// with their receive counts and retry levels reset. It returns how many
// moved.
func (b *Broker) RedriveFiltered(ctx context.Context, queue string, f PeekFilter, dest string) (int, error) {
	return b.b.RedriveFiltered(ctx, queue, f, dest)
}

// StartRedrive starts a message move task over the messages of a queue
// that match the filter (index fields only), to dest (a queue name; ""
// sends each back to the queue it was dead-lettered from), at most rate
// messages a second (0: unlimited). Its progress shows in ListMoveTasks;
// CancelMoveTask stops it.
func (b *Broker) StartRedrive(ctx context.Context, queue string, f PeekFilter, dest string, rate int) (string, error) {
	return b.b.StartRedrive(ctx, queue, f, dest, rate)
}

// Snapshot renews every queue's snapshot now (the broker does it by
// itself as its log grows; for tools, backups and tests). A ctx that has
// ended writes nothing.
func (b *Broker) Snapshot(ctx context.Context) error {
	return b.b.Snapshot(ctx)
}

// CreateTopic creates a topic with info's name, kind, attributes and tags,
// or returns the existing one of that name (created false: compare its
// settings). A ctx that has ended writes nothing.
func (b *Broker) CreateTopic(ctx context.Context, info TopicInfo) (TopicInfo, bool, error) {
	return b.b.CreateTopic(ctx, info)
}

// DeleteTopic deletes a topic and its subscriptions; a topic that does
// not exist is no error.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	return b.b.DeleteTopic(ctx, name)
}

// Topics lists the topics' names, sorted.
func (b *Broker) Topics() []string {
	return b.b.Topics()
}

// Topic returns a topic's settings and subscriptions.
func (b *Broker) Topic(name string) (TopicInfo, error) {
	return b.b.Topic(name)
}

// UpdateTopic changes a topic's settings or subscriptions: f edits a copy
// (its error changes nothing), written whole. A ctx that has ended writes
// nothing.
func (b *Broker) UpdateTopic(ctx context.Context, name string, f func(*TopicInfo) error) error {
	return b.b.UpdateTopic(ctx, name, f)
}

// Publish publishes messages to a topic in one durable write.
func (b *Broker) Publish(ctx context.Context, name string, in []PublishInput) ([]PublishResult, error) {
	return b.b.Publish(ctx, name, in)
}

// AllTopics returns the settings and subscriptions of every topic: in a
// cluster, each from the node that owns it (a topic between owners is
// left out).
func (b *Broker) AllTopics(ctx context.Context) []TopicInfo {
	return b.b.AllTopics(ctx)
}

// TopicFigures returns a topic's delivery counters since it was taken here.
func (b *Broker) TopicFigures(name string) (TopicFigures, error) {
	return b.b.TopicFigures(name)
}

// ClusterStatus is the cluster as this node sees it (nil outside a
// cluster): its members, each queue's owner, failovers.
func (b *Broker) ClusterStatus() *sluicetype.ClusterStatus {
	return b.b.ClusterStatus()
}

// ClusterStats returns the figures of every queue of the cluster, each
// from the node that owns it (Stats: only this node's); outside a
// cluster, Stats.
func (b *Broker) ClusterStats(ctx context.Context) []QueueStats {
	return b.b.ClusterStats(ctx)
}
