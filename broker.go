// Package sluice is the embeddable broker: it opens a data directory, owns
// the queues in it and offers the SQS operations as Go calls. The SQS wire
// front (internal/sqs), the CLI and tests all drive a *Broker.
//
// Queues are named as in SQS (1-80 characters of [A-Za-z0-9_-], FIFO names
// end in ".fifo"); the broker serves one account (Config.AccountID) in one
// region, which it uses to build ARNs.
package sluice

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/sluicetype"
)

// SyncMode says when a write is acknowledged.
type SyncMode string

const (
	// SyncAlways answers a caller only after its records are fsynced (group
	// commit). Nothing acknowledged is lost on a crash or power failure.
	SyncAlways SyncMode = "always"
	// SyncBatch answers after the write reaches the OS and fsyncs every
	// SyncInterval: a power failure (not a process crash) may lose up to one
	// interval of acknowledged writes.
	SyncBatch SyncMode = "batch"
	// SyncNone never fsyncs except at Close: a power failure may lose
	// everything written since the last clean Close or checkpoint.
	SyncNone SyncMode = "none"
)

// Clock is the time source. The broker never calls time.Now directly.
type Clock = clock.Clock

// Timer is a stoppable timer from a Clock.
type Timer = clock.Timer

// Config configures Open. Zero values mean the documented default.
type Config struct {
	// Dir is the data directory; created if missing. Required unless
	// InMemory is set.
	Dir string
	// InMemory keeps everything in memory (the memory store): nothing
	// survives Close. For tests and experiments.
	InMemory bool
	// Sync is the durability mode. Default SyncAlways.
	Sync SyncMode
	// SyncInterval is the fsync period for SyncBatch. Default 10ms.
	SyncInterval time.Duration
	// Region is used in ARNs. Default "us-east-1".
	Region string
	// AccountID is the 12-digit account in ARNs and queue URLs.
	// Default "000000000000".
	AccountID string
	// MaxQueues caps the number of queues. Default 10000.
	MaxQueues int
	// Clock is the time source. Default: the real clock.
	Clock Clock
	// Logger receives structured logs. Default: slog.Default().
	Logger *slog.Logger
	// FS is the file system under Dir. Default: the real one. Tests pass a
	// fault-injecting one.
	FS vfs.FS
	// SegmentBytes is the log segment size. Default 64 MiB.
	SegmentBytes int64
	// NoPreallocate turns off preparing each next segment full of zeros
	// in the background (on by default on the real file system: appends
	// into allocated blocks make an fsync cheaper on ext4 and XFS). Turn it
	// off on copy-on-write file systems (btrfs, ZFS), where the zeros buy
	// nothing.
	NoPreallocate bool
	// CheckpointBytes is how much log since the last checkpoint triggers a
	// new one (or the last checkpoint's size if larger). Default 64 MiB.
	CheckpointBytes int64
	// CompactInterval is the period of compaction rounds, each copying at
	// most 16 MiB of live messages out of mostly-dead segments. Default 1s.
	CompactInterval time.Duration
	// DiskReserve is the free disk space, in bytes, below which new
	// messages are refused (a retryable ServiceUnavailable error naming the
	// free space) while receives, deletes and purges go on, so that a full
	// disk can always be drained; sends resume by themselves once space is
	// back. The reserve in effect is at least twice the newest checkpoint
	// plus one segment. Default 256 MiB; negative: only that minimum.
	DiskReserve int64
}

// QueueInfo is what the broker knows of a queue's identity.
type QueueInfo struct {
	Name string
	ARN  string
	FIFO bool
}

// MoveTask is one message move task as ListMessageMoveTasks reports it.
type MoveTask struct {
	TaskHandle                        string // set while RUNNING only
	Status                            string // RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED
	SourceArn                         string
	DestinationArn                    string
	MaxNumberOfMessagesPerSecond      int // 0 when not set
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove int64
	FailureReason                     string
	StartedTimestamp                  time.Time
}

// Broker owns the queues of one data directory. All methods are safe for
// concurrent use. Errors are *sluicetype.Error values with SQS codes.
type Broker struct {
	impl *broker
}

// Open opens (or creates) the store in cfg.Dir, recovers its queues and
// starts serving.
func Open(cfg Config) (*Broker, error) { return open(cfg) }

// Close stops background work, wakes long polls (they return empty), flushes
// and closes the store.
func (b *Broker) Close() error { return b.impl.close() }

// CreateQueue creates a queue, or returns the existing one when every given
// attribute matches (tags are not compared); QueueNameExists otherwise.
func (b *Broker) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (QueueInfo, error) {
	return b.impl.createQueue(ctx, name, attrs, tags)
}

// GetQueue returns a queue's identity, or QueueDoesNotExist.
func (b *Broker) GetQueue(name string) (QueueInfo, error) { return b.impl.getQueue(name) }

// ListQueues lists queue names with the prefix in name order, at most max
// (1-1000; 0 means 1000) from nextToken on. allow, when not nil, hides queues
// it returns false for. The returned token is "" when nothing remains.
func (b *Broker) ListQueues(prefix string, max int, nextToken string, allow func(name string) bool) ([]string, string, error) {
	return b.impl.listQueues(prefix, max, nextToken, allow)
}

// DeleteQueue deletes a queue and its messages. The name can be reused
// after 60 seconds (QueueDeletedRecently before that).
func (b *Broker) DeleteQueue(ctx context.Context, name string) error {
	return b.impl.deleteQueue(ctx, name)
}

// GetQueueAttributes returns the named attributes ("All" for all) as SQS
// renders them.
func (b *Broker) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	return b.impl.getQueueAttributes(name, names)
}

// SetQueueAttributes validates and sets attributes.
func (b *Broker) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	return b.impl.setQueueAttributes(ctx, name, attrs)
}

// Send sends one message; it returns after the message is durable.
func (b *Broker) Send(ctx context.Context, queue string, in sluicetype.SendInput) (sluicetype.SendResult, error) {
	return b.impl.send(ctx, queue, in)
}

// SendBatch sends up to 10 messages in one durable write. errs[i] is nil
// when entry i succeeded. err is set only when the whole call failed (for
// example QueueDoesNotExist).
func (b *Broker) SendBatch(ctx context.Context, queue string, in []sluicetype.SendInput) (res []sluicetype.SendResult, errs []error, err error) {
	return b.impl.sendBatch(ctx, queue, in)
}

// Receive receives up to in.MaxMessages messages, waiting up to the wait
// time for the first one. It returns early, empty, when ctx is done.
func (b *Broker) Receive(ctx context.Context, queue string, in sluicetype.ReceiveInput) ([]sluicetype.Message, error) {
	return b.impl.receive(ctx, queue, in)
}

// Delete deletes the message a receipt handle names.
func (b *Broker) Delete(ctx context.Context, queue, receiptHandle string) error {
	return b.impl.delete(ctx, queue, receiptHandle)
}

// DeleteBatch deletes several messages in one durable write; errs[i] is nil
// when entry i succeeded.
func (b *Broker) DeleteBatch(ctx context.Context, queue string, receiptHandles []string) (errs []error, err error) {
	return b.impl.deleteBatch(ctx, queue, receiptHandles)
}

// ChangeVisibility sets the message's visibility timeout to seconds from
// now (0-43200).
func (b *Broker) ChangeVisibility(ctx context.Context, queue, receiptHandle string, seconds int) error {
	return b.impl.changeVisibility(ctx, queue, receiptHandle, seconds)
}

// VisibilityChange is one entry of ChangeVisibilityBatch.
type VisibilityChange struct {
	ReceiptHandle string
	Seconds       int
}

// ChangeVisibilityBatch changes several visibility timeouts; errs[i] is nil
// when entry i succeeded.
func (b *Broker) ChangeVisibilityBatch(ctx context.Context, queue string, in []VisibilityChange) (errs []error, err error) {
	return b.impl.changeVisibilityBatch(ctx, queue, in)
}

// Purge deletes every message in the queue (at most once per 60 seconds).
func (b *Broker) Purge(ctx context.Context, queue string) error { return b.impl.purge(ctx, queue) }

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// queue, paged like ListQueues.
func (b *Broker) ListDeadLetterSourceQueues(queue string, max int, nextToken string) ([]string, string, error) {
	return b.impl.listDeadLetterSourceQueues(queue, max, nextToken)
}

// TagQueue adds or overwrites tags.
func (b *Broker) TagQueue(ctx context.Context, queue string, tags map[string]string) error {
	return b.impl.tagQueue(ctx, queue, tags)
}

// UntagQueue removes tags; missing keys are ignored.
func (b *Broker) UntagQueue(ctx context.Context, queue string, keys []string) error {
	return b.impl.untagQueue(ctx, queue, keys)
}

// ListQueueTags returns the queue's tags.
func (b *Broker) ListQueueTags(queue string) (map[string]string, error) {
	return b.impl.listQueueTags(queue)
}

// AddPermission adds a statement to the queue's Policy.
func (b *Broker) AddPermission(ctx context.Context, queue, label string, accountIDs, actions []string) error {
	return b.impl.addPermission(ctx, queue, label, accountIDs, actions)
}

// RemovePermission removes the statement with the label.
func (b *Broker) RemovePermission(ctx context.Context, queue, label string) error {
	return b.impl.removePermission(ctx, queue, label)
}

// StartMoveTask starts moving messages out of a dead-letter queue, to
// destinationArn or (when "") back to each message's source queue, at most
// rate messages per second (0: as fast as the store allows; at most 500).
func (b *Broker) StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (taskHandle string, err error) {
	return b.impl.startMoveTask(ctx, sourceArn, destinationArn, rate)
}

// ListMoveTasks lists the move tasks of a source queue, newest first, at
// most max (1-10; 0 means 1).
func (b *Broker) ListMoveTasks(sourceArn string, max int) ([]MoveTask, error) {
	return b.impl.listMoveTasks(sourceArn, max)
}

// CancelMoveTask cancels a running move task and returns how many messages
// it has moved.
func (b *Broker) CancelMoveTask(ctx context.Context, taskHandle string) (moved int64, err error) {
	return b.impl.cancelMoveTask(ctx, taskHandle)
}

// QueueNameFromARN returns the queue name of an ARN of this broker's
// account and region, or QueueDoesNotExist / ResourceNotFound style errors.
func (b *Broker) QueueNameFromARN(arn string) (string, error) { return b.impl.queueNameFromARN(arn) }
