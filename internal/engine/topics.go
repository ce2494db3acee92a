package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Topics (SNS-compatible fan-out) are partitions of their own, named in
// the catalog apart from queues (TopicCreate, TopicDrop). Their owners
// deliver into the queues of this engine through the queues' origin
// marks. In this release topics run on a single node; a cluster refuses
// them (ErrTopicsClustered) rather than deliver to queues it cannot reach.

// ErrTopicsClustered: topics are not served by a cluster yet.
var ErrTopicsClustered = st.Errorf(st.CodeUnsupportedOperation, "Topics are not available in cluster mode in this release.")

// ErrNoTopic: no topic has the name.
var ErrNoTopic = errors.New("engine: no such topic")

// topicRetry is how soon a topic's delivery tries again a queue that
// could not take its messages for a while.
const topicRetry = 200 * time.Millisecond

// topicHost is what the engine's topic owners share.
func (e *Engine) topicHost() *topic.Host {
	return &topic.Host{Store: e.st, Clock: e.clock, Log: e.log, Queues: topicQueues{e}, Format: e.cfg.TopicFormat}
}

// topicQueues reaches the queues topics deliver into.
type topicQueues struct{ e *Engine }

func (q topicQueues) owner(arn string) (*partition.Owner, error) {
	name, err := q.e.QueueNameFromARN(arn)
	if err != nil {
		return nil, topic.ErrNoQueue
	}
	o, err := q.e.Queue(name)
	if st.CodeOf(err) == st.CodeQueueDoesNotExist {
		return nil, topic.ErrNoQueue
	}
	return o, err
}

func (q topicQueues) Deliver(ctx context.Context, arn string, in []st.SendInput, from []queue.Origin) ([]error, error) {
	o, err := q.owner(arn)
	if err != nil {
		return nil, err
	}
	_, errs, err := o.Send(ctx, in, from, true)
	return errs, err
}

func (q topicQueues) Marks(_ context.Context, arn string) (map[uint64]uint64, error) {
	o, err := q.owner(arn)
	if err != nil {
		return nil, err
	}
	return o.OriginMarks()
}

// startTopicLocked registers a topic's owner and starts its deliveries,
// which end when the engine closes or the topic is deleted.
func (e *Engine) startTopicLocked(name string, o *topic.Owner) {
	e.topics[name], e.topicByPart[o.Partition()] = o, o
	e.topicIDs[name] = o.Partition()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan struct{})
		go func() {
			select {
			case <-e.closing:
				cancel()
			case <-ran: // the topic was deleted: Run ended by itself
			}
		}()
		o.Run(ctx, topicRetry)
		close(ran)
	}()
}

// CreateTopic creates a topic with info (its name, kind, attributes and
// tags), or returns the one of that name (created false: the caller
// compares its settings).
func (e *Engine) CreateTopic(info record.TopicInfo) (o *topic.Owner, created bool, err error) {
	if e.cfg.Clustered {
		return nil, false, ErrTopicsClustered
	}
	e.topicMu.Lock() // one creation or deletion at a time
	defer e.topicMu.Unlock()
	e.mu.Lock()
	if o := e.topics[info.Name]; o != nil {
		e.mu.Unlock()
		return o, false, nil
	}
	p := e.nextPart
	e.nextPart++
	e.mu.Unlock()
	now := e.clock.Now().UnixMilli()
	info.ID, info.Created, info.Modified = uint64(p), now, now
	// As for a queue: the id reserved in the catalog, the topic's own
	// partition written (whole on its own), then the catalog names it.
	if err := e.catalogAppend(&record.Record{Type: record.Catalog, NextPartition: uint64(p) + 1}); err != nil {
		return nil, false, err
	}
	o = topic.NewOwner(e.topicHost(), p, info)
	if err := o.Create(); err != nil {
		return nil, false, err
	}
	if err := e.catalogAppend(&record.Record{Type: record.TopicCreate, Partition: uint64(p), Name: info.Name}); err != nil {
		if last, ok := o.Deleted(); ok {
			e.st.Drop(p, last) // best effort: an orphan partition is dropped at recovery anyway
		}
		return nil, false, err
	}
	e.mu.Lock()
	e.startTopicLocked(info.Name, o)
	e.mu.Unlock()
	return o, true, nil
}

// DeleteTopic deletes a topic and its subscriptions (a topic that does
// not exist is no error, as in SNS).
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	if e.cfg.Clustered {
		return ErrTopicsClustered
	}
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	e.mu.RLock()
	o := e.topics[name]
	e.mu.RUnlock()
	if o == nil {
		return nil
	}
	if err := e.catalogAppend(&record.Record{Type: record.TopicDrop, Partition: uint64(o.Partition()), Name: name}); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.topics, name)
	delete(e.topicByPart, o.Partition())
	delete(e.topicIDs, name)
	e.mu.Unlock()
	if last, ok := o.Deleted(); ok {
		if err := e.st.Drop(o.Partition(), last).Wait(ctx); err != nil {
			e.log.Warn("dropping a deleted topic's partition failed; recovery will", "topic", name, "err", err)
		}
	}
	// The queues it delivered to forget their marks of it.
	for _, q := range e.all() {
		if err := q.ForgetOrigin(ctx, uint64(o.Partition())); err != nil && !errors.Is(err, partition.ErrNotOwner) {
			e.log.Warn("forgetting a deleted topic's mark failed", "topic", name, "queue", q.Meta().Name, "err", err)
		}
	}
	return nil
}

// Topic returns a topic's owner.
func (e *Engine) Topic(name string) (*topic.Owner, error) {
	if e.cfg.Clustered {
		return nil, ErrTopicsClustered
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if o := e.topics[name]; o != nil {
		return o, nil
	}
	return nil, ErrNoTopic
}

// Topics lists the topics' names, sorted.
func (e *Engine) Topics() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return slices.Sorted(maps.Keys(e.topics))
}

// allTopics lists the topics' owners.
func (e *Engine) allTopics() []*topic.Owner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return slices.Collect(maps.Values(e.topics))
}

// isTopicRecord reports whether a record is of a type only topics write.
func isTopicRecord(data []byte) bool {
	return len(data) > 1 && (record.Type(data[1]) == record.TopicMeta || record.Type(data[1]) == record.Publish)
}

// topicOf is the topic owner of partition p, if it is one.
func (e *Engine) topicOf(p store.PartitionID) *topic.Owner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.topicByPart[p]
}
