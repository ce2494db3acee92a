package cluster

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/store"
)

// holder is the value of every key a manager holds.
type holder struct {
	Node     string `json:"node"`
	Instance string `json:"instance"`
}

func decodeHolder(b []byte) (holder, bool) {
	var h holder
	if err := json.Unmarshal(b, &h); err != nil || h.Node == "" || h.Instance == "" {
		return holder{}, false
	}
	return h, true
}

// member is a live node as the bucket shows it.
type member struct {
	holder
	// since is when this manager first saw this instance of the node.
	since time.Time
}

// gone says how a partition's last lease ended.
type gone uint8

const (
	goneReleased gone = iota + 1 // its holder deleted it
	goneExpired                  // it was not renewed in time
)

// view is the bucket as its watcher delivered it: it lags the bucket, so
// it only guides; the compare-and-set writes decide.
type view struct {
	members map[string]member // by key
	owners  map[store.PartitionID]holder
	gone    map[store.PartitionID]gone
	// seen is when each held key was last written (created or renewed),
	// as the watcher delivered it: a key not renewed for longer than a
	// lease lasts is checked in the bucket itself (checkStale).
	seen map[string]time.Time
	// overdue are leases the bucket still holds for a silent node although
	// they were last written longer than a lease lasts ago (checkStale):
	// by the revision to overwrite. The bucket expires such a lease late
	// or not at all while it elects a leader (only its leader expires
	// keys); a node takes one over with a write fenced on that revision.
	overdue map[store.PartitionID]uint64
}

func newView() view {
	return view{members: map[string]member{}, owners: map[store.PartitionID]holder{}, gone: map[store.PartitionID]gone{},
		seen: map[string]time.Time{}, overdue: map[store.PartitionID]uint64{}}
}

// apply applies one watched entry seen at now, and reports whether a
// partition's lease ended.
func (v *view) apply(e jetstream.KeyValueEntry, now time.Time) (freed bool) {
	key, put := e.Key(), e.Operation() == jetstream.KeyValuePut
	if put {
		v.seen[key] = now
	} else {
		delete(v.seen, key)
	}
	if strings.HasPrefix(key, nodePrefix) {
		if !put {
			delete(v.members, key)
			return false
		}
		h, ok := decodeHolder(e.Value())
		if !ok {
			return false
		}
		if old, ok := v.members[key]; ok && old.holder == h {
			return false
		}
		v.members[key] = member{holder: h, since: now}
		return false
	}
	p, ok := parsePartKey(key)
	if !ok {
		return false
	}
	delete(v.overdue, p) // written since: the revision it named is old
	if put {
		// A value that is not a holder's still holds the lease: leave the
		// key alone (it expires, or its writer deletes it).
		h, _ := decodeHolder(e.Value())
		v.owners[p] = h
		delete(v.gone, p)
		return false
	}
	delete(v.owners, p)
	// A TTL's expiry leaves a marker that reads as a purge; a holder's
	// release is a delete.
	if e.Operation() == jetstream.KeyValuePurge {
		v.gone[p] = goneExpired
	} else {
		v.gone[p] = goneReleased
	}
	return true
}

// expire removes a key the bucket no longer holds although no watched
// entry said so (the watcher lags): a member gone, or a lease expired.
func (v *view) expire(key string) {
	delete(v.seen, key)
	if strings.HasPrefix(key, nodePrefix) {
		delete(v.members, key)
		return
	}
	if p, ok := parsePartKey(key); ok {
		delete(v.overdue, p)
		if _, held := v.owners[p]; held {
			delete(v.owners, p)
			v.gone[p] = goneExpired
		}
	}
}

// overdueLease marks partition p's lease, held by a silent node and last
// written at revision rev longer than a lease lasts ago, as expired: it
// is taken over at rev.
func (v *view) overdueLease(p store.PartitionID, rev uint64) {
	delete(v.seen, partKey(p))
	delete(v.owners, p)
	v.gone[p] = goneExpired
	v.overdue[p] = rev
}

// carry keeps what a fresh view (after the watcher was restarted) cannot
// know from old: how long each member has been one, and how leases ended.
func (v *view) carry(old view) {
	for k, m := range v.members {
		if o, ok := old.members[k]; ok && o.holder == m.holder {
			m.since = o.since
			v.members[k] = m
		}
	}
	for p, g := range old.gone {
		if _, held := v.owners[p]; !held {
			if _, ok := v.gone[p]; !ok {
				v.gone[p] = g
			}
		}
	}
}
