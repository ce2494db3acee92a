package attempts

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRememberRecallForget(t *testing.T) {
	var m Memory
	now := time.Unix(1_700_000_000, 0)
	a := &Attempt{Seqs: []uint64{7}, Fences: []uint32{1}}
	m.Remember("x", now, a)
	if got := m.Recall("x", now.Add(Window)); got != a {
		t.Fatal("not recalled at the end of its window")
	}
	if m.Recall("x", now.Add(Window+time.Millisecond)) != nil || m.Recall("y", now) != nil {
		t.Fatal("recalled past its window, or never remembered")
	}
	b := &Attempt{}
	m.Remember("x", now.Add(time.Minute), b) // again: the newer answer counts
	if m.Recall("x", now.Add(Window+time.Second)) != b {
		t.Fatal("a receive remembered again lost its newer answer")
	}
	m.Forget("x")
	if m.Recall("x", now.Add(time.Minute)) != nil {
		t.Fatal("recalled after Forget")
	}
}

// A receive every second for an hour: the memory holds the last five
// minutes' worth, not the hour's.
func TestBoundedByTheWindow(t *testing.T) {
	var m Memory
	now := time.Unix(1_700_000_000, 0)
	for i := range 3600 {
		m.Remember(fmt.Sprint(i), now.Add(time.Duration(i)*time.Second), &Attempt{})
	}
	if m.Len() > int(Window/time.Second)+1 || len(m.order)-m.head != m.Len() || len(m.order) > 2*m.Len()+64 {
		t.Fatalf("%d remembered, %d in the order list (head %d)", m.Len(), len(m.order), m.head)
	}
	if m.Recall("3599", now.Add(3599*time.Second)) == nil || m.Recall("0", now.Add(3599*time.Second)) != nil {
		t.Fatal("the newest is not remembered, or the oldest still is")
	}
}
