package liveness

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// net is the fake cluster the tests' pings go to: each node answers,
// stays silent (the ping waits out its context) or is served by nobody.
type net struct {
	mu    sync.Mutex
	state map[string]State // what each node does now: Alive answers
}

func (n *net) set(node string, s State) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.state[node] = s
}

func (n *net) ping(ctx context.Context, node string) error {
	n.mu.Lock()
	s := n.state[node]
	n.mu.Unlock()
	switch s {
	case Silent:
		<-ctx.Done()
		return ctx.Err()
	case Gone:
		return ErrNobody
	}
	return nil
}

func start(t *testing.T, n *net, members ...string) *Tracker {
	tr := New(Config{Self: "a", Members: func() []string { return members }, Ping: n.ping})
	tr.Start()
	t.Cleanup(tr.Close)
	return tr
}

// A node that stops answering is Silent after SilentAfter (not before),
// one nobody serves is Gone after two pings, and both are Alive again
// once they answer; a watcher hears each change.
func TestStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &net{state: map[string]State{}}
		tr := start(t, n, "a", "b", "c")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := tr.State("b"); s != Alive {
			t.Fatalf("b answers: %v", s)
		}
		st, changed := tr.Watch("b")
		if st != Alive {
			t.Fatalf("Watch(b): %v", st)
		}
		n.set("b", Silent)
		lost := time.Now()
		<-changed
		if took := time.Since(lost); took < time.Second || took > 1500*time.Millisecond {
			t.Errorf("b was found silent %v after it stopped answering, want SilentAfter (1 s) and at most a ping more", took)
		}
		if s := tr.State("b"); s != Silent {
			t.Errorf("b: %v, want silent", s)
		}
		n.set("c", Gone)
		time.Sleep(time.Second)
		synctest.Wait()
		if s := tr.State("c"); s != Gone {
			t.Errorf("c, served by nobody: %v, want gone", s)
		}
		n.set("b", Alive)
		n.set("c", Alive)
		time.Sleep(time.Second)
		synctest.Wait()
		if b, c := tr.State("b"), tr.State("c"); b != Alive || c != Alive {
			t.Errorf("after they answer again: b %v, c %v", b, c)
		}
	})
}

// A node is Isolated only once every other member has answered no ping
// for CutOffAfter; one member answering is enough not to be.
func TestIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &net{state: map[string]State{}}
		tr := start(t, n, "a", "b", "c")
		time.Sleep(time.Second)
		synctest.Wait()
		n.set("b", Silent)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if tr.Isolated() {
			t.Fatal("isolated while c answers")
		}
		n.set("c", Gone)
		cut := time.Now()
		for !tr.Isolated() {
			time.Sleep(50 * time.Millisecond)
		}
		if took := time.Since(cut); took < 3*time.Second || took > 3500*time.Millisecond {
			t.Errorf("isolated %v after the last member stopped answering, want CutOffAfter (3 s)", took)
		}
		n.set("c", Alive)
		time.Sleep(time.Second)
		synctest.Wait()
		if tr.Isolated() {
			t.Error("still isolated once c answers")
		}
	})
}

// A single node (no other member) is never isolated, and an inactive
// tracker pings nobody.
func TestAloneAndInactive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &net{state: map[string]State{"b": Silent}}
		alone := start(t, n, "a")
		pings := 0
		idle := New(Config{Self: "a", Members: func() []string { return []string{"a", "b"} }, Active: func() bool { return false },
			Ping: func(context.Context, string) error { pings++; return nil }})
		idle.Start()
		defer idle.Close()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if alone.Isolated() {
			t.Error("a node without other members is isolated")
		}
		if pings != 0 {
			t.Errorf("an inactive tracker pinged %d times", pings)
		}
	})
}
