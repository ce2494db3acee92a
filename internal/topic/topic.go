// Package topic is a topic's state machine: its settings and
// subscriptions, the publishes some subscription has not taken yet and,
// for a FIFO topic, its deduplication window and sequence numbers.
//
// A topic is a partition of its own. A publish is one record there (one
// write, however many subscriptions), numbered in the topic (its Seq,
// which it keeps in snapshots, where its position changes). Each
// subscription's queue marks the last publish it took (the origin marks
// of package queue), so a delivery is at most once per queue and a cursor
// that starts again after a crash starts at the mark: the topic needs no
// cursor records of its own. Publishes every subscription went past are
// trimmed and not carried into the next snapshot.
//
// Like package queue, it is deterministic and takes time from its caller:
// commands return the records to persist, and Apply makes a durable record
// take effect, live and in replay alike.
package topic

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/queue/dedup"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Topic is one topic's state.
type Topic struct {
	info record.TopicInfo
	last uint64 // the partition's last position, durable or handed out
	seq  uint64 // the last publish number handed out or applied
	// pubs are the publishes kept, by number: those above the trim.
	pubs    []*record.Record
	trimmed uint64 // every publish up to it is gone
	dedup   dedup.Memory
}

// New returns a topic with info (empty until its TopicMeta is applied).
func New(info record.TopicInfo) *Topic {
	return &Topic{info: info}
}

// Info returns the topic's settings and subscriptions (a copy).
func (t *Topic) Info() record.TopicInfo { return cloneInfo(t.info) }

// Last is the partition's last position; SetLast sets it (after a
// replay, or after a failed write, to where the partition ends).
func (t *Topic) Last() uint64 { return t.last }

// SetLast sets the partition's last position.
func (t *Topic) SetLast(pos uint64) { t.last = pos }

func (t *Topic) take() uint64 {
	t.last++
	return t.last
}

// MetaRecord returns the record that makes info the topic's settings and
// subscriptions, whole.
func (t *Topic) MetaRecord(info record.TopicInfo) *record.Record {
	c := cloneInfo(info)
	return &record.Record{Type: record.TopicMeta, Pos: t.take(), Topic: &c}
}

// EpochRecord returns the record a new owner of the topic's partition
// writes first (in a cluster): it fences off the former owner's appends.
func (t *Topic) EpochRecord(node string, term uint64) *record.Record {
	return &record.Record{Type: record.Epoch, Pos: t.take(), Node: node, Term: term}
}

// PublishSpec is a message to publish, checked already (package wire).
type PublishSpec struct {
	ID      string // its message id
	Message string // as subscribers get it (MessageStructure resolved)
	Subject string
	Group   string // MessageGroupId
	Dedup   string // MessageDeduplicationId, or the content's with ContentBasedDeduplication
	Sender  string // the publisher
	Attrs   map[string]st.AttributeValue
	// JSON: MessageStructure json (Message is a JSON object of messages
	// by protocol).
	JSON bool
}

// PublishResult is the outcome of a publish: the record to persist, or
// for a FIFO duplicate within the deduplication window the first
// message's id and sequence number.
type PublishResult struct {
	Record *record.Record
	Dup    bool
	ID     string
	SeqNum string // FIFO topics
}

// Publish returns the record of a new publish. A FIFO topic's
// deduplication id is held while the record is written, so a duplicate
// published meanwhile is answered as one (Unwritten lets it go).
func (t *Topic) Publish(now time.Time, in PublishSpec) PublishResult {
	p := &record.Payload{ID: in.ID, Body: in.Message, Sender: in.Sender, Dedup: in.Dedup, Attrs: in.Attrs}
	var key string
	if t.info.FIFO {
		ms := now.UnixMilli()
		t.dedup.Expire(ms)
		key = t.dedupKey(in.Group, in.Dedup)
		if e, ok := t.dedup.Seen(key, ms); ok {
			return PublishResult{Dup: true, ID: e.ID, SeqNum: e.SeqNum}
		}
		p.SeqNum = t.dedup.Next(uint64(now.UnixNano()))
	}
	t.seq++
	r := &record.Record{Type: record.Publish, Pos: t.take(), Number: t.seq, Payload: p, Subject: in.Subject, Group: in.Group, Published: now.UnixMilli(), JSON: in.JSON}
	if t.info.FIFO {
		t.dedup.Hold(key, dedup.Entry{ID: p.ID, SeqNum: p.SeqNum, Until: now.Add(dedup.Window).UnixMilli(), Pending: r.Pos})
	}
	return PublishResult{Record: r, ID: p.ID, SeqNum: p.SeqNum}
}

// dedupKey is the key a FIFO topic remembers a deduplication id by: per
// message group when FifoThroughputScope is MessageGroup.
func (t *Topic) dedupKey(group, id string) string {
	return dedup.Key(t.info.Attrs["FifoThroughputScope"] == "MessageGroup", group, id)
}

// Unwritten forgets what a record that could not be written held: a
// publish's number (when it was the last handed out) and its FIFO
// deduplication id.
func (t *Topic) Unwritten(r *record.Record) {
	if r.Type != record.Publish {
		return
	}
	if r.Number == t.seq {
		t.seq--
	}
	if t.info.FIFO && r.Payload != nil {
		t.dedup.Failed(t.dedupKey(r.Group, r.Payload.Dedup), r.Pos)
	}
}

// Apply makes a durable record take effect (live, or as replay reads
// it: a record replayed on top of a snapshot that holds it does nothing).
func (t *Topic) Apply(r *record.Record) error {
	t.last = max(t.last, r.Pos)
	switch r.Type {
	case record.TopicMeta:
		if r.Topic == nil {
			return fmt.Errorf("topic: a topic-meta record without settings")
		}
		t.info = cloneInfo(*r.Topic)
	case record.Publish:
		if r.Payload == nil || r.Number == 0 {
			return fmt.Errorf("topic: a publish record without a message or number")
		}
		t.seq = max(t.seq, r.Number)
		if r.Number <= t.trimmed || len(t.pubs) > 0 && r.Number <= t.pubs[len(t.pubs)-1].Number {
			return nil // trimmed, or held already
		}
		t.pubs = append(t.pubs, r)
		if t.info.FIFO {
			t.dedup.Confirm(t.dedupKey(r.Group, r.Payload.Dedup),
				dedup.Entry{ID: r.Payload.ID, SeqNum: r.Payload.SeqNum, Until: r.Published + dedup.Window.Milliseconds()}, r.Pos)
		}
	case record.Dedup:
		t.dedup.Confirm(r.Key, dedup.Entry{ID: r.ID, SeqNum: r.SeqNum, Until: r.Until}, 0)
	case record.State:
		t.dedup.SetLast(r.NextSeqNum)
		t.seq = max(t.seq, r.Number)
	case record.Epoch:
		// Only its position: it fences off a former owner's appends.
	default:
		return fmt.Errorf("topic: a %s record in a topic", r.Type)
	}
	return nil
}

// After returns up to n publishes after number seq, in order: what a
// subscription whose cursor is at seq looks at next.
func (t *Topic) After(seq uint64, n int) []*record.Record {
	i, _ := slices.BinarySearchFunc(t.pubs, seq+1, func(r *record.Record, s uint64) int {
		switch {
		case r.Number < s:
			return -1
		case r.Number > s:
			return 1
		}
		return 0
	})
	end := min(len(t.pubs), i+n)
	return t.pubs[i:end]
}

// LastNumber is the number of the last publish (handed out or applied).
func (t *Topic) LastNumber() uint64 { return t.seq }

// Trim lets go of every publish up to number seq: each subscription went
// past it (took it, or filtered it out). The next snapshot holds none of
// them.
func (t *Topic) Trim(seq uint64) {
	seq = min(seq, t.seq)
	if seq <= t.trimmed {
		return
	}
	i := 0
	for i < len(t.pubs) && t.pubs[i].Number <= seq {
		t.pubs[i] = nil
		i++
	}
	t.pubs = t.pubs[i:]
	t.trimmed = seq
}

// Held is how many publishes the topic holds (not trimmed).
func (t *Topic) Held() int { return len(t.pubs) }

// Snapshot returns the records that rebuild the topic: its settings and
// subscriptions, its counters, its deduplication window at now, and the
// publishes it holds (with their numbers). Their positions are for the
// caller to give.
func (t *Topic) Snapshot(now time.Time) []*record.Record {
	info := cloneInfo(t.info)
	recs := []*record.Record{{Type: record.TopicMeta, Topic: &info}}
	// Seq is the last number: with every publish trimmed, the next one
	// still gets a number no queue has marked.
	recs = append(recs, &record.Record{Type: record.State, NextSeqNum: t.dedup.Last(), Number: t.seq})
	t.dedup.Each(now.UnixMilli(), func(key string, e dedup.Entry) bool {
		recs = append(recs, &record.Record{Type: record.Dedup, Key: key, ID: e.ID, SeqNum: e.SeqNum, Until: e.Until})
		return true
	})
	for _, p := range t.pubs {
		c := *p
		recs = append(recs, &c)
	}
	return recs
}

func cloneInfo(in record.TopicInfo) record.TopicInfo {
	out := in
	out.Attrs = maps.Clone(in.Attrs)
	out.Tags = maps.Clone(in.Tags)
	if in.Subs != nil {
		out.Subs = make(map[string]record.Subscription, len(in.Subs))
		for id, s := range in.Subs {
			s.Attrs = maps.Clone(s.Attrs)
			out.Subs[id] = s
		}
	}
	return out
}
