package jsstore

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/internal/store"
)

// Read reads the record (p, pos) back through its hint: the messages from
// its sequence (the cache's, else a direct get from any replica, else the
// leader's when the replica has not got it yet), checked (checksum, and
// that the entry there is (p, pos)). A record that fails the check is
// never returned: store.ErrCorrupt when a message does not decode,
// store.ErrNotFound when it is not the record's, or the message is gone
// (purged, the partition dropped) or was never written.
func (s *Store) Read(p store.PartitionID, pos uint64, h store.Hint) ([]byte, error) {
	seq := seqOf(h)
	s.mu.Lock()
	pt := s.parts[p]
	dropped := pt != nil && pt.dropped
	purged := pt != nil && pt.known && seq < max(pt.first, pt.purgingTo)
	s.mu.Unlock()
	if dropped {
		return nil, fmt.Errorf("%w: partition %d is dropped", store.ErrNotFound, p)
	}
	if purged {
		return nil, fmt.Errorf("%w: partition %d position %d: message %d was purged", store.ErrNotFound, p, pos, seq)
	}
	if seq == 0 || h.D == 0 {
		return nil, fmt.Errorf("%w: partition %d position %d: no such hint %+v", store.ErrNotFound, p, pos, h)
	}
	var data []byte
	for j := uint32(0); j < h.D; j++ {
		es, err := s.frameAt(p, seq+uint64(j))
		if err != nil {
			return nil, fmt.Errorf("partition %d position %d: %w", p, pos, err)
		}
		var e entry
		switch {
		case j == 0 && int(h.C) < len(es):
			e = es[h.C]
		case j > 0 && len(es) > 0:
			e = es[0]
		default:
			return nil, fmt.Errorf("%w: partition %d position %d is not at %+v", store.ErrNotFound, p, pos, h)
		}
		last := j == h.D-1
		if e.pos != pos || e.cont() != (j > 0) || e.more() == last || e.base() == kindDrop {
			return nil, fmt.Errorf("%w: partition %d position %d is not at %+v", store.ErrNotFound, p, pos, h)
		}
		if h.D == 1 {
			return e.data, nil
		}
		data = append(data, e.data...)
	}
	return data, nil
}

// holds reports whether p's stream must hold message seq as far as this
// store knows: it wrote or replayed the stream up to seq or beyond, and
// nothing it purged reaches seq.
func (s *Store) holds(p store.PartitionID, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p]
	return pt != nil && pt.known && !pt.dropped && !pt.lost && seq >= max(pt.first, pt.purgingTo, 1) && seq <= pt.tail
}

// frameAt returns the entries of message seq of p's stream.
func (s *Store) frameAt(p store.PartitionID, seq uint64) ([]entry, error) {
	if es, ok := s.cache.get(p, seq); ok {
		return es, nil
	}
	stream := s.streamName(p)
	ms, err := s.directGet(s.ctx, stream, seq, 1, 0)
	var m msg
	if err == nil && len(ms) == 1 && ms[0].seq == seq {
		m = ms[0]
	} else {
		// Not on the replica that answered (it may lag), or no answer:
		// the leader decides.
		m, err = s.leaderGet(s.ctx, stream, msgGetRequest{Seq: seq})
		if errors.Is(err, errNoMsg) && s.holds(p, seq) {
			// This store wrote or replayed the stream past seq and has
			// not purged it: whoever answered is not the stream's leader
			// any more (one cut off that has not stepped down yet), or
			// lags. Not a loss: the read may be tried again.
			return nil, fmt.Errorf("jsstore: message %d of %s is missing where the stream's leader answered, though the stream holds it: %w", seq, stream, err)
		}
		if errors.Is(err, errNoMsg) {
			return nil, fmt.Errorf("%w: message %d of %s is not there (purged or never written)", store.ErrNotFound, seq, stream)
		}
		if err != nil {
			return nil, fmt.Errorf("jsstore: reading message %d of %s: %w", seq, stream, err)
		}
	}
	fp, es, err := decodeFrame(m.data)
	if err != nil {
		return nil, fmt.Errorf("%w: message %d of %s: %v", store.ErrCorrupt, seq, stream, err)
	}
	if fp != p {
		return nil, fmt.Errorf("%w: message %d of %s holds records of partition %d", store.ErrCorrupt, seq, stream, fp)
	}
	s.cache.put(p, seq, es, len(m.data))
	return es, nil
}

// cache holds decoded messages, least recently used out first, up to max
// bytes of their payloads.
type cache struct {
	max int64

	mu   sync.Mutex
	size int64
	ll   *list.List // front: most recent
	m    map[cacheKey]*list.Element
}

type cacheKey struct {
	p   store.PartitionID
	seq uint64
}

type cached struct {
	k    cacheKey
	es   []entry
	size int64
}

func newCache(max int64) *cache {
	return &cache{max: max, ll: list.New(), m: map[cacheKey]*list.Element{}}
}

func (c *cache) get(p store.PartitionID, seq uint64) ([]entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[cacheKey{p, seq}]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cached).es, true
}

func (c *cache) put(p store.PartitionID, seq uint64, es []entry, size int) {
	if int64(size) > c.max/4 {
		return // one message would crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{p, seq}
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.ll.PushFront(&cached{k: k, es: es, size: int64(size)})
	c.size += int64(size)
	for c.size > c.max {
		el := c.ll.Back()
		c.removeLocked(el)
	}
}

func (c *cache) removeLocked(el *list.Element) {
	v := el.Value.(*cached)
	c.ll.Remove(el)
	delete(c.m, v.k)
	c.size -= v.size
}

// forget drops p's messages (a drop).
func (c *cache) forget(p store.PartitionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.ll.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cached).k.p == p {
			c.removeLocked(el)
		}
		el = next
	}
}

func (c *cache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.m)
	c.size = 0
}
