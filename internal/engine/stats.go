package engine

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Stats returns every queue's figures (for metrics and the dashboard).
func (e *Engine) Stats() []st.QueueStats {
	var out []st.QueueStats
	for _, o := range e.all() {
		out = append(out, o.Stats(e.nameOf))
	}
	return out
}

// StoreStats returns the store's figures.
func (e *Engine) StoreStats() st.StoreStats {
	s := e.st.Stats()
	d := e.st.Disk()
	out := st.StoreStats{LiveMessages: s.KeptRecords, Segments: s.Segments, Partitions: s.PartitionsAlive, LogBytes: s.LogBytes,
		SnapshotBytes: s.SnapshotBytes, Snapshots: s.Snapshots, Fsyncs: s.Fsyncs, FsyncBuckets: s.FsyncBuckets,
		FsyncSeconds: s.FsyncSeconds, BytesWritten: s.BytesWritten, FailedWrites: s.FailedWrites, ResentWrites: s.ResentWrites, DeadRecords: s.DeadRecords,
		Relocated: s.Relocated, DiskBytes: s.DiskBytes, LiveBytes: s.LiveBytes, DeadBytes: s.DeadBytes,
		DiskFree: d.Free, DiskReserve: d.Reserve, DiskAlarm: d.Alarm,
		SegmentsRemoved: s.SegmentsRemoved, BadReleases: s.BadReleases, Unreadable: e.host.Unreadable.Load()}
	out.FsyncBounds = append([]time.Duration(nil), store.FsyncBounds[:]...)
	return out
}

// Tenants lists the tenants of a queue that hold messages, largest backlog
// first, at most max (0: all).
func (e *Engine) Tenants(name string, max int) ([]st.TenantInfo, error) {
	o, err := e.Queue(name)
	if err != nil {
		return nil, err
	}
	return o.Tenants(max), nil
}

// Tenant describes one tenant of a queue.
func (e *Engine) Tenant(name, tenant string) (st.TenantInfo, error) {
	o, err := e.Queue(name)
	if err != nil {
		return st.TenantInfo{}, err
	}
	return o.Tenant(tenant), nil
}

// SourcesOf lists the queues whose dead-letter queue is name.
func (e *Engine) SourcesOf(name string) []string { return e.sourcesOf(e.ARN(name)) }

// DestinationFor is a queue the ctx's caller may use, as a destination of
// hand-overs: here or, in a cluster, on another node.
func (e *Engine) DestinationFor(ctx context.Context, name string) (partition.Destination, error) {
	if !st.Authorized(ctx, name) {
		return nil, partition.NoQueue()
	}
	if d := e.destination(name); d != nil {
		return d, nil
	}
	return nil, partition.NoQueue()
}

// Redrive moves a ready message of queue from to queue to (or, when to is
// "", back to the queue it was dead-lettered from; the ctx's caller must
// be allowed to use it), with its receive count reset (and its retry level
// and failures, unless keepFailures). It reports false when the message is
// not there or not ready.
func (e *Engine) Redrive(ctx context.Context, from string, seq uint64, to string, keepFailures bool) (bool, error) {
	src, err := e.Queue(from)
	if err != nil {
		return false, err
	}
	resolve := func(arn string) (partition.Destination, error) {
		name, err := e.QueueNameFromARN(arn)
		if err != nil {
			return nil, err
		}
		return e.DestinationFor(ctx, name)
	}
	var dst partition.Destination
	if to != "" {
		if dst, err = e.DestinationFor(ctx, to); err != nil {
			return false, err
		}
	}
	return src.Redrive(ctx, seq, dst, resolve, keepFailures)
}
