package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Cluster is what the engine asks of the cluster it is a node of
// (Config.Cluster): the leases, the other nodes' queues and their
// answers. Single is the no cluster of one node. Answers is the other
// side of each call: what this node answers when another node's engine
// asks it (Sources, Settings, Deliver, Marks, ForgetOrigin, FirstAttempt;
// and Topics, for the cluster's views).
type Cluster interface {
	// Claim takes the lease of a partition this node creates (a queue's,
	// on the catalog's owner) and returns its term.
	Claim(p store.PartitionID) (term uint64, err error)
	// Created says that the partition Claim took holds its queue now (its
	// settings are written, and the catalog names it).
	Created(p store.PartitionID)
	// Lost says that this node no longer owns p: another node fenced its
	// owner off, or its queue was deleted.
	Lost(p store.PartitionID)
	// CatalogChanged tells the other nodes that the catalog changed.
	CatalogChanged()
	// Remote reaches a queue another node owns, for hand-overs into it
	// (dead-letter moves, redrives); nil when it cannot.
	Remote(p store.PartitionID, name string) partition.Destination
	// Sources lists the queues of every node (this one's included) whose
	// dead-letter queue is arn: a queue's RedrivePolicy is in its own
	// partition, which its owner reads. ok is false when only this node's
	// own queues are to be asked (a single node).
	Sources(arn string) (names []string, ok bool)
	// Settings asks the node that owns queue name for the queue's
	// attributes (its own partition holds them); ok is false when that
	// node did not answer.
	Settings(ctx context.Context, name string) (attrs map[string]string, ok bool)
	// Deliver and Marks reach queue name, on partition p, which another
	// node owns, for a topic's deliveries (topic.Queues says what they
	// do).
	Deliver(ctx context.Context, p store.PartitionID, name string, in []st.SendInput, from []queue.Origin) ([]error, error)
	Marks(ctx context.Context, p store.PartitionID, name string) (map[uint64]uint64, error)
	// ForgetOrigin makes the queues of the other nodes forget their marks
	// of a deleted topic's partition.
	ForgetOrigin(ctx context.Context, origin store.PartitionID)
	// FirstAttempt tells the nodes that own the topics of the first
	// receives here (at) of messages delivered from their publishes
	// (figures only: it may be lost).
	FirstAttempt(from []queue.Origin, at time.Time)
}

// Single is the Cluster of an engine that is no node of one: nothing to
// tell, nobody else to ask.
type Single struct{}

func (Single) Claim(store.PartitionID) (uint64, error)                    { return 0, nil }
func (Single) Created(store.PartitionID)                                  {}
func (Single) Lost(store.PartitionID)                                     {}
func (Single) CatalogChanged()                                            {}
func (Single) Remote(store.PartitionID, string) partition.Destination     { return nil }
func (Single) Sources(string) ([]string, bool)                            { return nil, false }
func (Single) Settings(context.Context, string) (map[string]string, bool) { return nil, false }
func (Single) ForgetOrigin(context.Context, store.PartitionID)            {}
func (Single) FirstAttempt([]queue.Origin, time.Time)                     {}
func (Single) Marks(context.Context, store.PartitionID, string) (map[uint64]uint64, error) {
	return nil, partition.NotOwner()
}
func (Single) Deliver(context.Context, store.PartitionID, string, []st.SendInput, []queue.Origin) ([]error, error) {
	return nil, partition.NotOwner()
}

// Answers is this node's side of the Cluster calls another node makes
// (its cluster code serves them): each method answers for what this node
// owns, for the Cluster method of the same name on the node that asks.
type Answers struct{ e *Engine }

// Answers returns what this node answers the other nodes.
func (e *Engine) Answers() Answers { return Answers{e} }

// Sources lists the queues this node owns whose dead-letter queue is arn.
func (a Answers) Sources(arn string) []string { return a.e.sourcesHere(arn) }

// Settings returns the attributes of queue name if this node owns it.
func (a Answers) Settings(name string) (map[string]string, bool) {
	o, err := a.e.Queue(name)
	if err != nil {
		return nil, false
	}
	return maps.Clone(o.Meta().Attrs), true
}

// Deliver delivers a topic's messages into the queue of partition p as
// this node owns it now (partition.ErrNotOwner if it does not).
func (a Answers) Deliver(ctx context.Context, p store.PartitionID, in []st.SendInput, from []queue.Origin) ([]error, error) {
	o := a.e.Owner(p)
	if o == nil {
		return nil, partition.NotOwner()
	}
	_, errs, err := o.Deliver(ctx, in, from)
	return errs, err
}

// Marks returns the origin marks of the queue of partition p as this node
// owns it now: see Deliver.
func (a Answers) Marks(p store.PartitionID) (map[uint64]uint64, error) {
	o := a.e.Owner(p)
	if o == nil {
		return nil, partition.NotOwner()
	}
	return o.OriginMarks()
}

// ForgetOrigin makes the queues this node owns forget their marks of a
// deleted topic's partition.
func (a Answers) ForgetOrigin(ctx context.Context, origin store.PartitionID) {
	a.e.forgetHere(ctx, origin)
}

// FirstAttempt notes first receives (at) on another node of messages
// delivered from topic partition p's publishes, if this node owns it.
func (a Answers) FirstAttempt(p store.PartitionID, from []queue.Origin, at time.Time) {
	if t := a.e.topicOf(p); t != nil {
		for _, f := range from {
			t.FirstAttempt(f, at)
		}
	}
}

// Topics returns the settings and subscriptions of the topics this node
// owns, sorted by name.
func (a Answers) Topics() []record.TopicInfo {
	var out []record.TopicInfo
	for _, o := range a.e.allTopics() {
		out = append(out, o.Info())
	}
	slices.SortFunc(out, func(a, b record.TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ownsCatalog reports whether this engine writes the catalog.
func (e *Engine) ownsCatalog() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.catOwned
}

// claim takes the lease of a partition this node creates.
func (e *Engine) claim(p store.PartitionID) error {
	if _, err := e.cl.Claim(p); err != nil {
		return fmt.Errorf("engine: taking the lease of new partition %d: %w", p, err)
	}
	return nil
}

// catalogChanged tells the other nodes of a cluster.
func (e *Engine) catalogChanged() {
	e.cl.CatalogChanged()
}

// Partitions lists the partitions that need an owner: the catalog and
// every queue's and topic's (as far as this node's view of the catalog
// goes).
func (e *Engine) Partitions() []store.PartitionID {
	e.mu.RLock()
	out := make([]store.PartitionID, 0, len(e.names)+len(e.topicIDs)+1)
	out = append(out, store.Catalog)
	for _, p := range e.names {
		out = append(out, p)
	}
	for _, p := range e.topicIDs {
		out = append(out, p)
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Acquire makes this engine the owner of partition p under term (the
// lease's revision): it replays p, writes its epoch record, and serves.
// For the catalog, the view becomes the catalog itself.
func (e *Engine) Acquire(p store.PartitionID, term uint64) error {
	if p == store.Catalog {
		return e.acquireCatalog(term)
	}
	if !e.isTopic(p) && !e.isQueue(p) {
		e.CatalogChanged() // the view lags the catalog's owner
	}
	if e.isTopic(p) {
		return e.acquireTopic(p, term)
	}
	o, missing, err := partition.Acquire(e.host, p, e.clock.Now(), e.cfg.Node, term)
	if err != nil {
		return err
	}
	name := o.Meta().Name
	if name == "" {
		o.Relinquish()
		return fmt.Errorf("engine: partition %d holds no queue", p)
	}
	e.mu.Lock()
	if old := e.byPart[p]; old != nil && old != o {
		e.mu.Unlock()
		o.Relinquish()
		return fmt.Errorf("engine: partition %d is owned here already", p)
	}
	e.queues[name], e.byPart[p] = o, o
	if _, ok := e.names[name]; !ok && !e.catOwned {
		e.names[name] = p // the view lags the catalog's owner
	}
	e.mu.Unlock()
	o.Start()
	e.log.Info("acquired a queue's partition", "queue", name, "partition", p, "term", term, "messages_without_body", missing)
	return nil
}

// acquireCatalog replays the catalog partition, claims it, and makes it
// this engine's to write. Partitions the catalog does not name (a queue
// whose creation a former owner of the catalog did not finish) are
// dropped once the claim fenced that owner off, and no new queue gets
// their ids.
func (e *Engine) acquireCatalog(term uint64) error {
	cat, last, err := e.readCatalog()
	if err != nil {
		return err
	}
	var orphans []store.PartitionID
	if parts, err := e.st.Partitions(); err != nil {
		e.log.Warn("listing the partitions failed; orphans stay until the catalog moves again", "err", err)
	} else {
		for _, p := range parts {
			_, queue := cat.names[p]
			_, topic := cat.topics[p]
			if !queue && !topic && p != store.Catalog {
				orphans = append(orphans, p)
				cat.next = max(cat.next, p+1)
			}
		}
	}
	e.catMu.Lock()
	e.catLast = last
	e.catMu.Unlock()
	e.mu.Lock()
	e.catOwned = true
	e.nextPart = max(e.nextPart, cat.next)
	e.names = namesOf(cat.names)
	e.topicIDs = namesOf(cat.topics)
	e.freeAt = cat.freeAt
	e.mu.Unlock()
	if err := e.catalogAppend(&record.Record{Type: record.Epoch, Node: e.cfg.Node, Term: term}); err != nil {
		e.mu.Lock()
		e.catOwned = false
		e.mu.Unlock()
		return fmt.Errorf("engine: claiming the catalog: %w", err)
	}
	e.log.Info("acquired the catalog", "queues", len(cat.names), "term", term, "orphans", len(orphans))
	if len(orphans) > 0 {
		e.bg.Go(func() { e.dropOrphans(orphans) })
	}
	return nil
}

// dropOrphans drops partitions no queue owns: each is acquired (so that
// its drop is fenced like any write), then dropped.
func (e *Engine) dropOrphans(ps []store.PartitionID) {
	for _, p := range ps {
		if e.closed.Load() {
			return
		}
		var last uint64
		err := e.st.ReplayPartition(p, 0, func(en store.Entry) error {
			last = max(last, en.Pos)
			return nil
		})
		if err == nil {
			err = e.st.Drop(p, last).Wait(context.Background())
		}
		if err != nil {
			e.log.Warn("dropping a partition no queue owns failed", "partition", p, "err", err)
			continue
		}
		e.log.Info("dropped a partition no queue owns", "partition", p)
	}
}

// readCatalog replays the catalog partition: its queues by partition, the
// next partition id, and its last position.
func (e *Engine) readCatalog() (*catalogView, uint64, error) {
	cat := newCatalogView()
	var last uint64
	err := e.st.ReplayPartition(store.Catalog, 0, func(en store.Entry) error {
		last = max(last, en.Pos)
		return cat.apply(en)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("engine: reading the catalog: %w", err)
	}
	return cat, last, nil
}

func namesOf(byPart map[store.PartitionID]string) map[string]store.PartitionID {
	names := make(map[string]store.PartitionID, len(byPart))
	for p, n := range byPart {
		names[n] = p
	}
	return names
}

// Release stops serving partition p: its owner relinquishes (writes and
// releases nothing), for another node to take it over, and the store
// leaves p to it.
func (e *Engine) Release(p store.PartitionID) {
	e.mu.Lock()
	if p == store.Catalog {
		e.catOwned = false
		e.mu.Unlock()
		e.st.Leave(p)
		return
	}
	if t := e.topicByPart[p]; t != nil {
		e.mu.Unlock()
		e.releaseTopic(p, t)
		return
	}
	o := e.byPart[p]
	if o != nil {
		delete(e.byPart, p)
		if name := o.Meta().Name; e.queues[name] == o {
			delete(e.queues, name)
		}
	}
	e.mu.Unlock()
	if o != nil {
		o.Relinquish()
		e.st.Leave(p)
	}
}

// lost forgets a partition another node fenced this one off (o: its
// owner here; nil for the catalog), and tells the manager. An owner that
// is not the one this engine serves p with is not the lease's to lose:
// one still being acquired, whose fenced claim Acquire answers for itself
// (it replays again, or fails and the manager gives the lease up), or one
// replaced since (a claim of this node's newer term fenced it). Telling
// the manager then would drop a lease this node still serves under, and
// take it again onto a partition owned here already.
func (e *Engine) lost(p store.PartitionID, o *partition.Owner) {
	e.mu.Lock()
	if p == store.Catalog {
		e.catOwned = false
	} else if e.byPart[p] == o {
		delete(e.byPart, p)
		if name := o.Meta().Name; e.queues[name] == o {
			delete(e.queues, name)
		}
	} else {
		e.mu.Unlock()
		e.log.Info("an owner this node does not serve with was fenced", "partition", p)
		return
	}
	e.mu.Unlock()
	e.st.Leave(p)
	e.log.Warn("another node took a partition over", "partition", p)
	e.cl.Lost(p)
}

// CatalogChanged reads the catalog again (a node that does not own it):
// new queues become routable, and the partitions of deleted queues that
// this node owns are dropped.
func (e *Engine) CatalogChanged() {
	if e.ownsCatalog() || e.closed.Load() {
		return
	}
	e.viewMu.Lock()
	defer e.viewMu.Unlock()
	cat, pos, err := e.readCatalog()
	if err != nil {
		e.log.Warn("reading the catalog failed; the view stays as it was", "err", err)
		return
	}
	if pos < e.viewPos {
		e.log.Warn("the catalog read is older than the view; the view stays as it was", "read", pos, "view", e.viewPos)
		return
	}
	e.viewPos = pos
	type gone struct {
		name string
		o    *partition.Owner
	}
	type goneTopic struct {
		name string
		o    *topic.Owner
	}
	var dropped []gone
	var droppedTopics []goneTopic
	e.mu.Lock()
	if e.catOwned { // acquired meanwhile: its own view is the catalog
		e.mu.Unlock()
		return
	}
	e.names = namesOf(cat.names)
	e.nextPart = max(e.nextPart, cat.next)
	for p, o := range e.byPart {
		if _, ok := cat.names[p]; !ok {
			name := o.Meta().Name
			delete(e.byPart, p)
			delete(e.queues, name)
			dropped = append(dropped, gone{name, o})
		}
	}
	e.topicIDs = namesOf(cat.topics)
	for p, o := range e.topicByPart {
		if _, ok := cat.topics[p]; !ok {
			name := o.Info().Name
			delete(e.topicByPart, p)
			delete(e.topics, name)
			droppedTopics = append(droppedTopics, goneTopic{name, o})
		}
	}
	e.mu.Unlock()
	for _, g := range dropped {
		e.drop(context.Background(), g.name, g.o)
		e.cl.Lost(g.o.Partition())
	}
	for _, g := range droppedTopics {
		e.dropTopic(context.Background(), g.name, g.o)
		e.cl.Lost(g.o.Partition())
	}
}

// Route says where a queue is served: its partition, and whether this
// engine owns it. A name the view does not know is looked up again in
// the catalog once (a queue created on another node a moment ago).
func (e *Engine) Route(name string) (p store.PartitionID, local bool, err error) {
	for try := 0; try < 2; try++ {
		e.mu.RLock()
		p, ok := e.names[name]
		o := e.byPart[p]
		e.mu.RUnlock()
		if ok {
			return p, o != nil && o.Serving(), nil
		}
		if !e.clustered || e.ownsCatalog() {
			break
		}
		e.refreshForMiss()
	}
	return 0, false, partition.NoQueue()
}

// missRefreshEvery bounds how often names missing from the view make a
// node read the catalog again: a client asking for queues that do not
// exist must not make every request replay the catalog. (A queue created
// elsewhere reaches the view by the catalog owner's news within
// milliseconds; this read is the fallback.) It paces I/O, not queue
// semantics, so it reads the process's monotonic time, not the clock.
const missRefreshEvery = 50 * time.Millisecond

// refreshForMiss reads the catalog again for a name the view lacks,
// unless it was read within missRefreshEvery; concurrent misses share
// one read.
func (e *Engine) refreshForMiss() {
	e.missMu.Lock()
	defer e.missMu.Unlock()
	if time.Since(e.missRead) < missRefreshEvery {
		return
	}
	e.CatalogChanged()
	e.missRead = time.Now()
}

// isQueue reports whether partition p is a queue's, as far as this node's
// view of the catalog goes.
func (e *Engine) isQueue(p store.PartitionID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.byPart[p] != nil {
		return true
	}
	for _, qp := range e.names {
		if qp == p {
			return true
		}
	}
	return false
}

// Owner is the owner of partition p on this node (nil: not owned here).
func (e *Engine) Owner(p store.PartitionID) *partition.Owner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.byPart[p]
}

// PartitionNames names the queue of each partition the catalog holds.
func (e *Engine) PartitionNames() map[store.PartitionID]string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make(map[store.PartitionID]string, len(e.names))
	for n, p := range e.names {
		out[p] = n
	}
	return out
}

// Store is the engine's store.
func (e *Engine) Store() store.Store { return e.st }

// OwnsCatalog reports whether this engine writes the catalog (a single
// node always does).
func (e *Engine) OwnsCatalog() bool { return e.ownsCatalog() }
