package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// deliver into their subscriptions' queues through the queues' origin
// marks. In a cluster a topic's partition is owned like a queue's (a
// lease; the catalog's owner creates and deletes), and a queue another
// node owns is reached through its Cluster (Deliver, Marks): the marks are
// the queue's, so a topic that moves to another node delivers on from
// where each queue took it.

// ErrNoTopic: no topic has the name (sluicetype's: one error for every
// layer).
var ErrNoTopic = st.ErrNoTopic

// topicMoving is the refusal for a while of a request for a topic this
// node does not own (another node does, or it is between owners).
func topicMoving() error {
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
		Message: "The topic is moving to another owner; retry the request.", Cause: topic.ErrNotOwner}
}

// topicRetry is how soon a topic's delivery tries again a queue that
// could not take its messages for a while.
const topicRetry = 200 * time.Millisecond

// topicHost is what the engine's topic owners share.
func (e *Engine) topicHost() *topic.Host {
	return &topic.Host{Store: e.st, Clock: e.clock, Log: e.log, Queues: topicQueues{e}, Format: e.cfg.TopicFormat, Fenced: e.topicFenced}
}

// topicQueues reaches the queues topics deliver into: on this node, or
// through the engine's Cluster on the node that owns them.
type topicQueues struct{ e *Engine }

// owner is the queue arn names: its owner here, or (local false) its
// partition on another node.
func (q topicQueues) owner(arn string) (o *partition.Owner, p store.PartitionID, name string, err error) {
	name, err = q.e.QueueNameFromARN(arn)
	if err != nil {
		return nil, 0, "", topic.ErrNoQueue
	}
	o, err = q.e.Queue(name)
	switch {
	case err == nil:
		return o, 0, name, nil
	case st.CodeOf(err) == st.CodeQueueDoesNotExist:
		return nil, 0, "", topic.ErrNoQueue
	case !q.e.clustered:
		return nil, 0, "", err
	}
	p, local, rerr := q.e.Route(name)
	switch {
	case st.CodeOf(rerr) == st.CodeQueueDoesNotExist:
		return nil, 0, "", topic.ErrNoQueue
	case rerr != nil:
		return nil, 0, "", rerr
	case local: // taken here meanwhile
		o, err = q.e.Queue(name)
		return o, 0, name, err
	}
	return nil, p, name, nil
}

func (q topicQueues) Deliver(ctx context.Context, arn string, in []st.SendInput, from []queue.Origin) ([]error, error) {
	o, p, name, err := q.owner(arn)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return q.e.cl.Deliver(ctx, p, name, in, from)
	}
	_, errs, err := o.Deliver(ctx, in, from)
	return errs, err
}

func (q topicQueues) Marks(ctx context.Context, arn string) (map[uint64]uint64, error) {
	o, p, name, err := q.owner(arn)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return q.e.cl.Marks(ctx, p, name)
	}
	return o.OriginMarks()
}

// firstAttempt tells each topic of the first receives of messages
// delivered from its publishes (in a cluster, a topic another node owns
// through the Cluster).
func (e *Engine) firstAttempt(from []queue.Origin, at time.Time) {
	var remote []queue.Origin
	for _, f := range from {
		if t := e.topicOf(store.PartitionID(f.Partition)); t != nil {
			t.FirstAttempt(f, at)
		} else {
			remote = append(remote, f)
		}
	}
	if len(remote) > 0 {
		e.cl.FirstAttempt(remote, at)
	}
}

// OriginAge is how long one subscription's messages waited from their
// publish to their first receive: a queue this node owns, a topic it
// delivers from.
type OriginAge struct {
	Topic, Queue string
	Age          st.AgeHistogram
}

// OriginAges returns the OriginAge of every queue this node owns and
// every topic that delivered to it (as far as this node knows the
// topics' names).
func (e *Engine) OriginAges() []OriginAge {
	e.mu.RLock()
	names := make(map[store.PartitionID]string, len(e.topicIDs))
	for n, p := range e.topicIDs {
		names[p] = n
	}
	e.mu.RUnlock()
	var out []OriginAge
	for _, q := range e.all() {
		for p, h := range q.OriginFirstAttempts() {
			if n, ok := names[store.PartitionID(p)]; ok {
				out = append(out, OriginAge{Topic: n, Queue: q.Meta().Name, Age: h})
			}
		}
	}
	slices.SortFunc(out, func(a, b OriginAge) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.Queue, b.Queue))
	})
	return out
}

// forgetHere makes the queues this node owns forget their marks of a
// deleted topic's partition.
func (e *Engine) forgetHere(ctx context.Context, origin store.PartitionID) {
	for _, q := range e.all() {
		if err := q.ForgetOrigin(ctx, uint64(origin)); err != nil && !errors.Is(err, partition.ErrNotOwner) {
			e.log.Warn("forgetting a deleted topic's mark failed", "partition", origin, "queue", q.Meta().Name, "err", err)
		}
	}
}

// forgetEverywhere makes every queue forget a deleted topic's marks: this
// node's, and in a cluster the other nodes' too.
func (e *Engine) forgetEverywhere(ctx context.Context, origin store.PartitionID) {
	e.forgetHere(ctx, origin)
	e.cl.ForgetOrigin(ctx, origin)
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
// compares its settings). In a cluster the catalog's owner creates, and
// owns the new topic until the cluster places it elsewhere; a topic
// another node owns is topicMoving here (its owner answers).
func (e *Engine) CreateTopic(info record.TopicInfo) (o *topic.Owner, created bool, err error) {
	e.topicMu.Lock() // one creation or deletion at a time
	defer e.topicMu.Unlock()
	e.mu.Lock()
	if o := e.topics[info.Name]; o != nil {
		e.mu.Unlock()
		return o, false, nil
	}
	if !e.catOwned && e.clustered {
		e.mu.Unlock()
		return nil, false, partition.NotOwner()
	}
	if _, ok := e.topicIDs[info.Name]; ok {
		e.mu.Unlock()
		return nil, false, topicMoving()
	}
	p := e.nextPart
	e.nextPart++
	e.mu.Unlock()
	now := e.clock.Now().UnixMilli()
	info.ID, info.Created, info.Modified = uint64(p), now, now
	// As for a queue: the id reserved in the catalog, the lease taken (in
	// a cluster), the topic's own partition written (whole on its own),
	// then the catalog names it.
	o = topic.NewOwner(e.topicHost(), p, info)
	err = e.catalogAppend(&record.Record{Type: record.Catalog, NextPartition: uint64(p) + 1})
	if err == nil {
		err = e.claim(p)
	}
	if err == nil {
		err = o.Create()
	}
	if err == nil {
		err = e.catalogAppend(&record.Record{Type: record.TopicCreate, Partition: uint64(p), Name: info.Name})
	}
	if err != nil {
		if last, ok := o.Deleted(); ok {
			e.st.Drop(p, last) // best effort: an orphan partition is dropped at recovery anyway
		}
		return nil, false, err
	}
	e.mu.Lock()
	e.startTopicLocked(info.Name, o)
	e.mu.Unlock()
	e.catalogChanged()
	e.cl.Created(p)
	return o, true, nil
}

// DeleteTopic deletes a topic and its subscriptions (a topic that does
// not exist is no error, as in SNS). In a cluster the catalog's owner
// deletes; the topic's owner, if another node, drops its partition when
// its view of the catalog loses the topic.
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	e.mu.RLock()
	p, ok := e.topicIDs[name]
	owned := e.catOwned || !e.clustered
	e.mu.RUnlock()
	if !ok {
		return nil
	}
	if !owned {
		return partition.NotOwner()
	}
	if err := e.catalogAppend(&record.Record{Type: record.TopicDrop, Partition: uint64(p), Name: name}); err != nil {
		return err
	}
	e.mu.Lock()
	o := e.topicByPart[p]
	if e.topicIDs[name] == p {
		delete(e.topicIDs, name)
	}
	if o != nil {
		delete(e.topics, name)
		delete(e.topicByPart, p)
	}
	e.mu.Unlock()
	e.catalogChanged()
	if o != nil {
		e.dropTopic(ctx, name, o)
	} else {
		// Owned elsewhere (it drops the partition and tells the queues
		// again once its deliveries stopped), or by no one now.
		e.forgetEverywhere(ctx, p)
	}
	return nil
}

// dropTopic ends a deleted topic's owner, drops its partition, and makes
// the queues it delivered to forget their marks of it.
func (e *Engine) dropTopic(ctx context.Context, name string, o *topic.Owner) {
	if last, ok := o.Deleted(); ok {
		if err := e.st.Drop(o.Partition(), last).Wait(ctx); err != nil {
			e.log.Warn("dropping a deleted topic's partition failed; recovery will", "topic", name, "err", err)
		}
	}
	e.forgetEverywhere(ctx, o.Partition())
}

// Topic returns a topic's owner: ErrNoTopic when there is no such topic,
// topicMoving when another node of the cluster owns it.
func (e *Engine) Topic(name string) (*topic.Owner, error) {
	for try := 0; try < 2; try++ {
		e.mu.RLock()
		o := e.topics[name]
		_, known := e.topicIDs[name]
		e.mu.RUnlock()
		switch {
		case o != nil:
			return o, nil
		case known:
			return nil, topicMoving()
		case !e.clustered || e.ownsCatalog():
			return nil, ErrNoTopic
		}
		e.refreshForMiss() // created on another node a moment ago?
	}
	return nil, ErrNoTopic
}

// RouteTopic says where a topic is served: its partition, and whether
// this engine owns it; ErrNoTopic when no node has it.
func (e *Engine) RouteTopic(name string) (p store.PartitionID, local bool, err error) {
	for try := 0; try < 2; try++ {
		e.mu.RLock()
		p, ok := e.topicIDs[name]
		o := e.topics[name]
		e.mu.RUnlock()
		if ok {
			return p, o != nil, nil
		}
		if !e.clustered || e.ownsCatalog() {
			break
		}
		e.refreshForMiss()
	}
	return 0, false, ErrNoTopic
}

// Topics lists every topic's name (in a cluster, as far as this node's
// view of the catalog goes), sorted.
func (e *Engine) Topics() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return slices.Sorted(maps.Keys(e.topicIDs))
}

// allTopics lists the owners of the topics this node owns.
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

// isTopic reports whether partition p is a topic's, as far as this node's
// view of the catalog goes.
func (e *Engine) isTopic(p store.PartitionID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, tp := range e.topicIDs {
		if tp == p {
			return true
		}
	}
	return false
}

// acquireTopic makes this engine the owner of topic partition p under
// term: it replays p, writes its epoch record, and delivers.
func (e *Engine) acquireTopic(p store.PartitionID, term uint64) error {
	o, err := topic.Acquire(e.topicHost(), p, e.cfg.Node, term)
	if err != nil {
		return err
	}
	name := o.Info().Name
	e.mu.Lock()
	if old := e.topicByPart[p]; old != nil && old != o {
		e.mu.Unlock()
		o.Relinquish()
		return fmt.Errorf("engine: partition %d is owned here already", p)
	}
	if _, ok := e.topicIDs[name]; !ok && !e.catOwned {
		e.topicIDs[name] = p // the view lags the catalog's owner
	}
	e.startTopicLocked(name, o)
	e.mu.Unlock()
	e.log.Info("acquired a topic's partition", "topic", name, "partition", p, "term", term)
	return nil
}

// releaseTopic stops owning topic partition p (o: its owner here):
// another node takes it over. It reports whether o was the owner this
// engine served p with.
func (e *Engine) releaseTopic(p store.PartitionID, o *topic.Owner) bool {
	e.mu.Lock()
	mine := e.topicByPart[p] == o
	if mine {
		delete(e.topicByPart, p)
		if name := o.Info().Name; e.topics[name] == o {
			delete(e.topics, name)
		}
	}
	e.mu.Unlock()
	o.Relinquish()
	if mine {
		e.st.Leave(p)
	}
	return mine
}

// topicFenced forgets a topic another node's owner fenced off here; as
// with a queue's (lost), only the owner this engine serves the topic with
// loses the lease.
func (e *Engine) topicFenced(o *topic.Owner) {
	if !e.clustered {
		e.log.Error("a topic's write was fenced on a single node; it does not deliver until a restart", "partition", o.Partition())
		return
	}
	if !e.releaseTopic(o.Partition(), o) {
		e.log.Info("a topic owner this node does not serve with was fenced", "partition", o.Partition())
		return
	}
	e.log.Warn("another node took a topic over", "partition", o.Partition())
	e.cl.Lost(o.Partition())
}
