package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// ownerOn rebuilds the owner of partition 1 from what s holds (as
// recovery does), or creates it when s holds nothing.
func ownerOn(t *testing.T, s store.Store, clk clock.Clock) *Owner {
	t.Helper()
	h := testHost(t, s, clk)
	o := New(h, 1, record.QueueMeta{ID: 1, Name: "q"})
	last := uint64(0)
	err := s.Replay(func(e store.Entry) error {
		if e.Reset {
			o = New(h, 1, record.QueueMeta{ID: 1})
		}
		last = max(last, e.Pos)
		return o.Replayed(clk.Now(), e)
	})
	if err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		if err := o.Create(); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o.Recovered(clk.Now(), last)
	o.Start()
	return o
}

// receiveBodies receives up to 10 messages and returns their bodies, sorted.
func receiveBodies(t *testing.T, o *Owner) []string {
	t.Helper()
	msgs, err := o.Receive(context.Background(), st.ReceiveInput{MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, m.Body)
	}
	slices.Sort(bodies)
	return bodies
}

// Deliveries from another partition (a topic's publishes) are taken once
// per origin position, also by a queue rebuilt from its log after a power
// loss: a cursor that delivers again after a crash makes no duplicate.
func TestDeliverOncePerOriginPosition(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	open := func(fs *vfs.Mem) *disk.Log {
		l, err := disk.Open(fs, "/d", disk.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	// deliver sends body "m<pos>" from origin 9 at each position and
	// returns which were taken.
	deliver := func(o *Owner, pos ...uint64) []bool {
		t.Helper()
		in := make([]st.SendInput, len(pos))
		from := make([]queue.Origin, len(pos))
		for i, p := range pos {
			in[i] = st.SendInput{Body: "m" + string(rune('0'+p))}
			from[i] = queue.Origin{Partition: 9, Pos: p, After: p - 1}
		}
		res, errs, err := o.Deliver(ctx, in, from)
		if err != nil {
			t.Fatal(err)
		}
		taken := make([]bool, len(pos))
		for i := range pos {
			if errs[i] != nil {
				t.Fatalf("delivery of %d: %v", pos[i], errs[i])
			}
			taken[i] = res[i].MessageID != ""
		}
		return taken
	}
	l := open(fs)
	o := ownerOn(t, l, clk)
	if got := deliver(o, 1, 2); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("first deliveries taken: %v", got)
	}
	if got := deliver(o, 2, 3); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("2 again and 3: taken %v, want [false true]", got)
	}
	crashed := fs.Crash()
	l.Close()
	o = ownerOn(t, open(crashed), clk)
	if got := deliver(o, 3, 4); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("after the power loss, 3 again and 4: taken %v, want [false true]", got)
	}
	// The mark goes into snapshots too.
	if err := o.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got := deliver(o, 4, 5); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("after a snapshot, 4 again and 5: taken %v", got)
	}
	bodies := receiveBodies(t, o)
	if !slices.Equal(bodies, []string{"m1", "m2", "m3", "m4", "m5"}) {
		t.Fatalf("the queue holds %v, want each of m1..m5 once", bodies)
	}
	if s := o.Stats(func(string) string { return "" }); s.Sent != 2 {
		t.Fatalf("Sent since the rebuild = %d, want 2 (m4, m5: marks are not messages)", s.Sent)
	}
}

// A refused delivery takes no position, and the later messages of its
// origin in the same call are refused with it (taking them would move the
// mark past it); other origins go on.
func TestDeliverRefusedHoldsItsOriginBack(t *testing.T) {
	ctx := context.Background()
	o := openWithQueue(t, nil)
	in := []st.SendInput{{Body: "9:1"}, {Body: ""}, {Body: "9:3"}, {Body: "8:1"}}
	from := []queue.Origin{{Partition: 9, Pos: 1}, {Partition: 9, Pos: 2, After: 1}, {Partition: 9, Pos: 3, After: 2}, {Partition: 8, Pos: 1}}
	res, errs, err := o.Deliver(ctx, in, from)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || res[0].MessageID == "" || errs[3] != nil || res[3].MessageID == "" {
		t.Fatalf("9:1 and 8:1 should be taken: %v %v", errs[0], errs[3])
	}
	if errs[1] == nil || st.CodeOf(errs[2]) != st.CodeServiceUnavailable {
		t.Fatalf("9:2 (empty) and 9:3 after it should be refused: %v; %v", errs[1], errs[2])
	}
	// The origin delivers 2 again (now valid), then 3: both are taken.
	for _, pos := range []uint64{2, 3} {
		res, errs, err := o.Deliver(ctx, []st.SendInput{{Body: "9:" + string(rune('0'+pos))}}, []queue.Origin{{Partition: 9, Pos: pos, After: pos - 1}})
		if err != nil || errs[0] != nil || res[0].MessageID == "" {
			t.Fatalf("9:%d delivered again: %v %v", pos, err, errs[0])
		}
	}
	bodies := receiveBodies(t, o)
	if !slices.Equal(bodies, []string{"8:1", "9:1", "9:2", "9:3"}) {
		t.Fatalf("the queue holds %v", bodies)
	}
}

// A delivery names the position it follows, and is refused when the
// queue's mark of its origin is elsewhere: a delivery refused in one call
// is not passed over by the next one in a later call, which would make it
// a "duplicate" when delivered again, and lose it. One call writes one
// OriginMark record an origin, however many it takes.
func TestDeliveryNeverPassesOverARefusedOne(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := store.NewMemory()
	o := New(testHost(t, s, clk), 1, record.QueueMeta{ID: 1, Name: "q"})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	send := func(origins []queue.Origin, bodies ...string) []error {
		t.Helper()
		in := make([]st.SendInput, len(origins))
		for i := range origins {
			in[i] = st.SendInput{Body: bodies[i]}
		}
		_, errs, err := o.Deliver(ctx, in, origins)
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	if errs := send([]queue.Origin{{Partition: 9, Pos: 1}}, "9:1"); errs[0] != nil {
		t.Fatalf("9:1: %v", errs[0])
	}
	if errs := send([]queue.Origin{{Partition: 9, Pos: 2, After: 1}}, ""); errs[0] == nil {
		t.Fatal("9:2 with an empty body was taken")
	}
	// Position 4 follows 2 (3 was filtered out): refused, the mark is at 1.
	if errs := send([]queue.Origin{{Partition: 9, Pos: 4, After: 2}}, "9:4"); st.CodeOf(errs[0]) != st.CodeServiceUnavailable ||
		!strings.Contains(errs[0].Error(), "up to position 1") {
		t.Fatalf("9:4 after the refused 9:2: %v, want refused naming position 1", errs[0])
	}
	if errs := send([]queue.Origin{{Partition: 9, Pos: 2, After: 1}, {Partition: 9, Pos: 4, After: 2}}, "9:2", "9:4"); errs[0] != nil || errs[1] != nil {
		t.Fatalf("9:2 and 9:4 again: %v %v", errs[0], errs[1])
	}
	if bodies := receiveBodies(t, o); !slices.Equal(bodies, []string{"9:1", "9:2", "9:4"}) {
		t.Fatalf("the queue holds %v, want 9:1, 9:2, 9:4 once each", bodies)
	}
	var marks []uint64
	err := s.Replay(func(e store.Entry) error {
		r, err := record.Decode(e.Data, false)
		if err == nil && r.Type == record.OriginMark {
			marks = append(marks, r.OriginPos)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(marks, []uint64{1, 4}) {
		t.Fatalf("OriginMark records at %v, want one a write: [1 4]", marks)
	}
}

// A delivery over its tenant's send limit is taken, and becomes visible
// once within the limit, its tenant's messages spaced at its rate: it
// neither holds its origin back nor delays another tenant's messages.
func TestDeliveryOverItsTenantsLimitWaitsAlone(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := New(testHost(t, store.NewMemory(), clk), 1, record.QueueMeta{ID: 1, Name: "q",
		Attrs: map[string]string{"TenantSendRate": "1", "TenantSendBurst": "1"}})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	var in []st.SendInput
	var from []queue.Origin
	for i, tenant := range []string{"a", "a", "a", "b"} {
		in = append(in, st.SendInput{Body: fmt.Sprintf("%s%d", tenant, i+1), GroupID: tenant})
		from = append(from, queue.Origin{Partition: 9, Pos: uint64(i + 1), After: uint64(i)})
	}
	_, errs, err := o.Deliver(ctx, in, from)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("delivery %d over its tenant's limit refused: %v", i+1, e)
		}
	}
	if got := receiveBodies(t, o); !slices.Equal(got, []string{"a1", "b4"}) {
		t.Fatalf("at once: %v, want a1 (a's burst) and b4", got)
	}
	for _, want := range []string{"a2", "a3"} {
		clk.Advance(time.Second)
		if got := receiveBodies(t, o); !slices.Equal(got, []string{want}) {
			t.Fatalf("a second later: %v, want [%s]", got, want)
		}
	}
	// A plain send of tenant a is refused meanwhile: its limit was spent.
	if _, _, err := o.Send(ctx, []st.SendInput{{Body: "plain", GroupID: "a"}}, false); st.CodeOf(err) != st.CodeRequestThrottled {
		t.Fatalf("a plain send over the limit: %v, want throttled", err)
	}
}

// A queue's marks can be read (a cursor starts after them) and an
// origin's mark forgotten once its topic is gone, durably: the queue
// rebuilt from its log holds no mark of it.
func TestOriginMarksReadAndForgotten(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	open := func() *disk.Log {
		l, err := disk.Open(fs, "/d", disk.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	o := ownerOn(t, l, clk)
	in := []st.SendInput{{Body: "9:1"}, {Body: "9:2"}, {Body: "8:5"}}
	from := []queue.Origin{{Partition: 9, Pos: 1}, {Partition: 9, Pos: 2, After: 1}, {Partition: 8, Pos: 5}}
	if _, errs, err := o.Deliver(ctx, in, from); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	if m, err := o.OriginMarks(); err != nil || !maps.Equal(m, map[uint64]uint64{9: 2, 8: 5}) {
		t.Fatalf("marks %v %v, want 9:2 8:5", m, err)
	}
	if err := o.ForgetOrigin(ctx, 9); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open()
	defer l.Close()
	o = ownerOn(t, l, clk)
	if m, err := o.OriginMarks(); err != nil || !maps.Equal(m, map[uint64]uint64{8: 5}) {
		t.Fatalf("marks after a restart %v %v, want 8:5", m, err)
	}
}
