// Package admin serves the admin address: Prometheus metrics, a JSON API
// for operators (queues, tenants and their limits, the watermark,
// dead-letter queues, topics and their subscriptions), and the
// dashboard. It only translates: every figure and action comes from the
// broker.
package admin

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/partition"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Options configure the admin server.
type Options struct {
	// Clock drives the history sampler. Default: the real clock.
	Clock clock.Clock
	// Logger receives errors. Default: slog.Default().
	Logger *slog.Logger
	// SampleEvery is the history resolution. Default 10s; an hour is kept.
	SampleEvery time.Duration
	// Collectors are served on /metrics with the broker's own metrics
	// (the SQS server's request metrics).
	Collectors []prometheus.Collector
	// MaxQueueSeries bounds the queues with series of their own on
	// /metrics (the rest are summed as queue="_others"). Default
	// MaxQueueSeries.
	MaxQueueSeries int
}

// Server is the admin HTTP handler and its history sampler.
type Server struct {
	b    Broker
	opts Options
	mux  *http.ServeMux
	hist *history

	mu    sync.Mutex
	timer clock.Timer
	stop  bool
}

// New returns the admin server for b. Call Start to begin sampling the
// history the dashboard charts, and Stop to end it.
func New(b Broker, opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 10 * time.Second
	}
	if opts.MaxQueueSeries <= 0 {
		opts.MaxQueueSeries = MaxQueueSeries
	}
	s := &Server{b: b, opts: opts, mux: http.NewServeMux(), hist: newHistory(int(time.Hour / opts.SampleEvery))}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(b, opts.MaxQueueSeries), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(opts.Collectors...)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogAdapter{opts.Logger}}))
	s.mux.HandleFunc("GET /api/queues", s.queues)
	s.mux.HandleFunc("GET /api/queues/{queue}", s.onQueue(s.queue))
	s.mux.HandleFunc("GET /api/queues/{queue}/history", s.onQueue(s.history))
	s.mux.HandleFunc("GET /api/queues/{queue}/tenants", s.onQueue(s.tenants))
	s.mux.HandleFunc("GET /api/queues/{queue}/tenants/{tenant}", s.onQueue(s.tenant))
	s.mux.HandleFunc("PUT /api/queues/{queue}/tenants/{tenant}", s.onQueue(s.setTenant))
	s.mux.HandleFunc("POST /api/queues/{queue}/drop-before", s.onQueue(s.dropBefore))
	s.mux.HandleFunc("GET /api/store", s.store)
	s.mux.HandleFunc("GET /api/cluster", s.cluster)
	s.mux.HandleFunc("GET /api/cluster/streams", s.streams)
	s.routesDLQ()
	s.routesTopics()
	s.routesUI()
	return s
}

// ServeHTTP implements http.Handler.
// In a cluster, a request about a queue another node owns is forwarded
// to it (cluster.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if to := s.forwardTo(r); to != "" {
		s.forward(w, r, to)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Start begins sampling queue figures into the in-memory history.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop = false
	s.scheduleLocked()
}

func (s *Server) scheduleLocked() {
	s.timer = s.opts.Clock.AfterFunc(s.opts.SampleEvery, func() {
		s.Sample()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stop {
			s.scheduleLocked()
		}
	})
}

// Stop ends sampling.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Sample records one point of history for every queue now.
func (s *Server) Sample() {
	now := s.opts.Clock.Now()
	stats := s.b.Stats()
	live := map[string]bool{}
	for _, q := range stats {
		live[q.Name] = true
	}
	s.hist.prune(live)
	for _, q := range stats {
		tenants := map[string]tenantPoint{}
		for _, t := range q.Tenants {
			tenants[t.Name] = tenantPoint{Ready: t.Ready, OldestAge: t.OldestAge.Seconds()}
		}
		s.hist.add(q.Name, point{T: now.Unix(), Visible: q.Visible, InFlight: q.InFlight, Delayed: q.Delayed,
			OldestAge: q.OldestAge.Seconds(), Sent: q.Sent, Received: q.Received, Throttled: q.Throttled,
			Dropped: q.Dropped["retention"] + q.Dropped["max_age"] + q.Dropped["watermark"], Tenants: tenants})
	}
}

// ---- JSON API ----

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// apiError answers with the SQS-style code and message of err.
func apiError(w http.ResponseWriter, err error) {
	var e *st.Error
	status := http.StatusInternalServerError
	code := "InternalError"
	msg := "internal error"
	if errors.As(err, &e) {
		code, msg = string(e.Code), e.Message
		switch e.Code {
		case st.CodeQueueDoesNotExist, st.CodeResourceNotFound:
			status = http.StatusNotFound
		case st.CodeInternal, st.CodeServiceUnavailable:
			status = http.StatusServiceUnavailable
		default:
			status = http.StatusBadRequest
		}
	}
	if errors.Is(err, partition.ErrNotOwner) {
		// Nothing was done: a node that forwarded the request sends it to
		// the queue's new owner.
		w.Header().Set(forward.NotOwnerHeader, "1")
	}
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	apiError(w, st.Errorf(st.CodeInvalidParameterValue, format, args...))
}

// queueJSON is a queue's figures as the API shows them.
type queueJSON struct {
	Name          string            `json:"name"`
	FIFO          bool              `json:"fifo"`
	DLQ           string            `json:"dead_letter_queue,omitempty"`
	Sources       []string          `json:"dead_letter_sources,omitempty"`
	Visible       int               `json:"visible"`
	InFlight      int               `json:"in_flight"`
	Delayed       int               `json:"delayed"`
	OldestAge     float64           `json:"oldest_age_seconds"`
	QuietOldest   float64           `json:"quiet_oldest_age_seconds"`
	NoisyOldest   float64           `json:"noisy_oldest_age_seconds"`
	Retried       uint64            `json:"retried"`
	Redriven      int64             `json:"redriven"`
	NoisyTenants  int               `json:"noisy_tenants"`
	Sent          int64             `json:"sent"`
	Throttled     int64             `json:"throttled"`
	Received      int64             `json:"received"`
	EmptyReceives int64             `json:"empty_receives"`
	Waiting       int               `json:"waiting_receives"`
	HeldBack      uint64            `json:"held_back"`
	SendsHeld     int64             `json:"sends_held"`
	SendsHeldOut  int64             `json:"sends_held_timed_out"`
	Deleted       int64             `json:"deleted"`
	DeadLettered  int64             `json:"dead_lettered"`
	Sidelined     uint64            `json:"sidelined"`
	Unreadable    int64             `json:"unreadable"`
	Dropped       map[string]uint64 `json:"dropped"`
	Lanes         map[string]int    `json:"lanes"`
	// How a standing backlog is served, and whether one stands: tenants in
	// the backlog mode (fresh traffic first) since when, and the old side.
	Order           string          `json:"order"`
	FreshFirst      int             `json:"fresh_first_tenants"`
	FreshFirstSince *time.Time      `json:"fresh_first_since,omitempty"`
	OldMessages     int             `json:"old_messages"`
	OldOldestAge    float64         `json:"old_oldest_age_seconds"`
	Tenants         []st.TenantInfo `json:"tenants,omitempty"`
}

func toJSON(q st.QueueStats) queueJSON {
	j := queueJSON{Name: q.Name, FIFO: q.FIFO, DLQ: q.DLQ, Visible: q.Visible, InFlight: q.InFlight, Delayed: q.Delayed,
		OldestAge: q.OldestAge.Seconds(), QuietOldest: q.QuietOldestAge.Seconds(), NoisyOldest: q.NoisyOldestAge.Seconds(), NoisyTenants: q.NoisyTenants,
		Retried: q.Retried, Redriven: q.Redriven,
		Sent: q.Sent, Throttled: q.Throttled, Received: q.Received, EmptyReceives: q.EmptyReceives, Deleted: q.Deleted,
		Waiting: q.WaitingReceives, HeldBack: q.HeldBack, SendsHeld: q.SendsHeld, SendsHeldOut: q.SendsHeldOut,
		DeadLettered: q.DeadLettered, Sidelined: q.Sidelined, Unreadable: q.Unreadable, Dropped: q.Dropped, Lanes: q.Lanes,
		Order: q.Order, FreshFirst: q.FreshFirstTenants, OldMessages: q.OldMessages, OldOldestAge: q.OldOldestAge.Seconds()}
	if !q.FreshFirstSince.IsZero() {
		since := q.FreshFirstSince
		j.FreshFirstSince = &since
	}
	return j
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request) {
	stats := s.visible(r, s.b.ClusterStats(r.Context())) // in a cluster, every node's
	out := make([]queueJSON, 0, len(stats))
	sources := map[string][]string{}
	for _, q := range stats {
		if q.DLQ != "" {
			sources[q.DLQ] = append(sources[q.DLQ], q.Name)
		}
	}
	for _, q := range stats {
		j := toJSON(q)
		j.Sources = sources[q.Name]
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	var sources []string
	for _, q := range s.visible(r, s.b.Stats()) {
		if q.DLQ == name {
			sources = append(sources, q.Name)
		}
	}
	for _, q := range s.b.Stats() {
		if q.Name == name {
			j := toJSON(q)
			j.Tenants = q.Tenants
			j.Sources = sources
			writeJSON(w, http.StatusOK, j)
			return
		}
	}
	apiError(w, partition.NoQueue())
}

// visible is the queues of stats the request's caller may see.
func (s *Server) visible(r *http.Request, stats []st.QueueStats) []st.QueueStats {
	c := callerOf(r)
	if c.operator {
		return stats
	}
	return slices.DeleteFunc(stats, func(q st.QueueStats) bool { return !c.allows(q.Name) })
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	if _, err := s.b.GetQueue(r.PathValue("queue")); err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.hist.get(r.PathValue("queue")))
}

func (s *Server) tenants(w http.ResponseWriter, r *http.Request) {
	max := 100
	if v := r.URL.Query().Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			badRequest(w, "max must be 1-10000, not %q.", v)
			return
		}
		max = n
	}
	ts, err := s.b.Tenants(r.PathValue("queue"), max)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) tenant(w http.ResponseWriter, r *http.Request) {
	t, err := s.b.Tenant(r.PathValue("queue"), r.PathValue("tenant"))
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// setTenant replaces a tenant's overrides with the body (TenantLimits as
// JSON; {} clears them).
func (s *Server) setTenant(w http.ResponseWriter, r *http.Request) {
	var l st.TenantLimits
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		badRequest(w, "The body must be a JSON object of tenant limits (weight, max_in_flight, send_rate, send_burst, receive_rate, receive_burst, backlog_target): %v.", err)
		return
	}
	if err := s.b.SetTenantLimits(r.Context(), r.PathValue("queue"), r.PathValue("tenant"), l); err != nil {
		apiError(w, err)
		return
	}
	s.tenant(w, r)
}

// dropBefore applies the watermark: {"before": RFC 3339 time, "tenant":
// name (omit for all tenants)}.
func (s *Server) dropBefore(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Before time.Time `json:"before"`
		Tenant *string   `json:"tenant"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		badRequest(w, "The body must be {\"before\": \"<RFC 3339 time>\", \"tenant\": \"<name>\"} (tenant optional): %v.", err)
		return
	}
	if in.Before.IsZero() {
		badRequest(w, "before is required.")
		return
	}
	tenant := ""
	if in.Tenant != nil {
		tenant = *in.Tenant
	}
	n, err := s.b.DropBefore(r.Context(), r.PathValue("queue"), in.Before, tenant, in.Tenant == nil)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"dropped": n})
}

// store answers the storage engine's figures, with what the dashboard
// shows as banners: the disk alarm, and messages that could not be read
// back (unreadable) or bodies released wrongly (bad_releases).
func (s *Server) store(w http.ResponseWriter, r *http.Request) {
	st := s.b.StoreStats()
	writeJSON(w, http.StatusOK, map[string]any{
		"live_messages": st.LiveMessages, "segments": st.Segments, "disk_bytes": st.DiskBytes,
		"live_bytes": st.LiveBytes, "dead_bytes": st.DeadBytes, "snapshot_bytes": st.SnapshotBytes,
		"disk_free_bytes": st.DiskFree, "disk_reserve_bytes": st.DiskReserve, "disk_alarm": st.DiskAlarm,
		"segments_removed": st.SegmentsRemoved, "bad_releases": st.BadReleases, "unreadable": st.Unreadable,
	})
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Println(v ...any) {
	a.l.Error("metrics", "err", strings.TrimSpace(strings.Repeat("%v ", len(v))), "detail", v)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}
