package sluicetype

import (
	"slices"
	"time"
)

// The broker's public figures and inputs: shared by the engine, the
// dead-letter tools, internal/broker and the root package (which re-export them) and its
// clients.

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

// VisibilityChange is one entry of ChangeVisibilityBatch.
type VisibilityChange struct {
	ReceiptHandle string
	Seconds       int
}

// PeekFilter selects messages for Peek, PurgeFiltered and RedriveFiltered.
// Zero fields match everything.
type PeekFilter struct {
	Tenant   string
	Source   string // DeadLetterQueueSourceArn (or the source queue's name)
	Reason   string // failure reason (RetryMessage / RejectMessage / VisibilityTimeout / MaxReceiveCount / MaxMessageAge)
	Since    time.Time
	Until    time.Time
	Contains string // body substring
	// Max is the page size (default 10, at most 100); After is the Next
	// token of the previous page.
	Max   int
	After string
}

// PeekedMessage is a message seen without receiving it.
type PeekedMessage struct {
	MessageID    string    `json:"message_id"`
	Body         string    `json:"body"`
	GroupID      string    `json:"group_id,omitempty"`
	Tenant       string    `json:"tenant,omitempty"`
	Source       string    `json:"source_arn,omitempty"`
	Sent         time.Time `json:"sent"`
	ReceiveCount int       `json:"receive_count"`
	State        string    `json:"state"` // visible, in_flight, delayed
	RetryLevel   int       `json:"retry_level,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	FirstFailure time.Time `json:"first_failure,omitempty"`
}

// TenantLimits overrides a queue's per-tenant attributes for one tenant.
// Zero fields keep the queue's setting.
type TenantLimits struct {
	Weight        float64 `json:"weight,omitempty"`         // deficit round robin weight (default 1)
	MaxInFlight   int     `json:"max_in_flight,omitempty"`  // TenantMaxInFlight
	SendRate      float64 `json:"send_rate,omitempty"`      // TenantSendRate, messages/s
	SendBurst     float64 `json:"send_burst,omitempty"`     // TenantSendBurst
	ReceiveRate   float64 `json:"receive_rate,omitempty"`   // TenantReceiveRate, messages/s
	ReceiveBurst  float64 `json:"receive_burst,omitempty"`  // TenantReceiveBurst
	BacklogTarget int     `json:"backlog_target,omitempty"` // TenantBacklogTarget
}

// TenantInfo is one tenant of a queue as the scheduler sees it.
type TenantInfo struct {
	Name      string         `json:"name"`
	Ready     int            `json:"ready"`
	InFlight  int            `json:"in_flight"`
	Lanes     map[string]int `json:"lanes"` // ready messages by lane: live, retry-N, backlog
	OldestAge time.Duration  `json:"oldest_age_ns"`
	Spilled   bool           `json:"spilled"`          // over its receive rate: served from the spillover lane
	Capped    bool           `json:"capped"`           // at its in-flight cap
	Shards    []int          `json:"shards"`           // the queue's shards it hashes to (Shards attribute)
	Limits    *TenantLimits  `json:"limits,omitempty"` // its overrides, if any
	// FreshFirst says its backlog stands and what it sends is served
	// first (the backlog mode, since FreshFirstSince), while its older
	// messages (Lanes["backlog"], the oldest OldOldestAge old) drain
	// behind with a guaranteed share.
	FreshFirst      bool          `json:"fresh_first"`
	FreshFirstSince time.Time     `json:"fresh_first_since,omitzero"`
	OldOldestAge    time.Duration `json:"old_oldest_age_ns,omitempty"`
}

// FirstAttemptBounds are the upper bounds (seconds) of the age-at-first-
// attempt histogram: how long messages waited from send to first delivery.
var FirstAttemptBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600}

// AgeHistogram counts ages by FirstAttemptBounds (Counts: one bucket a
// bound, then one above them all; nil while empty), with their sum.
type AgeHistogram struct {
	Counts []int64
	Sum    time.Duration
}

// Observe counts one age.
func (h *AgeHistogram) Observe(d time.Duration) {
	if h.Counts == nil {
		h.Counts = make([]int64, len(FirstAttemptBounds)+1)
	}
	i, _ := slices.BinarySearch(FirstAttemptBounds, d.Seconds())
	h.Counts[i]++
	h.Sum += d
}

// Clone returns a copy of h.
func (h AgeHistogram) Clone() AgeHistogram {
	return AgeHistogram{Counts: slices.Clone(h.Counts), Sum: h.Sum}
}

// QueueStats is one queue's figures at one moment.
type QueueStats struct {
	Name     string
	FIFO     bool
	DLQ      string // the dead-letter queue's name, if any
	Visible  int
	InFlight int
	Delayed  int
	// OldestAge is the age of the oldest message (0 when empty).
	OldestAge time.Duration
	// Counters since the broker opened.
	Sent, Throttled, Received, EmptyReceives, Deleted, DeadLettered int64
	Sidelined, Spilled                                              uint64
	// SendsHeld counts the sends flow control held back while consumers
	// took messages off a backlog, SendsHeldOut those that went ahead when
	// their hold ran out, SendsHeldTime their time held.
	SendsHeld, SendsHeldOut int64
	SendsHeldTime           time.Duration
	// HeldBack counts receives that passed over a tenant above its share
	// to keep TenantHeadroom receivers waiting.
	HeldBack uint64
	// WaitingReceives is the number of long polls waiting on the queue.
	WaitingReceives int
	// Redriven counts messages moved out of this queue by redrives and
	// move tasks; Retried, Deferred, Rejected the consumers' verdicts
	// (and visibility timeouts that climbed the retry ladder).
	Redriven                    int64
	Retried, Deferred, Rejected uint64
	// Unreadable counts messages dropped because their body could not be
	// read back from the store (found at start or at a read): data lost
	// under the queue, never silently.
	Unreadable int64
	// Dropped counts by reason: retention, max_age, watermark, and
	// exhausted / rejected (off the retry ladder with no dead-letter queue).
	Dropped map[string]uint64
	// FirstAttempt counts first deliveries by how long they waited since
	// their send, per FirstAttemptBounds (the last bucket: above them all);
	// FirstAttemptOld those of them served from the old side of a backlog
	// (the rest were fresh).
	FirstAttempt       []int64
	FirstAttemptSum    time.Duration
	FirstAttemptOld    []int64
	FirstAttemptOldSum time.Duration
	// FreshFirstTenants counts the tenants whose backlog mode is engaged
	// (their fresh traffic served first; a FIFO queue: 1 while its groups
	// whose head is fresh are served first), the first since
	// FreshFirstSince;
	// OldMessages counts the messages on the old side of their backlogs,
	// the oldest OldOldestAge old.
	FreshFirstTenants int
	FreshFirstSince   time.Time
	OldMessages       int
	OldOldestAge      time.Duration
	// Order is how the queue serves a standing backlog: "fresh first"
	// (the backlog mode, the default; a FIFO queue's is "fresh groups
	// first"), "sideline after Ns" (SidelineAgeSeconds), or "oldest first"
	// (OldestFirst).
	Order string
	// Tenants are the tenants with the largest backlogs (at most
	// StatsTenants), Others the rest summed.
	Tenants []TenantInfo
	Others  TenantInfo
	// Lanes sums ready messages by lane across tenants.
	Lanes map[string]int
	// QuietOldestAge is the age of the oldest message among tenants that
	// are not noisy (see ApproximateAgeOfOldestMessageInQuietGroups).
	QuietOldestAge time.Duration
	NoisyOldestAge time.Duration
	NoisyTenants   int
}

// StatsTenants is how many tenants Stats names per queue.
const StatsTenants = 20

// StoreStats are the storage engine's figures.
type StoreStats struct {
	LiveMessages  int64 // messages whose bodies the store keeps
	Segments      int
	Partitions    int
	LogBytes      int64 // log that a restart replays
	SnapshotBytes int64 // the partitions' newest snapshots
	Snapshots     int64
	Fsyncs        int64
	FsyncBuckets  []int64 // by FsyncBounds, then above
	FsyncBounds   []time.Duration
	FsyncSeconds  float64
	BytesWritten  int64
	FailedWrites  int64
	ResentWrites  int64 // writes sent again with their outcome in doubt (cluster mode: a leader changed with them in flight)
	// DeadRecords counts records in segments that no longer hold a live
	// message (what compaction and segment deletion reclaim); Relocated
	// the messages compaction copied forward.
	DeadRecords int64
	Relocated   int64
	// DiskBytes is the size of the log segments on disk; LiveBytes the
	// part of it estimated to hold live messages (each segment's size
	// times its share of live records), DeadBytes the rest.
	DiskBytes, LiveBytes, DeadBytes int64
	// DiskFree is the free space of the data directory's file system,
	// DiskReserve the reserve in effect, and DiskAlarm whether free space
	// is below it (new messages are refused then).
	DiskFree, DiskReserve int64
	DiskAlarm             bool
	// SegmentsRemoved counts the segment files freed since the broker
	// opened. BadReleases counts releases of a body the store did not
	// hold for the broker (a bug; nothing is freed for them), Unreadable
	// the messages of every queue dropped because their body could not
	// be read back. Both are 0 in a healthy broker.
	SegmentsRemoved, BadReleases, Unreadable int64
}

// VerifyReport is what a check of a stopped data directory found.
type VerifyReport struct {
	Queues []QueueCheck // by name
	// Orphans counts partitions no queue owns (a creation or deletion cut
	// short): the next start drops them. OrphanMessages counts the
	// messages in those of them whose deletion the catalog does not
	// record: data a start would drop.
	Orphans, OrphanMessages int
	// Damage is what fails its checks where it cannot be a write cut
	// short by a crash, and what a salvage would lose with it: a start
	// refuses such a directory. Nil when there is none.
	Damage *SalvageReport
	// Salvaged is what a salvage (Config.Salvage) that ran before the
	// check found and lost.
	Salvaged *SalvageReport
}

// SalvageReport is what damaged data held, as far as it reads: what a
// salvage skips (and loses), or skipped.
type SalvageReport struct {
	Damage []DamageInfo // each damaged stretch, in the order read
	Queues []QueueLoss  // what each queue (or topic, or the catalog) lost, by partition
	// Restored names the queues and topics whose catalog record was lost
	// and that a salvage brought back (under their own name, or a
	// "salvaged-<partition>" one).
	Restored []string
	// Unknown counts the stretches of which nothing could be read: whose
	// records they held is not known.
	Unknown int
}

// Lost sums the messages lost, and those found without a body.
func (r *SalvageReport) Lost() int {
	n := 0
	for _, q := range r.Queues {
		n += q.Messages + q.WithoutBody
	}
	return n
}

// DamageInfo is one damaged stretch of a data directory.
type DamageInfo struct {
	File           string
	Offset, Length int64
	Reason         string
	Records        int // the records it held, as far as they read
	// BelowFloor says it is where a start does not read (a segment kept
	// for the bodies in it): a start does not refuse it, and a body there
	// is dropped (counted as unreadable) when it is read.
	BelowFloor bool
}

// QueueLoss is what damage took from one queue (or topic, or, named
// CatalogLoss, the catalog of queues itself).
type QueueLoss struct {
	Name string
	// Messages counts the messages lost (their Send record, or their
	// snapshot entry, was damaged, and no later record says they were
	// gone anyway); WithoutBody those found without a body (in a damaged
	// stretch, or freed after a delete that the damage took: such a
	// message was deleted, and is deleted again). IDs are those whose id
	// could be read.
	Messages, WithoutBody int
	IDs                   []string
	// Snapshots counts snapshot records lost; Records the other records
	// lost (receives, visibility changes, settings ...), of which Deletes
	// were deletes and purges: the messages they took may be delivered
	// again. Unknown counts the records of it lost that could not be read
	// even as damaged: what they held (messages among them) is unknown.
	Snapshots, Records, Deletes, Unknown int
	// FromSnapshot counts the messages read back from the index of a
	// damaged snapshot (kept if their body read back whole): their
	// receive count and visibility are as read, and may be wrong.
	FromSnapshot int
}

// CatalogLoss is the Name of the QueueLoss that counts what the catalog
// of queues lost: a lost catalog record may be a queue's creation, its
// settings, or its deletion (a deleted queue is then back, in Restored).
const CatalogLoss = "(the catalog of queues)"

// Unreadable sums the queues' unreadable messages.
func (r VerifyReport) Unreadable() int {
	n := 0
	for _, q := range r.Queues {
		n += q.Unreadable
	}
	return n
}

// Healthy reports whether every live message's body reads back intact,
// every queue's partition is there, nothing is damaged and a start would
// drop no message.
func (r VerifyReport) Healthy() bool {
	if r.Damage != nil || r.OrphanMessages > 0 {
		return false
	}
	for _, q := range r.Queues {
		if q.Unreadable > 0 || q.Missing {
			return false
		}
	}
	return true
}

// QueueCheck is what a check found of one queue.
type QueueCheck struct {
	Name string
	// Messages counts its live messages, Unreadable those whose body could
	// not be read back intact; FirstError says why the first could not.
	Messages, Unreadable int
	FirstError           string
	// Missing says the catalog names the queue but its partition has no
	// record left (its messages and settings are gone).
	Missing bool
}

// ClusterStatus is a cluster as one of its nodes sees it.
type ClusterStatus struct {
	// Node is this node's name; Members the live nodes, sorted.
	Node    string
	Members []string
	// Owners names each queue's owner node ("" while it has none); the
	// catalog of queues is under CatalogOwner.
	Owners       map[string]string
	CatalogOwner string
	// Owned counts the partitions this node owns.
	Owned int
	// Failovers counts the partitions this node took over after their
	// owner's lease expired (it stopped renewing: it crashed or was cut
	// off); Handovers those it gave to their preferred node; the failures
	// are acquisitions that failed and lease renewals that went
	// unanswered (the lease was kept).
	Failovers, Handovers, AcquireFailures, RenewFailures uint64
	// LeasesRetaken counts this node's leases that expired while the lease
	// bucket could not take their renewals (its leader was lost) and that
	// it took again, serving on.
	LeasesRetaken uint64
	// Forwarded counts the requests this node forwarded to the node that
	// owns their queue or topic; Resent the times one was sent again
	// because the node it went to did not serve the partition (it had
	// just moved) or was gone; OwnerLost the forwarded requests whose
	// node went away while they waited for its answer (sent again when
	// idempotent, else answered ServiceUnavailable at once); OwnerSilent
	// those answered ServiceUnavailable because their queue's owner did
	// not answer (its machine or network down) and no other node served
	// the queue yet.
	Forwarded, Resent, OwnerLost, OwnerSilent uint64
	// CutOff is whether this node reaches no other node of its cluster:
	// it then answers no request about a queue.
	CutOff bool
}

// TopicInfo is a topic's settings and subscriptions. (The log keeps its
// own record of them: a field renamed here changes nothing on disk.)
type TopicInfo struct {
	ID       uint64            `json:"id"`
	Name     string            `json:"name"`
	FIFO     bool              `json:"fifo,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
	Created  int64             `json:"created"`  // unix ms
	Modified int64             `json:"modified"` // unix ms
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
	Created  int64             `json:"created"` // unix ms
	// From is the number of the topic's last publish when it subscribed:
	// it gets the publishes after it.
	From uint64 `json:"from,omitempty"`
}
