// Package dedup is a FIFO queue's deduplication window and its sequence
// numbers. SQS remembers a MessageDeduplicationId for five minutes: a
// send with an id seen in that window is answered with the first
// message's id and sequence number instead of being sent again. An id is
// held while its Send is being written (Pending), so that a duplicate
// sent meanwhile is answered as one, and let go if the write fails.
//
// It is deterministic and takes the time from its caller (unix ms), as
// the queue core does.
package dedup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Window is how long a deduplication id is remembered.
const Window = 5 * time.Minute

// Entry is a remembered deduplication id.
type Entry struct {
	ID     string // the message id it was first sent as
	SeqNum string // and its sequence number
	Until  int64  // unix ms: remembered before then
	// Pending is the position of the Send being written (0: durable).
	Pending uint64
	queued  bool // in the expiry order
}

// Memory is the window's ids, in the order they expire, and the last
// sequence number handed out. The zero Memory is empty and ready.
type Memory struct {
	m     map[string]Entry
	order []string // keys, oldest first (a key renewed is in it again)
	last  uint64
}

// Key is the key an id is remembered by: per message group when the
// queue deduplicates per group.
func Key(perGroup bool, group, id string) string {
	if perGroup {
		return group + "\x00" + id
	}
	return id
}

// ContentID is the deduplication id SQS derives from a body.
func ContentID(body string) string {
	h := sha256.Sum256([]byte(body))
	return hex.EncodeToString(h[:])
}

// Expire forgets the durable ids whose window ended by now.
func (d *Memory) Expire(now int64) {
	for len(d.order) > 0 {
		k := d.order[0]
		e, ok := d.m[k]
		if ok && e.Until > now {
			return
		}
		if ok && e.Pending == 0 {
			delete(d.m, k)
		} else if ok {
			e.queued = false // held by a write: queued again once durable
			d.m[k] = e
		}
		d.order[0] = ""
		d.order = d.order[1:]
	}
}

// Seen returns the id remembered under key, if its window is open at now.
func (d *Memory) Seen(key string, now int64) (Entry, bool) {
	e, ok := d.m[key]
	if !ok || e.Until <= now {
		return Entry{}, false
	}
	return e, true
}

// Hold remembers e under key.
func (d *Memory) Hold(key string, e Entry) {
	if d.m == nil {
		d.m = map[string]Entry{}
	}
	old, ok := d.m[key]
	e.queued = ok && old.queued
	if !e.queued {
		d.order = append(d.order, key)
		e.queued = true
	}
	d.m[key] = e
}

// Confirm makes e durable under key once its Send at pos is (live) or as
// recovery reads it, unless a later send holds the key; it notes e's
// sequence number.
func (d *Memory) Confirm(key string, e Entry, pos uint64) {
	if n, err := parseSeqNum(e.SeqNum); err == nil {
		d.last = max(d.last, n)
	}
	if old, ok := d.m[key]; ok && old.Pending != 0 && old.Pending != pos {
		return
	}
	e.Pending = 0
	d.Hold(key, e)
}

// Failed lets key go if the Send at pos, whose write failed, holds it.
func (d *Memory) Failed(key string, pos uint64) {
	if e, ok := d.m[key]; ok && pos != 0 && e.Pending == pos {
		delete(d.m, key) // its place in the order goes when it comes up
	}
}

// Next hands out a sequence number: 20 digits, increasing and not
// consecutive, like SQS's (from the time in ns, or one more than the last).
func (d *Memory) Next(nowNanos uint64) string {
	d.last = max(nowNanos, d.last+1)
	s := make([]byte, 20)
	n := d.last
	for i := 19; i >= 0; i-- {
		s[i] = byte('0' + n%10)
		n /= 10
	}
	return string(s)
}

// Last is the last sequence number handed out (for a snapshot);
// SetLast restores it (never backwards).
func (d *Memory) Last() uint64 { return d.last }

// SetLast restores the last sequence number handed out, never backwards.
func (d *Memory) SetLast(n uint64) { d.last = max(d.last, n) }

// Each calls f, oldest first, with each durable id whose window is open
// at now, once per key, until f returns false.
func (d *Memory) Each(now int64, f func(key string, e Entry) bool) {
	seen := make(map[string]bool, len(d.m))
	for _, k := range d.order {
		if e, ok := d.m[k]; ok && !seen[k] && e.Pending == 0 && e.Until > now {
			seen[k] = true
			if !f(k, e) {
				return
			}
		}
	}
}

func parseSeqNum(s string) (uint64, error) {
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("dedup: sequence number %q", s)
		}
		n = n*10 + uint64(c-'0')
	}
	return n, nil
}
