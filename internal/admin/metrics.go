package admin

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice/sluicetype"
)

// collector reads the broker's figures at scrape time. Tenants are
// labelled by name for the StatsTenants largest backlogs of each queue and
// summed under tenant="_others", so cardinality stays bounded.
type collector struct {
	b Broker

	messages, oldest, quietOldest, noisyOldest, noisy, lane                                              *prometheus.Desc
	redriven, retried, deferred, rejected, dead, relocated                                               *prometheus.Desc
	diskBytes, liveBytes, deadBytes                                                                      *prometheus.Desc
	sent, throttled, received, empty, deleted, deadLettered                                              *prometheus.Desc
	sidelined, spilled, heldBack, waiting, dropped, firstAttempt, sendsHeld, sendsHeldOut, sendsHeldTime *prometheus.Desc
	tenantMessages, tenantOldest                                                                         *prometheus.Desc
	freshFirst, freshFirstSince, oldMessages, oldOldest, firstAttemptOld                                 *prometheus.Desc
	tenantFreshFirst                                                                                     *prometheus.Desc
	live, segments, logBytes, ckpBytes, ckps, written, failed, resent, fs                                *prometheus.Desc
	diskFree, diskReserve, diskAlarm, queueSeries                                                        *prometheus.Desc
	unreadable, segsRemoved, badReleases, allUnreadable                                                  *prometheus.Desc
	// Cluster mode.
	members, owned, owner, failovers, handovers, acquireFailed, renewFailed, forwarded, fwdResent, fwdLost, fwdSilent, cutOff *prometheus.Desc

	published, deliveries, topicHeld, fanOutLag *prometheus.Desc
	firstSubscriber, subscriptionFirst          *prometheus.Desc

	// maxQueues bounds the queues with series of their own (see boundQueues).
	maxQueues int
}

// MaxQueueSeries is how many queues get per-queue series on /metrics by
// default: those with the largest backlogs (then the oldest messages); the
// rest are summed under queue="_others", so a server with ten thousand
// queues still answers a scrape quickly with a bounded number of series.
const MaxQueueSeries = 500

// boundQueues keeps the max queues with the largest backlogs (ties: the
// oldest message, then the name) and sums the rest into one "_others".
func boundQueues(stats []sluicetype.QueueStats, max int) ([]sluicetype.QueueStats, *sluicetype.QueueStats) {
	if len(stats) <= max {
		return stats, nil
	}
	sorted := append([]sluicetype.QueueStats(nil), stats...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		na, nb := a.Visible+a.InFlight+a.Delayed, b.Visible+b.InFlight+b.Delayed
		if na != nb {
			return na > nb
		}
		if a.OldestAge != b.OldestAge {
			return a.OldestAge > b.OldestAge
		}
		return a.Name < b.Name
	})
	o := &sluicetype.QueueStats{Name: "_others", Dropped: map[string]uint64{}, Lanes: map[string]int{}}
	for _, q := range sorted[max:] {
		o.Visible += q.Visible
		o.InFlight += q.InFlight
		o.Delayed += q.Delayed
		o.OldestAge = maxDur(o.OldestAge, q.OldestAge)
		o.QuietOldestAge = maxDur(o.QuietOldestAge, q.QuietOldestAge)
		o.NoisyOldestAge = maxDur(o.NoisyOldestAge, q.NoisyOldestAge)
		o.Sent += q.Sent
		o.Throttled += q.Throttled
		o.Received += q.Received
		o.EmptyReceives += q.EmptyReceives
		o.Deleted += q.Deleted
		o.DeadLettered += q.DeadLettered
		o.Sidelined += q.Sidelined
		o.Spilled += q.Spilled
		o.HeldBack += q.HeldBack
		o.SendsHeld += q.SendsHeld
		o.SendsHeldOut += q.SendsHeldOut
		o.SendsHeldTime += q.SendsHeldTime
		o.WaitingReceives += q.WaitingReceives
		o.Redriven += q.Redriven
		o.Retried += q.Retried
		o.Deferred += q.Deferred
		o.Rejected += q.Rejected
		o.NoisyTenants += q.NoisyTenants
		o.Unreadable += q.Unreadable
		for k, v := range q.Dropped {
			o.Dropped[k] += v
		}
		for k, v := range q.Lanes {
			o.Lanes[k] += v
		}
		if len(o.FirstAttempt) < len(q.FirstAttempt) {
			o.FirstAttempt = append(o.FirstAttempt, make([]int64, len(q.FirstAttempt)-len(o.FirstAttempt))...)
		}
		for i, n := range q.FirstAttempt {
			o.FirstAttempt[i] += n
		}
		o.FirstAttemptSum += q.FirstAttemptSum
		if len(o.FirstAttemptOld) < len(q.FirstAttemptOld) {
			o.FirstAttemptOld = append(o.FirstAttemptOld, make([]int64, len(q.FirstAttemptOld)-len(o.FirstAttemptOld))...)
		}
		for i, n := range q.FirstAttemptOld {
			o.FirstAttemptOld[i] += n
		}
		o.FirstAttemptOldSum += q.FirstAttemptOldSum
		o.FreshFirstTenants += q.FreshFirstTenants
		if !q.FreshFirstSince.IsZero() && (o.FreshFirstSince.IsZero() || q.FreshFirstSince.Before(o.FreshFirstSince)) {
			o.FreshFirstSince = q.FreshFirstSince
		}
		o.OldMessages += q.OldMessages
		o.OldOldestAge = maxDur(o.OldOldestAge, q.OldOldestAge)
	}
	return sorted[:max], o
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func newCollector(b Broker, maxQueues int) *collector {
	q := []string{"queue"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_"+name, help, labels, nil)
	}
	return &collector{
		b:                 b,
		messages:          d("queue_messages", "Messages in the queue by state (visible, inflight, delayed).", "queue", "state"),
		oldest:            d("queue_oldest_message_age_seconds", "Age of the oldest message in the queue.", q...),
		quietOldest:       d("queue_quiet_oldest_message_age_seconds", "Age of the oldest message among tenants that are not noisy.", q...),
		noisyOldest:       d("queue_noisy_oldest_message_age_seconds", "Age of the oldest message among noisy tenants.", q...),
		redriven:          d("queue_redriven_total", "Messages moved out of the queue by redrives and message move tasks.", q...),
		retried:           d("queue_retried_total", "Failures that climbed the retry ladder (visibility timeouts and RetryMessage).", q...),
		deferred:          d("queue_deferred_total", "Messages put off with DeferMessage.", q...),
		rejected:          d("queue_rejected_total", "Messages failed for good with RejectMessage.", q...),
		unreadable:        d("queue_unreadable_total", "Messages dropped because their body could not be read back from disk (found at start or at a read).", q...),
		dead:              d("store_dead_records", "Records in the log that no longer hold a live message (reclaimed by compaction and segment deletion)."),
		relocated:         d("store_compaction_relocated_total", "Messages compaction copied out of mostly dead segments."),
		diskBytes:         d("store_disk_bytes", "Size of the log segments on disk."),
		liveBytes:         d("store_live_bytes", "Bytes of the log estimated to hold live messages (per segment: size x live share of its records)."),
		deadBytes:         d("store_dead_bytes", "Bytes of the log that hold no live message (disk minus live), reclaimed by compaction and segment deletion."),
		noisy:             d("queue_noisy_tenants", "Tenants over their receive rate, at their in-flight cap, or holding more than twice an even share of the backlog.", q...),
		lane:              d("queue_lane_messages", "Ready messages by lane (live, retry-N, backlog).", "queue", "lane"),
		sent:              d("queue_sent_total", "Messages sent.", q...),
		throttled:         d("queue_throttled_total", "Sends refused with RequestThrottled (tenant send limits and backpressure).", q...),
		received:          d("queue_received_total", "Messages delivered by receives.", q...),
		empty:             d("queue_empty_receives_total", "Receive calls that returned no message.", q...),
		deleted:           d("queue_deleted_total", "Messages deleted.", q...),
		deadLettered:      d("queue_dead_lettered_total", "Messages moved to the dead-letter queue (receive limit or age).", q...),
		sidelined:         d("queue_sidelined_total", "Messages moved to the backlog lane: older than SidelineAgeSeconds, or, in the backlog mode, on the old side of a standing backlog.", q...),
		spilled:           d("queue_spilled_total", "Times a tenant over its receive rate moved to the spillover lane.", q...),
		sendsHeld:         d("queue_sends_held_total", "Sends flow control held back while consumers took messages off a backlog (FlowControl).", q...),
		sendsHeldOut:      d("queue_sends_held_timed_out_total", "Held sends that went ahead when their hold (100 ms) ran out before consumers took as many messages.", q...),
		sendsHeldTime:     d("queue_sends_held_seconds_total", "Time sends were held back by flow control, summed.", q...),
		heldBack:          d("queue_held_back_total", "Receives that passed over a tenant above its share to keep TenantHeadroom receivers waiting.", q...),
		waiting:           d("queue_waiting_receives", "Long polls waiting on the queue for a message.", q...),
		dropped:           d("queue_dropped_total", "Messages dropped, by reason (retention, max_age, watermark).", "queue", "reason"),
		firstAttempt:      d("queue_first_attempt_age_seconds", "Time from send to first delivery, first deliveries only: the early warning of a backlog.", q...),
		tenantMessages:    d("tenant_messages", "Messages of a tenant by state (ready, inflight); the largest backlogs by name, the rest as _others.", "queue", "tenant", "state"),
		tenantOldest:      d("tenant_oldest_message_age_seconds", "Age of a tenant's oldest ready message.", "queue", "tenant"),
		freshFirst:        d("queue_fresh_first_tenants", "Tenants whose backlog stands, so that what they send now is served before their older messages (the backlog mode). 0: the queue serves oldest first.", q...),
		freshFirstSince:   d("queue_fresh_first_since_timestamp_seconds", "When the queue's first tenant now in the backlog mode entered it (unix seconds; absent while none is).", q...),
		oldMessages:       d("queue_old_messages", "Messages on the old side of standing backlogs: they wait in the backlog lane, served behind fresh traffic with a guaranteed share.", q...),
		oldOldest:         d("queue_old_oldest_message_age_seconds", "Age of the oldest message on the old side of a standing backlog.", q...),
		firstAttemptOld:   d("queue_old_first_attempt_age_seconds", "Time from send to first delivery of the messages served from the old side of a backlog (the rest of queue_first_attempt_age_seconds were fresh).", q...),
		tenantFreshFirst:  d("tenant_fresh_first_since_timestamp_seconds", "When a tenant's backlog mode engaged (unix seconds; only for tenants in it): what it sends now is served before its older messages.", "queue", "tenant"),
		live:              d("store_live_messages", "Messages whose records the log holds."),
		segments:          d("store_segments", "Log segments on disk."),
		logBytes:          d("store_log_bytes", "Log bytes since the last checkpoint."),
		ckpBytes:          d("store_snapshot_bytes", "Size of every queue's newest snapshot, summed."),
		ckps:              d("store_snapshots_total", "Snapshots written."),
		written:           d("store_written_bytes_total", "Bytes appended to the log."),
		failed:            d("store_failed_writes_total", "Writes or fsyncs that failed."),
		resent:            d("store_resent_writes_total", "Writes sent again because their outcome was in doubt (cluster mode: a stream leader changed or was lost with them in flight, or a former leader may have refused them)."),
		fs:                d("store_fsync_seconds", "Latency of fsync."),
		diskFree:          d("store_disk_free_bytes", "Free space of the data directory's file system (what an unprivileged process may use)."),
		diskReserve:       d("store_disk_reserve_bytes", "Free space below which new messages are refused (the disk alarm)."),
		diskAlarm:         d("store_disk_alarm", "1 while free space is below the reserve: sends are refused, receives, deletes and purges go on."),
		queueSeries:       d("queues_without_series", "Queues summed under queue=\"_others\" because more than the bound have series of their own."),
		segsRemoved:       d("store_segments_removed_total", "Log segment files removed once no live message was in them."),
		badReleases:       d("store_bad_releases_total", "Releases of a body the store did not hold for the broker (a bug; nothing is freed for them). 0 in a healthy broker."),
		allUnreadable:     d("messages_unreadable_total", "Messages of every queue dropped because their body could not be read back from disk. 0 in a healthy broker."),
		members:           d("cluster_members", "Live nodes of the cluster, as this node sees them."),
		owned:             d("cluster_partitions_owned", "Partitions (queues, and the catalog) this node owns."),
		owner:             d("cluster_queue_owner", "1 for the node that owns each queue (as this node sees it).", "queue", "node"),
		failovers:         d("cluster_failovers_total", "Partitions this node took over after their owner's lease expired (the owner crashed or was cut off)."),
		handovers:         d("cluster_handovers_total", "Partitions this node handed over to their preferred node."),
		acquireFailed:     d("cluster_acquire_failures_total", "Takeovers of a partition by this node that failed."),
		renewFailed:       d("cluster_lease_renew_failures_total", "Lease renewals that went unanswered (the lease was kept; the store's fence keeps the log safe)."),
		forwarded:         d("cluster_forwarded_requests_total", "Requests this node forwarded to the node that owns their queue or topic."),
		fwdResent:         d("cluster_forward_resends_total", "Forwarded requests sent again because the node they went to did not serve the queue (it had just moved) or was gone; nothing was done there."),
		fwdLost:           d("cluster_forwards_owner_lost_total", "Forwarded requests whose node went away (died, or its routes were cut) while they waited for its answer: idempotent ones were sent again to the next owner, the others answered ServiceUnavailable."),
		fwdSilent:         d("cluster_forwards_owner_silent_total", "Forwarded requests answered ServiceUnavailable because their queue's owner did not answer (its machine or network down: silent for a second) and no other node served the queue yet."),
		cutOff:            d("cluster_cut_off", "1 while this node reaches no other node of its cluster (it then answers no request about a queue), else 0."),
		published:         d("topic_published_total", "Messages published to the topic.", "topic"),
		deliveries:        d("topic_deliveries_total", "What became of each publish for each subscription: delivered (its queue took it), filtered (its filter policy kept it out), refused (its queue refused it for good, or does not exist: dropped), dead_lettered (sent to the subscription's dead-letter queue).", "topic", "outcome"),
		topicHeld:         d("topic_held_messages", "Publishes the topic holds for subscriptions that have not taken them yet (the fan-out backlog).", "topic"),
		fanOutLag:         d("topic_fanout_lag_seconds", "Time from a publish to a subscription's queue taking it (the fan-out lag).", "topic"),
		firstSubscriber:   d("topic_first_subscriber_first_attempt_seconds", "AgeOfFirstSubscriberFirstAttempt: time from a publish to the first receive of it by any subscription's consumer, once a publish (the fan-out health measure: it stays flat while one subscriber keeps up). Counted by the node that owns the topic, since it took it.", "topic"),
		subscriptionFirst: d("topic_subscription_first_attempt_seconds", "Time from a publish to the first receive of it from one subscription's queue (its age at first attempt, fan-out lag included). Counted by the node that owns the queue, since it took it.", "topic", "queue"),
		maxQueues:         maxQueues,
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ctr := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	all := c.b.Stats()
	stats, others := boundQueues(all, c.maxQueues)
	g(c.queueSeries, float64(len(all)-len(stats)))
	if others != nil {
		stats = append(stats, *others)
	}
	for _, s := range stats {
		q := s.Name
		g(c.messages, float64(s.Visible), q, "visible")
		g(c.messages, float64(s.InFlight), q, "inflight")
		g(c.messages, float64(s.Delayed), q, "delayed")
		g(c.oldest, s.OldestAge.Seconds(), q)
		g(c.quietOldest, s.QuietOldestAge.Seconds(), q)
		g(c.noisyOldest, s.NoisyOldestAge.Seconds(), q)
		ctr(c.redriven, float64(s.Redriven), q)
		ctr(c.retried, float64(s.Retried), q)
		ctr(c.deferred, float64(s.Deferred), q)
		ctr(c.rejected, float64(s.Rejected), q)
		ctr(c.unreadable, float64(s.Unreadable), q)
		g(c.noisy, float64(s.NoisyTenants), q)
		for _, l := range []string{"live", "backlog"} {
			g(c.lane, float64(s.Lanes[l]), q, l)
		}
		for l, n := range s.Lanes {
			if l != "live" && l != "backlog" {
				g(c.lane, float64(n), q, l)
			}
		}
		ctr(c.sent, float64(s.Sent), q)
		ctr(c.throttled, float64(s.Throttled), q)
		ctr(c.received, float64(s.Received), q)
		ctr(c.empty, float64(s.EmptyReceives), q)
		ctr(c.deleted, float64(s.Deleted), q)
		ctr(c.deadLettered, float64(s.DeadLettered), q)
		ctr(c.sidelined, float64(s.Sidelined), q)
		ctr(c.spilled, float64(s.Spilled), q)
		ctr(c.heldBack, float64(s.HeldBack), q)
		ctr(c.sendsHeld, float64(s.SendsHeld), q)
		ctr(c.sendsHeldOut, float64(s.SendsHeldOut), q)
		ctr(c.sendsHeldTime, s.SendsHeldTime.Seconds(), q)
		g(c.waiting, float64(s.WaitingReceives), q)
		for _, r := range []string{"retention", "max_age", "watermark", "exhausted", "rejected"} {
			ctr(c.dropped, float64(s.Dropped[r]), q, r)
		}
		count, buckets := cumulative(sluicetype.FirstAttemptBounds, s.FirstAttempt)
		ch <- prometheus.MustNewConstHistogram(c.firstAttempt, count, s.FirstAttemptSum.Seconds(), buckets, q)
		count, buckets = cumulative(sluicetype.FirstAttemptBounds, s.FirstAttemptOld)
		ch <- prometheus.MustNewConstHistogram(c.firstAttemptOld, count, s.FirstAttemptOldSum.Seconds(), buckets, q)
		g(c.freshFirst, float64(s.FreshFirstTenants), q)
		if !s.FreshFirstSince.IsZero() {
			g(c.freshFirstSince, float64(s.FreshFirstSince.UnixMilli())/1000, q)
		}
		g(c.oldMessages, float64(s.OldMessages), q)
		g(c.oldOldest, s.OldOldestAge.Seconds(), q)
		if q == "_others" {
			continue // tenants only for queues with series of their own
		}
		for _, t := range s.Tenants {
			g(c.tenantMessages, float64(t.Ready), q, t.Name, "ready")
			g(c.tenantMessages, float64(t.InFlight), q, t.Name, "inflight")
			g(c.tenantOldest, t.OldestAge.Seconds(), q, t.Name)
			if t.FreshFirst {
				g(c.tenantFreshFirst, float64(t.FreshFirstSince.UnixMilli())/1000, q, t.Name)
			}
		}
		g(c.tenantMessages, float64(s.Others.Ready), q, "_others", "ready")
		g(c.tenantMessages, float64(s.Others.InFlight), q, "_others", "inflight")
		g(c.tenantOldest, s.Others.OldestAge.Seconds(), q, "_others")
	}
	st := c.b.StoreStats()
	g(c.live, float64(st.LiveMessages))
	g(c.dead, float64(st.DeadRecords))
	g(c.diskBytes, float64(st.DiskBytes))
	g(c.liveBytes, float64(st.LiveBytes))
	g(c.deadBytes, float64(st.DeadBytes))
	ctr(c.relocated, float64(st.Relocated))
	g(c.segments, float64(st.Segments))
	g(c.logBytes, float64(st.LogBytes))
	g(c.ckpBytes, float64(st.SnapshotBytes))
	ctr(c.ckps, float64(st.Snapshots))
	ctr(c.written, float64(st.BytesWritten))
	ctr(c.failed, float64(st.FailedWrites))
	ctr(c.resent, float64(st.ResentWrites))
	ctr(c.segsRemoved, float64(st.SegmentsRemoved))
	ctr(c.badReleases, float64(st.BadReleases))
	ctr(c.allUnreadable, float64(st.Unreadable))
	bounds := make([]float64, len(st.FsyncBounds))
	for i, b := range st.FsyncBounds {
		bounds[i] = b.Seconds()
	}
	count, buckets := cumulative(bounds, st.FsyncBuckets)
	ch <- prometheus.MustNewConstHistogram(c.fs, count, st.FsyncSeconds, buckets)
	if cs := c.b.ClusterStatus(); cs != nil {
		g(c.members, float64(len(cs.Members)))
		g(c.owned, float64(cs.Owned))
		for q, n := range cs.Owners {
			if n != "" {
				g(c.owner, 1, q, n)
			}
		}
		ctr(c.failovers, float64(cs.Failovers))
		ctr(c.handovers, float64(cs.Handovers))
		ctr(c.acquireFailed, float64(cs.AcquireFailures))
		ctr(c.renewFailed, float64(cs.RenewFailures))
		ctr(c.forwarded, float64(cs.Forwarded))
		ctr(c.fwdResent, float64(cs.Resent))
		ctr(c.fwdLost, float64(cs.OwnerLost))
		ctr(c.fwdSilent, float64(cs.OwnerSilent))
		cut := 0.0
		if cs.CutOff {
			cut = 1
		}
		g(c.cutOff, cut)
	}
	for _, name := range c.b.Topics() {
		f, err := c.b.TopicFigures(name)
		if err != nil {
			continue // deleted meanwhile
		}
		ctr(c.published, float64(f.Published), name)
		ctr(c.deliveries, float64(f.Delivered), name, "delivered")
		ctr(c.deliveries, float64(f.Filtered), name, "filtered")
		ctr(c.deliveries, float64(f.Refused), name, "refused")
		ctr(c.deliveries, float64(f.Dead), name, "dead_lettered")
		g(c.topicHeld, float64(f.Held), name)
		count, buckets := cumulative(sluicetype.FirstAttemptBounds, f.Lag)
		ch <- prometheus.MustNewConstHistogram(c.fanOutLag, count, f.LagSum.Seconds(), buckets, name)
		count, buckets = cumulative(sluicetype.FirstAttemptBounds, f.FirstAttempt.Counts)
		ch <- prometheus.MustNewConstHistogram(c.firstSubscriber, count, f.FirstAttempt.Sum.Seconds(), buckets, name)
	}
	for _, a := range c.b.SubscriptionFirstAttempts() {
		count, buckets := cumulative(sluicetype.FirstAttemptBounds, a.Age.Counts)
		ch <- prometheus.MustNewConstHistogram(c.subscriptionFirst, count, a.Age.Sum.Seconds(), buckets, a.Topic, a.Queue)
	}
	g(c.diskFree, float64(st.DiskFree))
	g(c.diskReserve, float64(st.DiskReserve))
	alarm := 0.0
	if st.DiskAlarm {
		alarm = 1
	}
	g(c.diskAlarm, alarm)
}

// cumulative turns per-bucket counts (one per bound, then one above them
// all) into Prometheus's cumulative buckets and the total count.
func cumulative(bounds []float64, counts []int64) (uint64, map[float64]uint64) {
	buckets := make(map[float64]uint64, len(bounds))
	var n uint64
	for i, b := range bounds {
		if i < len(counts) {
			n += uint64(counts[i])
		}
		buckets[b] = n
	}
	if len(counts) > len(bounds) {
		n += uint64(counts[len(bounds)])
	}
	return n, buckets
}
