package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Topics: each topic with its subscriptions and, for each subscription,
// the backlog of its queue, so an operator sees which subscriber falls
// behind. A topic's own figures (what it published and what became of
// each delivery) come from the node that owns it: GET /api/topics has
// them for the topics owned by the node that answers; GET
// /api/topics/{topic} is answered by the topic's owner (cluster.go).

// topicJSON is a topic as the API shows it.
type topicJSON struct {
	Name          string             `json:"name"`
	FIFO          bool               `json:"fifo"`
	Subscriptions []subscriptionJSON `json:"subscriptions"`
	// Figures is nil when another node owns the topic.
	Figures *topicFiguresJSON `json:"figures"`
}

// subscriptionJSON is one subscription and its queue's backlog.
type subscriptionJSON struct {
	ID       string `json:"id"`
	Protocol string `json:"protocol"`
	Endpoint string `json:"endpoint"`
	// Queue is the endpoint queue's name (the ARN's last part when the
	// ARN is not one of this server's account).
	Queue           string `json:"queue"`
	Raw             bool   `json:"raw_message_delivery"`
	HasFilterPolicy bool   `json:"has_filter_policy"`
	DLQ             string `json:"dead_letter_queue,omitempty"`
	// QueueMissing: the queue does not exist, so the topic's deliveries
	// to it are refused (dropped, or dead-lettered); Backlog is nil.
	QueueMissing bool         `json:"queue_missing"`
	Backlog      *backlogJSON `json:"backlog"`
}

// backlogJSON is a subscription's queue's backlog, as /api/queues has it.
type backlogJSON struct {
	Visible   int     `json:"visible"`
	InFlight  int     `json:"in_flight"`
	Delayed   int     `json:"delayed"`
	OldestAge float64 `json:"oldest_age_seconds"`
}

// topicFiguresJSON are a topic's delivery counters since its owner took
// it: every publish, then per subscription what became of it.
type topicFiguresJSON struct {
	Published    int64 `json:"published"`
	Delivered    int64 `json:"delivered"`
	Filtered     int64 `json:"filtered"`
	Refused      int64 `json:"refused"`
	DeadLettered int64 `json:"dead_lettered"`
	// Held is the fan-out backlog: publishes the topic holds for
	// subscriptions whose queues have not taken them yet.
	Held int64 `json:"held"`
}

func (s *Server) routesTopics() {
	s.mux.HandleFunc("GET /api/topics", s.topics)
	s.mux.HandleFunc("GET /api/topics/{topic}", s.onTopic(s.topic))
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	infos := s.b.AllTopics(r.Context()) // in a cluster, every node's
	queues := s.queueIndex(r)
	out := make([]topicJSON, 0, len(infos))
	for _, info := range infos {
		if callerOf(r).allows(info.Name) {
			out = append(out, s.topicToJSON(info, queues, callerOf(r)))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) topic(w http.ResponseWriter, r *http.Request) {
	info, err := s.b.Topic(r.PathValue("topic"))
	if err != nil {
		if errors.Is(err, st.ErrNoTopic) {
			err = noTopic()
		}
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.topicToJSON(info, s.queueIndex(r), callerOf(r)))
}

// queueIndex is the figures of every queue the caller may see, by name
// (in a cluster, every node's). A subscription's queue outside it shows
// neither its backlog nor that it is missing.
func (s *Server) queueIndex(r *http.Request) map[string]st.QueueStats {
	stats := s.visible(r, s.b.ClusterStats(r.Context()))
	out := make(map[string]st.QueueStats, len(stats))
	for _, q := range stats {
		out[q.Name] = q
	}
	return out
}

func (s *Server) topicToJSON(info st.TopicInfo, queues map[string]st.QueueStats, c caller) topicJSON {
	t := topicJSON{Name: info.Name, FIFO: info.FIFO, Subscriptions: make([]subscriptionJSON, 0, len(info.Subs))}
	for id, sub := range info.Subs {
		j := subscriptionJSON{ID: id, Protocol: sub.Protocol, Endpoint: sub.Endpoint,
			Raw:             strings.EqualFold(sub.Attrs["RawMessageDelivery"], "true"),
			HasFilterPolicy: sub.Attrs["FilterPolicy"] != ""}
		var ours bool
		j.Queue, ours = s.queueName(sub.Endpoint)
		if dlq := deadLetterTarget(sub); dlq != "" {
			j.DLQ, _ = s.queueName(dlq)
		}
		if q, ok := queues[j.Queue]; ok && ours && sub.Protocol == "sqs" {
			j.Backlog = &backlogJSON{Visible: q.Visible, InFlight: q.InFlight, Delayed: q.Delayed, OldestAge: q.OldestAge.Seconds()}
		} else if !ours || c.allows(j.Queue) {
			j.QueueMissing = true
		}
		t.Subscriptions = append(t.Subscriptions, j)
	}
	sort.Slice(t.Subscriptions, func(i, j int) bool {
		a, b := t.Subscriptions[i], t.Subscriptions[j]
		return a.Queue < b.Queue || a.Queue == b.Queue && a.ID < b.ID
	})
	if f, err := s.b.TopicFigures(info.Name); err == nil {
		t.Figures = &topicFiguresJSON{Published: f.Published, Delivered: f.Delivered, Filtered: f.Filtered,
			Refused: f.Refused, DeadLettered: f.Dead, Held: f.Held}
	}
	return t
}

// queueName is the name of the queue an ARN names, and whether the ARN
// is one of this broker's account; for another account's ARN, its last
// part (such a queue is not here).
func (s *Server) queueName(arn string) (string, bool) {
	if name, err := s.b.QueueNameFromARN(arn); err == nil {
		return name, true
	}
	return arn[strings.LastIndexByte(arn, ':')+1:], false
}

// deadLetterTarget is the dead-letter queue's ARN of a subscription's
// RedrivePolicy ("" when none), as package topic reads it.
func deadLetterTarget(sub st.Subscription) string {
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if v := sub.Attrs["RedrivePolicy"]; v == "" || json.Unmarshal([]byte(v), &rp) != nil {
		return ""
	}
	return rp.DeadLetterTargetArn
}
