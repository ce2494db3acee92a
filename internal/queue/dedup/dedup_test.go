package dedup

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const win = int64(5 * 60 * 1000)

func TestWindow(t *testing.T) {
	var d Memory
	d.Hold("a", Entry{ID: "m1", SeqNum: "1", Until: win})
	if e, ok := d.Seen("a", win-1); !ok || e.ID != "m1" {
		t.Fatalf("Seen(a) inside the window = %+v %v", e, ok)
	}
	if _, ok := d.Seen("a", win); ok {
		t.Fatal("Seen(a) at the end of the window: still there")
	}
	d.Expire(win)
	if len(d.m) != 0 || len(d.order) != 0 {
		t.Fatalf("after Expire: %d ids, %d in order", len(d.m), len(d.order))
	}
}

// An id held by a write in flight outlives its window until the write
// ends; confirmed, it is queued to expire again, and a failed write lets
// it go.
func TestPending(t *testing.T) {
	var d Memory
	d.Hold("a", Entry{ID: "m1", Until: win, Pending: 7})
	d.Expire(win + 1)
	if _, ok := d.m["a"]; !ok {
		t.Fatal("an id held by a write in flight expired")
	}
	// A later send holds it now: confirming the earlier one changes nothing.
	d.Confirm("a", Entry{ID: "m0", Until: win}, 6)
	if d.m["a"].ID != "m1" || d.m["a"].Pending != 7 {
		t.Fatalf("Confirm of another send's position took the id: %+v", d.m["a"])
	}
	d.Confirm("a", Entry{ID: "m1", SeqNum: "00000000000000000042", Until: 2 * win}, 7)
	if e := d.m["a"]; e.Pending != 0 || !e.queued {
		t.Fatalf("confirmed: %+v", e)
	}
	if d.Last() != 42 {
		t.Fatalf("Last after Confirm = %d, want 42", d.Last())
	}
	d.Expire(2 * win)
	if len(d.m) != 0 {
		t.Fatalf("a confirmed id did not expire: %+v", d.m)
	}
	d.Hold("b", Entry{ID: "m2", Until: win, Pending: 9})
	d.Failed("b", 8)
	if _, ok := d.m["b"]; !ok {
		t.Fatal("Failed for another position let the id go")
	}
	d.Failed("b", 9)
	if _, ok := d.Seen("b", 0); ok {
		t.Fatal("an id whose write failed is still remembered")
	}
}

func TestNextIncreases(t *testing.T) {
	var d Memory
	a := d.Next(1000)
	b := d.Next(1000) // the clock did not move: one more
	c := d.Next(500)  // the clock went back: one more still
	if len(a) != 20 || !(a < b && b < c) || b != "00000000000000001001" {
		t.Fatalf("Next: %s %s %s", a, b, c)
	}
	d.SetLast(5)
	if d.Last() != 1002 {
		t.Fatalf("SetLast went backwards: %d", d.Last())
	}
}

// Each lists the durable ids in their window once each, oldest first.
func TestEach(t *testing.T) {
	var d Memory
	d.Hold("a", Entry{ID: "1", Until: 10, Pending: 3})
	d.Hold("b", Entry{ID: "2", Until: 20})
	d.Hold("c", Entry{ID: "3", Until: 30, Pending: 4})
	d.Expire(11)                                 // a is held: out of the order
	d.Confirm("a", Entry{ID: "1", Until: 40}, 3) // and in it again
	d.Hold("a", Entry{ID: "1", Until: 40})       // once
	d.Failed("b", 0)                             // no write: nothing to let go
	var got []string
	d.Each(15, func(k string, e Entry) bool {
		got = append(got, k+"="+e.ID)
		return true
	})
	if len(got) != 2 || got[0] != "b=2" || got[1] != "a=1" || len(d.order) != 3 {
		t.Fatalf("Each = %v (order %v), want [b=2 a=1]", got, d.order)
	}
}

func TestKeyAndContentID(t *testing.T) {
	if Key(false, "g", "x") != "x" || Key(true, "g", "x") == Key(true, "h", "x") {
		t.Fatal("Key: per-group keys must differ by group, others not")
	}
	if got := ContentID("hello"); got != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("ContentID = %s", got)
	}
}
