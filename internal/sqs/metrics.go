package sqs

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics counts requests by action and outcome and times them:
// an operator sees how long sends take at the server, not only at the
// client, and which errors clients get. Labels take only known actions
// and codes of the catalogue, so a hostile client cannot grow them.
type requestMetrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	// durationOf holds duration's histogram of each action seen (a known
	// one, or "unknown"), looked up once, not hashed again on every
	// request.
	durationOf sync.Map // action → prometheus.Observer
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_duration_seconds",
			Help: "Time from reading a request to writing its answer, by SQS action (long polls included: a ReceiveMessage that waited counts its wait).",
			// 100 us to 30 s: fsync-bound sends, and long polls up to 20 s.
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30},
		}, []string{"action"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_request_errors_total",
			Help: "Requests answered with an error, by SQS action and error code.",
		}, []string{"action", "code"}),
	}
}

// observe records one request. action is the request's action as the
// client named it; an action the server does not know is counted as
// "unknown".
func (m *requestMetrics) observe(action string, d time.Duration, code string) {
	if _, ok := actions[action]; !ok {
		action = "unknown"
	}
	o, ok := m.durationOf.Load(action)
	if !ok {
		o, _ = m.durationOf.LoadOrStore(action, m.duration.WithLabelValues(action))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
	if code != "" {
		m.errors.WithLabelValues(action, code).Inc()
	}
}

// Describe and Collect make the server's request metrics a
// prometheus.Collector (Server.Collector).
func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.errors.Describe(ch)
}

func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.errors.Collect(ch)
}

// Collector returns the server's request metrics, for the registry the
// admin endpoint serves.
func (s *Server) Collector() prometheus.Collector { return s.metrics }
