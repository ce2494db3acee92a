package forward_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/liveness"
	"github.com/sluicemq/sluice/internal/store"
)

// owners is who owns partitions as a test says: view is the forwarding
// node's view, holder the lease bucket's.
type owners struct {
	mu           sync.Mutex
	view, holder map[store.PartitionID]string
	holderAsks   int
}

func (o *owners) Owner(p store.PartitionID) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, ok := o.view[p]
	return n, ok
}

func (o *owners) Holder(ctx context.Context, p store.PartitionID) (string, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holderAsks++
	n, ok := o.holder[p]
	return n, ok, nil
}

func (o *owners) set(p store.PartitionID, node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.view[p], o.holder[p] = node, node
}

// states is each node's liveness as a test sets it.
type states struct {
	mu      sync.Mutex
	state   map[string]liveness.State
	changed map[string]chan struct{}
}

func newStates() *states {
	return &states{state: map[string]liveness.State{}, changed: map[string]chan struct{}{}}
}

func (s *states) Watch(node string) (liveness.State, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed[node] == nil {
		s.changed[node] = make(chan struct{})
	}
	return s.state[node], s.changed[node]
}

func (s *states) set(node string, st liveness.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[node] = st
	if c := s.changed[node]; c != nil {
		close(c)
	}
	s.changed[node] = make(chan struct{})
}

func routerSubject(node, service string, p store.PartitionID) string {
	return fmt.Sprintf("sluice.test.node.%s.%s.%d", node, service, p)
}

// TestRouterFollowsTheHolder: a request whose owner in the view is gone
// (nobody serves its subject) or answers that it does not serve the
// partition goes to the node the lease bucket names, and is answered once.
func TestRouterFollowsTheHolder(t *testing.T) {
	owner, fwd := pair(t, 0)
	for _, node := range []string{"b", "c"} {
		serve(t, owner, "sluice.test.node."+node+".sqs.*", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if node == "c" {
				w.Header().Set(forward.NotOwnerHeader, "1")
			}
			fmt.Fprintf(w, "%s:%s", node, body)
		})
	}
	live := newStates()
	rt := &forward.Router{Conn: fwd, Live: live, Subject: routerSubject}
	for _, view := range []string{"a", "c"} { // a: gone; c: serves, but not partition 7
		o := &owners{view: map[store.PartitionID]string{7: view}, holder: map[store.PartitionID]string{7: "b"}}
		resp, err := rt.Forward(within(t, 10*time.Second), o, 7, "sqs", httptest.NewRequest("POST", "/", strings.NewReader("hi")), []byte("hi"), forward.How{})
		if err != nil {
			t.Fatalf("view names %s: %v", view, err)
		}
		if string(resp.Body) != "b:hi" {
			t.Errorf("view names %s: answered %q, want b:hi", view, resp.Body)
		}
	}
	if c := rt.Counts(); c.Forwarded != 2 || c.Resent != 2 || c.Lost != 0 || c.Silent != 0 {
		t.Errorf("counts %+v, want 2 forwarded, 2 resent", c)
	}
}

// TestRouterNoOwner: with no node holding the partition, a request waits
// until its context ends, and the error says no node holds it.
func TestRouterNoOwner(t *testing.T) {
	_, fwd := pair(t, 0)
	o := &owners{view: map[store.PartitionID]string{}, holder: map[store.PartitionID]string{}}
	rt := &forward.Router{Conn: fwd, Live: newStates(), Subject: routerSubject}
	_, err := rt.Forward(within(t, 300*time.Millisecond), o, 3, "sqs", httptest.NewRequest("POST", "/", nil), nil, forward.How{})
	if !errors.Is(err, forward.ErrNoOwner) || !strings.Contains(err.Error(), "partition 3") {
		t.Fatalf("err = %v, want ErrNoOwner naming partition 3", err)
	}
	if o.holderAsks == 0 {
		t.Error("the lease bucket was never asked")
	}
}

// TestRouterOwnerTurnsSilent: a request held by an owner that turns
// silent stops waiting at once. One that is not idempotent ends
// ErrOwnerSilent; an idempotent one goes to the partition's next owner.
func TestRouterOwnerTurnsSilent(t *testing.T) {
	owner, fwd := pair(t, 0)
	entered := make(chan string, 4)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, node := range []string{"a", "b"} {
		serve(t, owner, "sluice.test.node."+node+".sqs.*", func(w http.ResponseWriter, r *http.Request) {
			entered <- node
			if node == "a" {
				select { // a hangs, as a node cut off does
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			io.WriteString(w, "answered by b")
		})
	}
	for _, idempotent := range []bool{false, true} {
		live := newStates()
		o := &owners{view: map[store.PartitionID]string{5: "a"}, holder: map[store.PartitionID]string{5: "a"}}
		rt := &forward.Router{Conn: fwd, Live: live, Subject: routerSubject}
		done := make(chan error, 1)
		var resp *forward.Response
		go func() {
			var err error
			resp, err = rt.Forward(within(t, 20*time.Second), o, 5, "sqs", httptest.NewRequest("POST", "/", nil), nil, forward.How{Idempotent: idempotent})
			done <- err
		}()
		if n := <-entered; n != "a" {
			t.Fatalf("first sent to %s, want a", n)
		}
		o.set(5, "b")
		live.set("a", liveness.Silent)
		err := <-done
		switch {
		case !idempotent && !errors.Is(err, forward.ErrOwnerSilent):
			t.Errorf("not idempotent: %v, want ErrOwnerSilent", err)
		case idempotent && err != nil:
			t.Errorf("idempotent: %v, want the next owner's answer", err)
		case idempotent && string(resp.Body) != "answered by b":
			t.Errorf("idempotent: answered %q", resp.Body)
		}
		if idempotent {
			if n := <-entered; n != "b" {
				t.Errorf("sent again to %s, want b", n)
			}
		}
		if c := rt.Counts(); c.Silent != map[bool]uint64{false: 1, true: 0}[idempotent] {
			t.Errorf("idempotent %v: counts %+v", idempotent, c)
		}
	}
}

// TestRouterSilentHolder: while the lease bucket still names a silent
// node, a request is not sent to it; it ends ErrOwnerSilent (nothing was
// done) once its wait for another owner is over.
func TestRouterSilentHolder(t *testing.T) {
	owner, fwd := pair(t, 0)
	serve(t, owner, "sluice.test.node.a.sqs.*", func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request was sent to a silent node")
	})
	live := newStates()
	live.set("a", liveness.Silent)
	o := &owners{view: map[store.PartitionID]string{2: "a"}, holder: map[store.PartitionID]string{2: "a"}}
	rt := &forward.Router{Conn: fwd, Live: live, Subject: routerSubject}
	_, err := rt.Forward(within(t, 20*time.Second), o, 2, "sqs", httptest.NewRequest("POST", "/", nil), nil, forward.How{})
	if !errors.Is(err, forward.ErrOwnerSilent) || !errors.Is(err, forward.ErrNoOwner) {
		t.Fatalf("err = %v, want ErrOwnerSilent wrapping ErrNoOwner (not sent)", err)
	}
	if c := rt.Counts(); c.Silent != 1 || c.Resent != 0 {
		t.Errorf("counts %+v, want 1 silent, none resent", c)
	}
}
