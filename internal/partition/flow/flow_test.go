package flow

import (
	"testing"
	"time"
)

func admitted(w *Waiter) bool {
	select {
	case <-w.Admitted():
		return true
	default:
		return false
	}
}

func newGate() *Gate {
	return &Gate{Floor: 100, Active: time.Second}
}

var t0 = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

// Nothing waits without a backlog, or without consumers taking messages:
// a queue absorbs bursts and consumer outages.
func TestNoHoldWithoutBacklogOrConsumers(t *testing.T) {
	g := newGate()
	for i := range 1000 {
		if w := g.Enter(t0, 10, 50_000); w != nil {
			t.Fatalf("send %d held with no consumer ever taking a message", i)
		}
	}
	g.Took(t0, 10)
	for i := range 1000 {
		if w := g.Enter(t0.Add(time.Millisecond), 10, 99); w != nil {
			t.Fatalf("send %d held under the floor", i)
		}
	}
	// Consumers stopped taking: after Active, sends go again.
	if w := g.Enter(t0.Add(time.Second), 10, 50_000); w != nil {
		t.Fatal("send held a full Active after the last take")
	}
	var off Gate // Floor 0: off
	off.Took(t0, 10)
	if off.Enter(t0, 10, 1<<20) != nil {
		t.Fatal("a gate with no floor held a send")
	}
}

// While consumers take off a backlog, sends beyond a floor's worth of
// credit wait, and every message taken admits one sent, first come first.
func TestSendsFollowTakes(t *testing.T) {
	g := newGate()
	now := t0
	g.Took(now, 10)
	// The first floor's worth goes at once (the credit a burst may use).
	for range 10 {
		if w := g.Enter(now, 10, 5000); w != nil {
			t.Fatal("send held with credit left")
		}
	}
	var ws []*Waiter
	for range 5 {
		w := g.Enter(now, 10, 5000)
		if w == nil {
			t.Fatal("send went with no credit left")
		}
		ws = append(ws, w)
	}
	if g.Waiting() != 5 {
		t.Fatalf("waiting %d, want 5", g.Waiting())
	}
	g.Took(now, 10)
	if !admitted(ws[0]) || admitted(ws[1]) {
		t.Fatal("ten messages taken did not admit exactly the first send of ten")
	}
	g.Took(now, 25)
	if !admitted(ws[1]) || !admitted(ws[2]) || !admitted(ws[3]) || admitted(ws[4]) {
		t.Fatal("25 taken: want the next three admitted (the last one on credit left over), in order")
	}
	// A newcomer queues behind the one still waiting, even with credit.
	late := g.Enter(now, 1, 5000)
	if late == nil {
		t.Fatal("a newcomer passed a send that waits")
	}
	// The first one's hold runs out: it leaves, the newcomer stays.
	if !g.Leave(ws[4]) || g.Leave(ws[4]) {
		t.Fatal("Leave: want true once, then false")
	}
	if g.Waiting() != 1 {
		t.Fatalf("waiting %d, want 1", g.Waiting())
	}
	// The backlog falls under the floor: whoever waits goes.
	if g.Enter(now, 10, 10) != nil || !admitted(late) {
		t.Fatal("under the floor, the waiting send was not let go")
	}
}

// Credit is capped at the floor: consumers that took a lot while
// producers were idle do not let an unbounded burst through later.
func TestCreditCapped(t *testing.T) {
	g := newGate()
	g.Took(t0, 10)
	g.Enter(t0, 100, 5000) // spends the first budget
	g.Took(t0, 100_000)
	n := 0
	for g.Enter(t0, 10, 5000) == nil {
		n++
		if n > 1000 {
			t.Fatal("credit not capped")
		}
	}
	if n != 10 {
		t.Fatalf("%d sends of ten went on credit, want 10 (the floor)", n)
	}
	g.Drop()
	if g.Waiting() != 0 {
		t.Fatal("Drop left sends waiting")
	}
}
