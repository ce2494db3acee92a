package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Dead-letter tooling:
//
//	GET  /api/queues/{queue}/messages?tenant=&source=&reason=&since=&until=&contains=&max=&after=
//	POST /api/queues/{queue}/purge    {filter}         deletes what matches (all with {})
//	POST /api/queues/{queue}/redrive  {filter, "to": queue, "rate": n}
//
// A redrive without a filter and without "to" starts an SQS message move
// task (rate-limited, with progress under /api/movetasks); a filtered one
// moves the matching messages at once.
func (s *Server) routesDLQ() {
	s.mux.HandleFunc("GET /api/queues/{queue}/messages", s.onQueue(s.peek))
	s.mux.HandleFunc("POST /api/queues/{queue}/purge", s.onQueue(s.purge))
	s.mux.HandleFunc("POST /api/queues/{queue}/redrive", s.onQueue(s.redrive))
	s.mux.HandleFunc("GET /api/movetasks", s.moveTasks)
}

type filterJSON struct {
	Tenant   string    `json:"tenant,omitempty"`
	Source   string    `json:"source,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Contains string    `json:"contains,omitempty"`
}

func (f filterJSON) filter() st.PeekFilter {
	return st.PeekFilter{Tenant: f.Tenant, Source: f.Source, Reason: f.Reason, Since: f.Since, Until: f.Until, Contains: f.Contains}
}

func (f filterJSON) empty() bool { return f == filterJSON{} }

func (s *Server) peek(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := st.PeekFilter{Tenant: q.Get("tenant"), Source: q.Get("source"), Reason: q.Get("reason"), Contains: q.Get("contains"), After: q.Get("after")}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				badRequest(w, "%s must be an RFC 3339 time, not %q.", name, v)
				return
			}
			*dst = t
		}
	}
	if v := q.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			badRequest(w, "max must be a number, not %q.", v)
			return
		}
		f.Max = n
	}
	ms, next, err := s.b.Peek(r.PathValue("queue"), f)
	if err != nil {
		apiError(w, err)
		return
	}
	if ms == nil {
		ms = []st.PeekedMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": ms, "next": next})
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 {
		return true
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "The body is not a valid request: %v.", err)
		return false
	}
	return true
}

func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	var f filterJSON
	if !decodeBody(w, r, &f) {
		return
	}
	n, err := s.b.PurgeFiltered(r.Context(), r.PathValue("queue"), f.filter())
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	var in struct {
		filterJSON
		To   string `json:"to,omitempty"`
		Rate int    `json:"rate,omitempty"`
	}
	if !decodeBody(w, r, &in) {
		return
	}
	name := r.PathValue("queue")
	if in.To != "" && !callerOf(r).allows(in.To) { // a destination the caller may not use is missing
		apiError(w, partition.NoQueue())
		return
	}
	if in.filterJSON.empty() {
		info, err := s.b.GetQueue(name)
		if err != nil {
			apiError(w, err)
			return
		}
		dest := ""
		if in.To != "" {
			to, err := s.b.GetQueue(in.To)
			if err != nil {
				apiError(w, err)
				return
			}
			dest = to.ARN
		}
		h, err := s.b.StartMoveTask(r.Context(), info.ARN, dest, in.Rate)
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"task_handle": h, "source_arn": info.ARN})
		return
	}
	if in.Rate > 0 { // paced: a task with progress under /api/movetasks
		h, err := s.b.StartRedrive(r.Context(), name, in.filterJSON.filter(), in.To, in.Rate)
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"task_handle": h})
		return
	}
	n, err := s.b.RedriveFiltered(r.Context(), name, in.filterJSON.filter(), in.To)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"redriven": n})
}

func (s *Server) moveTasks(w http.ResponseWriter, r *http.Request) {
	src := r.URL.Query().Get("source")
	if src == "" {
		badRequest(w, "source (a queue ARN or name) is required.")
		return
	}
	name := src
	if n, err := s.b.QueueNameFromARN(src); err == nil {
		name = n
	}
	if !callerOf(r).allows(name) {
		// What ListMoveTasks answers for a source that does not exist.
		apiError(w, &st.Error{Code: st.CodeResourceNotFound, Message: "The resource that you specified for the SourceArn parameter doesn't exist."})
		return
	}
	if info, err := s.b.GetQueue(src); err == nil {
		src = info.ARN
	}
	ts, err := s.b.ListMoveTasks(r.Context(), src, 10)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}
