// Package record holds the records of Sluice's logs and their codec. A
// queue's partition holds its settings (Meta), its messages with their
// bodies (Send), what happened to them (Receive, Visibility, Update,
// Delete, Purge) and, in a snapshot, its state (State, Dedup, Index); the
// catalog partition holds which queues exist (Create, Drop, Catalog). Every
// record states a result, not a change, so that one replayed on top of a
// snapshot that already holds it does no harm. A queue fed from another
// partition (a topic's subscription) also holds how far it has taken that
// partition (OriginMark), written with the message it delivered. A
// dead-letter queue holds its message move tasks (Task), each record the
// task's whole latest state.
//
// The codec is binary (a version byte, a type byte, then the type's fields
// as varints and length-prefixed strings), so the hot path and recovery do
// no JSON; queue metadata, rare and nested, is embedded as JSON.
package record

import (
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/sluicetype"
)

// Type is a record's type.
type Type uint8

// Record types.
const (
	// Queue partitions.
	Meta       Type = iota + 1 // the queue's identity and settings, whole
	Send                       // a message stored: its index and payload
	Receive                    // a delivery: receive count, times, fence, level
	Visibility                 // an in-flight message's visibility changed
	Delete                     // a message left the queue
	Purge                      // every message before this record left the queue
	Update                     // a failure or verdict: level, failure, count, visibility
	Index                      // snapshot: index entries of messages (bodies stay in their Sends)
	Dedup                      // snapshot: a FIFO deduplication id in its window
	State                      // snapshot: the queue's own counters
	// The catalog partition.
	Create  // a queue created: its partition and name
	Drop    // a queue deleted
	Catalog // snapshot: the catalog's counters
	// Queue partitions (numbered after the others: the numbers are on disk).
	OriginMark // the queue has taken every record of an origin partition up to a position
	// Any partition.
	Epoch // a new owner took the partition over: its node and term
	// Queue partitions.
	Entered // a message another queue handed over was entered under a key (written with its Send)
	Task    // a message move task out of the queue, its latest state whole (also in snapshots)
	// The catalog partition: topics (their names are apart from queues').
	TopicCreate // a topic created: its partition and name
	TopicDrop   // a topic deleted
	// Topic partitions.
	TopicMeta // the topic's identity, settings and subscriptions, whole
	Publish   // a message published to the topic
	maxType
)

var typeNames = [...]string{"", "meta", "send", "receive", "visibility", "delete", "purge", "update", "index", "dedup", "state", "create", "drop", "catalog", "origin-mark", "epoch", "entered", "task",
	"topic-create", "topic-drop", "topic-meta", "publish"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "unknown"
}

// Delete reasons (for the counters replay rebuilds).
const (
	ByClient    uint8 = iota // DeleteMessage, a filtered purge
	ByWatermark              // DropBefore
	ByMove                   // moved to another queue (its copy is there)
	ByDrop                   // dropped off the retry ladder with nowhere to go
	ByLoss                   // its body could not be read back
)

// Record is one record. Which fields a type uses:
//
//	Meta: Meta                 Send: Msg, Payload     Index: Msgs (each with its Hint)
//	Receive: Seq, Count, First, Last, VisibleAt, Fence, Level, Fail (the
//	       message's failures, when it has any; older Receives have none)
//	Visibility: Seq, VisibleAt Delete: Seq, Reason
//	Purge: (its position), Until (unix ms: no other purge before then;
//	       older Purges have none)
//	Update: Seq, Msg (level, failure, count, visibility)
//	Dedup: Key, ID, SeqNum, Until
//	State: NextSeqNum, Until (as a Purge's, while it is ahead)
//	Create: Partition, Name    Catalog: NextPartition
//	Drop: Partition, and the queue's Name with Until (unix ms: the name
//	      is not used again before then; older Drops have neither). A
//	      catalog snapshot keeps those not yet past as Drops of partition 0.
//	OriginMark: Partition, OriginPos (the origin partition and the position there; 0: the origin is gone, forget its mark)
//	Epoch: Node (the owner's), Term (a lease revision, or 0)
//	Entered: Key (the hand-over's key), Until (unix ms: remembered before then)
//	Task: Task
//	TopicCreate, TopicDrop: Partition, Name
//	TopicMeta: Topic
//	Publish: Number (the publish's number in its topic: subscriptions'
//	         queues mark it, as it keeps its number in snapshots, unlike its
//	         position), Payload (ID, Body: the message as subscribers get
//	         it, Dedup, SeqNum, Sender: the publisher, Attrs), Subject,
//	         Group, Published, JSON
//	Topic partitions' snapshots hold TopicMeta, State (Number: the last
//	publish number), Dedup and the Publishes some subscription has not
//	taken yet.
type Record struct {
	Type Type
	// Pos is the record's position in its partition (set by the writer of
	// the record and by replay; not encoded: the log holds it).
	Pos uint64

	// Seq is a message's sequence number in its queue.
	Seq       uint64
	Count     int32
	First     int64
	Last      int64
	VisibleAt int64
	Fence     uint32
	Level     uint8
	Reason    uint8
	// Fail is a Receive's message's failure record: a delivery states the
	// message as delivered, so that it replays whole even when the
	// record of its last failure (a retry ladder's climb, made as time
	// moved on) could not be written.
	Fail *Fail

	Meta    *QueueMeta
	Topic   *TopicInfo
	Task    *MoveTask
	Msg     *Msg
	Msgs    []Msg // Index: up to IndexChunk entries
	Payload *Payload
	// Raw is a Send's payload encoded already (EncodePayload): Encode uses
	// it instead of Payload.
	Raw RawPayload

	Key, ID, SeqNum string
	Until           int64
	NextSeqNum      uint64

	Partition     uint64
	Name          string // a queue's or a topic's
	NextPartition uint64

	// OriginPos is a position in an origin partition (OriginMark).
	OriginPos uint64
	// Node and Term are a partition's new owner: its node's name and its
	// term (Epoch).
	Node string
	Term uint64
	// Number is a publish's number in its topic (Publish; a topic's State:
	// the last one handed out). Subject, Group (the MessageGroupId),
	// Published (unix ms) and JSON (MessageStructure json: the message a
	// JSON object of messages by protocol) are a Publish's.
	Number    uint64
	Subject   string
	Group     string
	Published int64
	JSON      bool
}

// IndexChunk is how many index entries a snapshot's Index record holds:
// a million waiting messages make two thousand records, not a million.
const IndexChunk = 512

// QueueMeta is a queue's identity and settings, persisted whole on every
// change (so its record is idempotent).
type QueueMeta struct {
	ID       uint64            `json:"id"`
	Name     string            `json:"name"`
	FIFO     bool              `json:"fifo,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
	Created  int64             `json:"created"`
	Modified int64             `json:"modified"`
	// Tenants holds per-tenant overrides of weight and limits (admin API).
	Tenants map[string]TenantLimits `json:"tenants,omitempty"`
}

// TopicInfo is a topic's identity, settings and subscriptions, persisted
// whole on every change (so its record is idempotent).
type TopicInfo struct {
	ID       uint64            `json:"id"`
	Name     string            `json:"name"`
	FIFO     bool              `json:"fifo,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
	Created  int64             `json:"created"`
	Modified int64             `json:"modified"`
	// Subs are the topic's subscriptions by id (the last part of the
	// subscription's ARN).
	Subs map[string]Subscription `json:"subs,omitempty"`
}

// Subscription is one subscription of a topic.
type Subscription struct {
	Protocol string            `json:"protocol"`
	Endpoint string            `json:"endpoint"`        // a queue's ARN
	Account  string            `json:"owner,omitempty"` // the AWS account that subscribed (the wire's Owner)
	Attrs    map[string]string `json:"attrs,omitempty"`
	Created  int64             `json:"created"`
	// From is the number of the topic's last publish when it subscribed:
	// it gets the publishes after it.
	From uint64 `json:"from,omitempty"`
}

// TenantLimits are one tenant's overrides (zero: the queue's setting).
type TenantLimits struct {
	Weight        float64 `json:"weight,omitempty"`
	MaxInFlight   int     `json:"max_in_flight,omitempty"`
	SendRate      float64 `json:"send_rate,omitempty"`
	SendBurst     float64 `json:"send_burst,omitempty"`
	ReceiveRate   float64 `json:"receive_rate,omitempty"`
	ReceiveBurst  float64 `json:"receive_burst,omitempty"`
	BacklogTarget int     `json:"backlog_target,omitempty"`
}

// Clone copies m deeply (its maps are not shared).
func (m QueueMeta) Clone() QueueMeta {
	c := m
	c.Attrs = cloneMap(m.Attrs)
	c.Tags = cloneMap(m.Tags)
	if m.Tenants != nil {
		c.Tenants = make(map[string]TenantLimits, len(m.Tenants))
		for k, v := range m.Tenants {
			c.Tenants[k] = v
		}
	}
	return c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// MoveTask is a message move task as its source queue's partition keeps
// it: enough to list it and, on a new owner of the partition, to resume
// it. The messages it moves are not listed: they are the source's
// messages below Bound (that Filter matches) as the source is when the
// task runs; one moved is no longer there, so a resumed task moves
// nothing twice.
type MoveTask struct {
	Handle      string // the task's handle (its id and source ARN)
	Source      string // the source queue's ARN
	Destination string // ARN; "": each message back to the queue it was dead-lettered from
	Rate        int32  // messages a second; 0: unlimited
	Status      TaskStatus
	Started     int64 // unix ms
	Ended       int64 // unix ms; 0 while running
	ToMove      int64 // messages to move, as counted at the start
	Moved       int64 // messages moved, as of this record (behind while running)
	Failure     string
	// Bound: the task moves messages whose sequence is below it (the
	// queue's next position when the task started).
	Bound  uint64
	Filter *TaskFilter // nil: every message
	// Allowed are the queues the task may move messages into: those of
	// its destination or its messages' sources that its starter was
	// allowed to use when it started (the starter's authorizer is not
	// kept; this is what it answered).
	Allowed []string
}

// TaskFilter is what a filtered redrive task moves (index fields only).
type TaskFilter struct {
	Tenant, Source, Reason string
	Since, Until           int64 // unix ms; 0: unbounded
}

// TaskStatus is where a move task is in its life.
type TaskStatus uint8

// Move task statuses. A task ends once: a record of an ended task is
// never followed by one that runs it again.
const (
	TaskRunning TaskStatus = iota + 1
	TaskCompleted
	TaskCancelled
	TaskFailed
)

var taskStatusNames = [...]string{"", "RUNNING", "COMPLETED", "CANCELLED", "FAILED"}

// String is the status as SQS names it.
func (s TaskStatus) String() string {
	if int(s) < len(taskStatusNames) {
		return taskStatusNames[s]
	}
	return "UNKNOWN"
}

// Ended reports whether the status is an end.
func (s TaskStatus) Ended() bool { return s > TaskRunning }

// Msg is a message's index entry as records carry it.
type Msg struct {
	Seq       uint64
	Sent      int64 // unix ms
	VisibleAt int64 // unix ms
	Group     string
	Tenant    string // "" when it is the group
	DLQSource string
	Count     int32 // receives
	First     int64 // unix ms of the first receive
	Last      int64 // unix ms of the latest receive
	Fence     uint32
	State     uint8
	Level     uint8
	Fail      *Fail
	// Hint is where its body's Send record is (Index records).
	Hint store.Hint
}

// Fail is what a message's failures left behind.
type Fail struct {
	Reason    string
	LastError string
	First     int64
	Failures  int32
}

// Payload is the part of a message only its Send record holds: read back
// on receive.
type Payload struct {
	ID, Body, Trace, Sender, Dedup, SeqNum string
	TraceParent                            string
	MD5                                    string // MD5 of Body, 16 raw bytes
	Attrs                                  map[string]sluicetype.AttributeValue
}
