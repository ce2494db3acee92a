package admin

import "sync"

// point is one sample of a queue's figures.
type point struct {
	T         int64                  `json:"t"` // unix seconds
	Visible   int                    `json:"visible"`
	InFlight  int                    `json:"in_flight"`
	Delayed   int                    `json:"delayed"`
	OldestAge float64                `json:"oldest_age_seconds"`
	Sent      int64                  `json:"sent"`
	Received  int64                  `json:"received"`
	Throttled int64                  `json:"throttled"`
	Dropped   uint64                 `json:"dropped"`
	Tenants   map[string]tenantPoint `json:"tenants,omitempty"`
}

type tenantPoint struct {
	Ready     int     `json:"ready"`
	OldestAge float64 `json:"oldest_age_seconds"`
}

// history keeps the last n samples of every queue in ring buffers, so its
// memory is bounded by queues x n x the top tenants.
type history struct {
	mu sync.Mutex
	n  int
	q  map[string]*ringBuf
}

type ringBuf struct {
	pts  []point
	next int
	full bool
}

func newHistory(n int) *history { return &history{n: max(n, 2), q: map[string]*ringBuf{}} }

func (h *history) add(queue string, p point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.q[queue]
	if r == nil {
		r = &ringBuf{pts: make([]point, h.n)}
		h.q[queue] = r
	}
	r.pts[r.next] = p
	r.next = (r.next + 1) % h.n
	if r.next == 0 {
		r.full = true
	}
}

// get returns a queue's samples, oldest first.
func (h *history) get(queue string) []point {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.q[queue]
	if r == nil {
		return []point{}
	}
	if !r.full {
		return append([]point(nil), r.pts[:r.next]...)
	}
	return append(append([]point(nil), r.pts[r.next:]...), r.pts[:r.next]...)
}

// prune forgets queues that no longer exist.
func (h *history) prune(live map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q := range h.q {
		if !live[q] {
			delete(h.q, q)
		}
	}
}
