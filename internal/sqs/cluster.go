package sqs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/sns"
	snswire "github.com/sluicemq/sluice/internal/sns/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// In a cluster, a request about a queue another node owns is forwarded
// whole to that node (package forward), which answers it as if it had come
// directly (it checks the signature again); the answer goes back as it is.

// catalogActions change which queues exist: the catalog's owner does them.
// ListQueues too: its view is the one that is never behind.
var catalogActions = map[string]bool{"CreateQueue": true, "DeleteQueue": true, "ListQueues": true}

// localActions are answered by any node from its view of the catalog
// (which it reads again when a name is missing).
var localActions = map[string]bool{"GetQueueUrl": true, "ListDeadLetterSourceQueues": true,
	"ListMessageMoveTasks": true, "CancelMessageMoveTask": true}

// idempotentActions are those that do the same when done twice (a
// receive's lost answer only leaves its messages in flight until their
// visibility timeout, as any lost answer does): a forwarded one is sent
// again to the queue's next owner when the node serving it dies first
// (Broker.Forward). Sends, purges and move tasks are not.
var idempotentActions = map[string]bool{"ReceiveMessage": true, "DeleteMessage": true, "DeleteMessageBatch": true,
	"ChangeMessageVisibility": true, "ChangeMessageVisibilityBatch": true, "GetQueueAttributes": true,
	"SetQueueAttributes": true, "ListQueueTags": true, "TagQueue": true, "UntagQueue": true, "ListQueues": true}

// idempotent reports whether req may be forwarded a second time.
func idempotent(req *request) bool {
	if req.snsForm != nil {
		a := strings.TrimPrefix(req.action, "SNS.")
		return strings.HasPrefix(a, "Get") || strings.HasPrefix(a, "List")
	}
	return idempotentActions[req.action]
}

// forwardTo is the route (Broker.Route) to the node that serves req (""
// when this one does).
func (s *Server) forwardTo(req *request) (string, error) {
	if !s.clustered || forward.Forwarded(req.r) || localActions[req.action] {
		return "", nil
	}
	if err := s.b.CutOff(); err != nil {
		// It can neither write a queue nor know which node owns one.
		return "", &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second, Cause: err,
			Message: "This node cannot reach the other nodes of its cluster, so it serves no queue until it can; retry, through another node if you can."}
	}
	if req.snsForm != nil {
		return s.snsForwardTo(req)
	}
	if catalogActions[req.action] {
		return s.b.RouteCatalog("sqs"), nil
	}
	var name string
	if req.action == "StartMessageMoveTask" {
		arn, err := req.p.Str("SourceArn")
		if err != nil || arn == "" {
			return "", nil // the action answers the error
		}
		if name, err = s.b.QueueNameFromARN(arn); err != nil {
			return "", nil
		}
	} else {
		var err error
		if name, err = s.queueName(req); err != nil {
			return "", err
		}
	}
	return s.b.Route(name, "sqs")
}

// snsForwardTo is forwardTo for an SNS request: topics are owned like
// queues, and the catalog's owner creates and deletes them.
func (s *Server) snsForwardTo(req *request) (string, error) {
	name, where := s.sns.Route(req.snsForm)
	switch where {
	case sns.CatalogOwner:
		return s.b.RouteCatalog("sqs"), nil
	case sns.TopicOwner, sns.TopicOrCatalog:
		to, err := s.b.RouteTopic(name, "sqs")
		if errors.Is(err, st.ErrNoTopic) {
			if where == sns.TopicOrCatalog {
				return s.b.RouteCatalog("sqs"), nil
			}
			return "", nil // answered here: the topic does not exist
		}
		return to, err
	}
	return "", nil
}

// forward answers req with the answer of the node that serves route.
func (s *Server) forward(w http.ResponseWriter, req *request, route string, body []byte) {
	// A long poll waits up to 20 s on the owner.
	ctx, cancel := context.WithTimeout(req.r.Context(), 30*time.Second)
	defer cancel()
	how := forward.How{Idempotent: idempotent(req)}
	if req.action == "ReceiveMessage" {
		// A long poll may wait for a new owner as long as it would have
		// waited for a message: its client waits that long anyway.
		if w, err := req.p.Intp("WaitTimeSeconds"); err == nil && w != nil && *w > 0 {
			how.OwnerWait = time.Duration(min(*w, 20)) * time.Second
		}
	}
	resp, err := s.b.Forward(ctx, route, req.r, body, how)
	what := "did not answer"
	switch {
	case errors.Is(err, forward.ErrOwnerLost):
		what = "went away before it answered; the request may or may not have taken effect"
	case errors.Is(err, forward.ErrOwnerSilent) && errors.Is(err, forward.ErrNoOwner):
		what = "does not answer (the request was not sent to it: nothing was done)"
	case errors.Is(err, forward.ErrOwnerSilent):
		what = "stopped answering before it answered; the request may or may not have taken effect"
	}
	if err != nil && req.snsForm != nil {
		s.log.Warn("forwarding a request failed", "request_id", req.id, "action", req.action, "to", route, "err", err)
		snswire.WriteError(w, snswire.Errorf(snswire.CodeServiceUnavailable, "The node that owns the topic %s; retry the request.", what), req.id)
		return
	}
	if err != nil {
		s.log.Warn("forwarding a request failed", "request_id", req.id, "action", req.action, "to", route, "err", err)
		s.writeError(w, req, &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
			Message: "The node that owns the queue " + what + "; retry the request.", Cause: err})
		return
	}
	if code, _, ok := strings.Cut(resp.Header.Get("x-amzn-query-error"), ";"); ok {
		req.errCode = code // for the request metrics
	}
	resp.Write(w)
}
