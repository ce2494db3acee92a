package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/forward"
	st "github.com/sluicemq/sluice/sluicetype"
)

// In a cluster, a request about one queue (/api/queues/{queue}/...) or
// one topic (/api/topics/{topic}) is forwarded to the node that owns it,
// which answers it as if it had come directly; the admin address's guard
// (its token) checked it on the node that took it.

// clusterJSON is the cluster as the API shows it.
type clusterJSON struct {
	Node            string            `json:"node"`
	Members         []string          `json:"members"`
	CatalogOwner    string            `json:"catalog_owner"`
	Owners          map[string]string `json:"owners"`
	Owned           int               `json:"owned"`
	Failovers       uint64            `json:"failovers"`
	Handovers       uint64            `json:"handovers"`
	AcquireFailures uint64            `json:"acquire_failures"`
	RenewFailures   uint64            `json:"lease_renew_failures"`
	LeasesRetaken   uint64            `json:"leases_retaken"`
	Forwarded       uint64            `json:"forwarded_requests"`
	ForwardResends  uint64            `json:"forward_resends"`
	ForwardsLost    uint64            `json:"forwards_owner_lost"`
	ForwardsSilent  uint64            `json:"forwards_owner_silent"`
	CutOff          bool              `json:"cut_off"`
}

// cluster answers GET /api/cluster: 404 outside a cluster.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	cs := s.b.ClusterStatus()
	if cs == nil {
		apiError(w, &st.Error{Code: st.CodeResourceNotFound, Message: "This server is not a node of a cluster."})
		return
	}
	writeJSON(w, http.StatusOK, clusterJSON{Node: cs.Node, Members: cs.Members, CatalogOwner: cs.CatalogOwner, Owners: cs.Owners,
		Owned: cs.Owned, Failovers: cs.Failovers, Handovers: cs.Handovers, AcquireFailures: cs.AcquireFailures, RenewFailures: cs.RenewFailures, LeasesRetaken: cs.LeasesRetaken,
		Forwarded: cs.Forwarded, ForwardResends: cs.Resent, ForwardsLost: cs.OwnerLost, ForwardsSilent: cs.OwnerSilent, CutOff: cs.CutOff})
}

// streams answers GET /api/cluster/streams: the server that leads each
// queue's stream (its replicas' leader, which a failover test may want
// to kill apart from the queue's owner).
func (s *Server) streams(w http.ResponseWriter, r *http.Request) {
	leaders := s.b.StreamLeaders(r.Context())
	if leaders == nil {
		apiError(w, &st.Error{Code: st.CodeResourceNotFound, Message: "This server is not a node of a cluster."})
		return
	}
	writeJSON(w, http.StatusOK, leaders)
}

// forwardTo is the route (Broker.Route) to the node that serves r (""
// when this one does, or when r names no queue or topic).
func (s *Server) forwardTo(r *http.Request) string {
	if !s.b.Clustered() || forward.Forwarded(r) {
		return ""
	}
	route := s.b.Route
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/queues/")
	if !ok {
		if rest, ok = strings.CutPrefix(r.URL.EscapedPath(), "/api/topics/"); !ok {
			return ""
		}
		route = s.b.RouteTopic
	}
	name, _, _ := strings.Cut(rest, "/")
	name, err := url.PathUnescape(name)
	if err != nil || name == "" {
		return ""
	}
	to, err := route(name, "admin")
	if err != nil {
		return "" // this node answers: the queue or topic does not exist
	}
	return to
}

// forward answers r with the answer of the node that serves route.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, route string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		badRequest(w, "Reading the request body failed: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	// The owner acts for whom this node found the caller to be: a
	// dashboard session lives on this node only, and a signed request
	// was checked (and noted against replays) here.
	fr := r.Clone(ctx)
	fr.Header.Set(callerHeader, callerOf(r).header())
	resp, err := s.b.Forward(ctx, route, fr, body, forward.How{Idempotent: r.Method == http.MethodGet || r.Method == http.MethodHead})
	if err != nil {
		what := "did not answer"
		if errors.Is(err, forward.ErrOwnerLost) {
			what = "went away before it answered; the request may or may not have taken effect"
		}
		apiError(w, &st.Error{Code: st.CodeServiceUnavailable, Message: "The node that owns the queue or topic " + what + "; retry the request.", Cause: err})
		return
	}
	resp.Write(w)
}
