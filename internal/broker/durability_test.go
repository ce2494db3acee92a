package broker_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// faultRig is a disk broker on an in-memory file system that can fail
// writes (no space, failed fsync) and lose power (Crash).
type faultRig struct {
	t     *testing.T
	mem   *vfs.Mem
	fault *vfs.Fault
	clk   *clock.Fake
	cfg   broker.Config
	b     *broker.Broker
}

func newFaultRig(t *testing.T, cfg broker.Config) *faultRig {
	r := &faultRig{t: t, mem: vfs.NewMem(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	r.fault = vfs.NewFault(r.mem)
	cfg.Dir, cfg.FS, cfg.Clock = "/data", r.fault, r.clk
	r.cfg = cfg
	r.open()
	t.Cleanup(func() { r.b.Close() })
	return r
}

func (r *faultRig) open() {
	r.t.Helper()
	b, err := broker.Open(r.cfg)
	if err != nil {
		r.t.Fatalf("open: %v", err)
	}
	r.b = b
}

// crash loses power: the broker is abandoned (its writer stopped) and a
// new one opens what the disk made durable.
func (r *faultRig) crash() {
	r.t.Helper()
	r.fault.Set(vfs.Faults{})
	survived := r.mem.Crash()
	r.b.Close() // writes nothing more to survived: it is a copy
	r.mem = survived
	r.fault = vfs.NewFault(survived)
	r.cfg.FS = r.fault
	r.open()
}

// faults are the write failures every state change must survive.
var faults = []struct {
	name string
	f    vfs.Faults
}{
	{"no-space", vfs.Faults{NoSpace: true}},
	{"fsync-error", vfs.Faults{SyncError: true}},
}

// bodiesOf receives (with a visibility of an hour) every message of q and
// returns their bodies, sorted.
func bodiesOf(t *testing.T, b *broker.Broker, q string) []string {
	t.Helper()
	var out []string
	for {
		ms, err := b.Receive(ctx, q, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(3600)})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(ms) == 0 {
			sort.Strings(out)
			return out
		}
		for _, m := range ms {
			out = append(out, m.Body)
		}
	}
}

func attr(t *testing.T, b *broker.Broker, q, name string) string {
	t.Helper()
	a, err := b.GetQueueAttributes(q, []string{name})
	if err != nil {
		t.Fatal(err)
	}
	return a[name]
}

func sendN(t *testing.T, b *broker.Broker, q string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := b.Send(ctx, q, st.SendInput{Body: fmt.Sprintf("m%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailedDeleteIsNotAcknowledged: a delete whose record cannot be
// written fails, and so does every retry while the disk fails (the
// message is still there, not "already deleted"); after a crash the
// message is back. Once the disk works, the retry succeeds and the
// message stays gone across a crash.
func TestFailedDeleteIsNotAcknowledged(t *testing.T) {
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			r := newFaultRig(t, broker.Config{})
			if _, err := r.b.CreateQueue(ctx, "q", nil, nil); err != nil {
				t.Fatal(err)
			}
			sendN(t, r.b, "q", 10)
			ms, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
			if err != nil || len(ms) != 10 {
				t.Fatalf("receive: %v %d", err, len(ms))
			}
			hs := make([]string, len(ms))
			for i, m := range ms {
				hs[i] = m.ReceiptHandle
			}
			r.fault.Set(fc.f)
			for attempt := 1; attempt <= 3; attempt++ {
				errs, err := r.b.DeleteBatch(ctx, "q", hs)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range errs {
					if e == nil {
						t.Fatalf("attempt %d: delete %d answered success although nothing could be written", attempt, i)
					}
				}
				if err := r.b.Delete(ctx, "q", hs[0]); err == nil {
					t.Fatalf("attempt %d: single delete answered success although nothing could be written", attempt)
				}
			}
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible"); got != "10" {
				t.Fatalf("in flight after failed deletes: %s, want 10", got)
			}
			r.crash()
			r.clk.Advance(time.Minute) // the deliveries' visibility ends
			if got := bodiesOf(t, r.b, "q"); len(got) != 10 {
				t.Fatalf("after the crash %d messages, want 10 (none was deleted): %v", len(got), got)
			}

			// The same with the disk back before the retry.
			r2 := newFaultRig(t, broker.Config{})
			r2.b.CreateQueue(ctx, "q", nil, nil)
			sendN(t, r2.b, "q", 3)
			ms, _ = r2.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
			r2.fault.Set(fc.f)
			if err := r2.b.Delete(ctx, "q", ms[0].ReceiptHandle); err == nil {
				t.Fatal("delete succeeded on a failing disk")
			}
			r2.fault.Set(vfs.Faults{})
			for _, m := range ms {
				if err := r2.b.Delete(ctx, "q", m.ReceiptHandle); err != nil {
					t.Fatalf("delete once the disk works: %v", err)
				}
			}
			r2.crash()
			r2.clk.Advance(time.Minute)
			if got := bodiesOf(t, r2.b, "q"); len(got) != 0 {
				t.Fatalf("acknowledged deletes came back after a crash: %v", got)
			}
		})
	}
}

// TestFailedWritesChangeNothing: every state change whose record cannot be
// written fails and leaves the queue as it was.
// rig is a faultRig with the receipt handles of the messages in flight.
type rig struct {
	*faultRig
	handles []string
}

func TestFailedWritesChangeNothing(t *testing.T) {
	// Each case starts with queue q holding 3 messages, all in flight
	// (visibility 30 s) with their handles, and dlq empty; q's redrive
	// policy sends a message to dlq on its 3rd receive.
	cases := []struct {
		name  string
		op    func(r rig) error
		check func(t *testing.T, r rig) // the state must be unchanged
	}{
		{"receive", func(r rig) error {
			r.clk.Advance(31 * time.Second) // visible again
			_, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
			return err
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessages"); got != "3" {
				t.Fatalf("a receive that could not be recorded hid messages: visible %s, want 3", got)
			}
			ms, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
			if err != nil || len(ms) != 3 {
				t.Fatalf("receive after the disk is back: %v %d", err, len(ms))
			}
			for _, m := range ms {
				if m.ReceiveCount != 2 {
					t.Fatalf("receive count %d, want 2: the failed receive counted", m.ReceiveCount)
				}
			}
		}},
		{"change-visibility", func(r rig) error {
			return r.b.ChangeVisibility(ctx, "q", r.handles[0], 0)
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessages"); got != "0" {
				t.Fatalf("a visibility change that could not be recorded took effect: visible %s", got)
			}
		}},
		{"change-visibility-batch", func(r rig) error {
			errs, err := r.b.ChangeVisibilityBatch(ctx, "q", []broker.VisibilityChange{{ReceiptHandle: r.handles[0]}, {ReceiptHandle: r.handles[1]}})
			if err != nil {
				return err
			}
			return errs[0]
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessages"); got != "0" {
				t.Fatalf("visibility changes that could not be recorded took effect: visible %s", got)
			}
		}},
		{"purge", func(r rig) error {
			return r.b.Purge(ctx, "q")
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible"); got != "3" {
				t.Fatalf("a purge that could not be recorded removed messages: %s left, want 3", got)
			}
		}},
		{"retry", func(r rig) error {
			return r.b.RetryMessage(ctx, "q", r.handles[0], ptr(0), "boom")
		}, handleStillWorks},
		{"defer", func(r rig) error {
			return r.b.DeferMessage(ctx, "q", r.handles[0], 0)
		}, handleStillWorks},
		{"reject", func(r rig) error {
			return r.b.RejectMessage(ctx, "q", r.handles[0], "bad")
		}, func(t *testing.T, r rig) {
			handleStillWorks(t, r)
			if got := attr(t, r.b, "dlq", "ApproximateNumberOfMessages"); got != "0" {
				t.Fatalf("a reject that could not be recorded reached the dead-letter queue: %s", got)
			}
		}},
		{"dead-letter", func(r rig) error {
			r.clk.Advance(31 * time.Second)
			if _, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10}); err != nil {
				return err // the 2nd receive fails already: fine, nothing moved
			}
			r.clk.Advance(31 * time.Second)
			_, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10}) // 3rd: to the DLQ
			return err
		}, func(t *testing.T, r rig) {
			q := attr(t, r.b, "q", "ApproximateNumberOfMessages")
			d := attr(t, r.b, "dlq", "ApproximateNumberOfMessages")
			if q != "3" || d != "0" {
				t.Fatalf("after a failed receive: q holds %s visible, dlq %s; want 3 and 0", q, d)
			}
		}},
		{"set-attributes", func(r rig) error {
			return r.b.SetQueueAttributes(ctx, "q", map[string]string{"DelaySeconds": "7"})
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "DelaySeconds"); got != "0" {
				t.Fatalf("an attribute change that could not be recorded took effect: DelaySeconds %s", got)
			}
		}},
		{"tag", func(r rig) error {
			return r.b.TagQueue(ctx, "q", map[string]string{"team": "a"})
		}, func(t *testing.T, r rig) {
			if tags, _ := r.b.ListQueueTags("q"); len(tags) != 0 {
				t.Fatalf("tags that could not be recorded took effect: %v", tags)
			}
		}},
		{"delete-queue", func(r rig) error {
			return r.b.DeleteQueue(ctx, "q")
		}, func(t *testing.T, r rig) {
			if _, err := r.b.GetQueue("q"); err != nil {
				t.Fatalf("a queue deletion that could not be recorded took effect: %v", err)
			}
		}},
		{"drop-before", func(r rig) error {
			_, err := r.b.DropBefore(ctx, "q", r.clk.Now().Add(time.Hour), "", true)
			return err
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible"); got != "3" {
				t.Fatalf("a watermark that could not be recorded dropped messages: %s left", got)
			}
		}},
		{"purge-filtered", func(r rig) error {
			_, err := r.b.PurgeFiltered(ctx, "q", broker.PeekFilter{})
			return err
		}, func(t *testing.T, r rig) {
			if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible"); got != "3" {
				t.Fatalf("a filtered purge that could not be recorded dropped messages: %s left", got)
			}
		}},
	}
	for _, fc := range faults {
		for _, c := range cases {
			t.Run(fc.name+"/"+c.name, func(t *testing.T) {
				r := rig{faultRig: newFaultRig(t, broker.Config{})}
				if _, err := r.b.CreateQueue(ctx, "dlq", nil, nil); err != nil {
					t.Fatal(err)
				}
				rp := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"2"}`
				if _, err := r.b.CreateQueue(ctx, "q", map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": rp}, nil); err != nil {
					t.Fatal(err)
				}
				sendN(t, r.b, "q", 3)
				ms, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
				if err != nil || len(ms) != 3 {
					t.Fatalf("receive: %v %d", err, len(ms))
				}
				for _, m := range ms {
					r.handles = append(r.handles, m.ReceiptHandle)
				}
				r.fault.Set(fc.f)
				if err := c.op(r); err == nil {
					t.Fatal("succeeded although nothing could be written")
				} else if st.CodeOf(err) != st.CodeInternal {
					t.Fatalf("error %v, want InternalError", err)
				}
				r.fault.Set(vfs.Faults{})
				c.check(t, r)
				// And what the disk holds agrees.
				r.crash()
				if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible") + "/" + attr(t, r.b, "dlq", "ApproximateNumberOfMessages"); got != "3/0" && c.name != "receive" && c.name != "dead-letter" {
					t.Fatalf("after a crash q in flight / dlq: %s, want 3/0", got)
				}
			})
		}
	}
}

// handleStillWorks: the message is still in flight under its handle.
func handleStillWorks(t *testing.T, r rig) {
	t.Helper()
	if got := attr(t, r.b, "q", "ApproximateNumberOfMessagesNotVisible"); got != "3" {
		t.Fatalf("a verdict that could not be recorded took effect: in flight %s, want 3", got)
	}
	if err := r.b.ChangeVisibility(ctx, "q", r.handles[0], 60); err != nil {
		t.Fatalf("the handle stopped working after a failed verdict: %v", err)
	}
}

// TestFullDiskDrainsAndResumes: on a disk that fills up, sends are refused
// at the reserve with a retryable error naming the free space, while the
// whole backlog can still be received and deleted; sends resume by
// themselves once the drain has freed the space, without a restart; and
// after a power loss every acknowledged send is there unless its delete
// was acknowledged, and no acknowledged delete comes back.
func TestFullDiskDrainsAndResumes(t *testing.T) {
	r := newFaultRig(t, broker.Config{SegmentBytes: 64 << 10, CheckpointBytes: 256 << 10, DiskReserve: 512 << 10})
	r.mem.SetCapacity(4 << 20)
	if _, err := r.b.CreateQueue(ctx, "q", map[string]string{"VisibilityTimeout": "30"}, nil); err != nil {
		t.Fatal(err)
	}
	body := func(i int) string { return fmt.Sprintf("%06d-%01000d", i, 0) }
	sent, deleted := map[string]bool{}, map[string]bool{}
	n := 0
	var refusal error
	for refusal == nil {
		in := make([]st.SendInput, 10)
		for j := range in {
			in[j] = st.SendInput{Body: body(n)}
			n++
		}
		_, errs, err := r.b.SendBatch(ctx, "q", in)
		if err != nil {
			refusal = err
			break
		}
		for j, e := range errs {
			if e != nil {
				t.Fatalf("send failed below the reserve instead of being refused: %v", e)
			}
			sent[in[j].Body] = true
		}
		if n > 100000 {
			t.Fatal("the disk never filled")
		}
	}
	if st.CodeOf(refusal) != st.CodeServiceUnavailable || !strings.Contains(refusal.Error(), "MiB free") {
		t.Fatalf("refusal %v, want ServiceUnavailable naming the free space", refusal)
	}
	if s := r.b.StoreStats(); !s.DiskAlarm || s.DiskFree >= s.DiskReserve {
		t.Fatalf("store stats under the alarm: %+v", s)
	}
	if len(sent) < 1000 {
		t.Fatalf("only %d sends before the alarm on a 4 MiB disk", len(sent))
	}
	// Drain everything through the API: nothing may fail.
	for {
		ms, err := r.b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatalf("receive while draining a full disk: %v (free %d)", err, r.b.StoreStats().DiskFree)
		}
		if len(ms) == 0 {
			break
		}
		hs := make([]string, len(ms))
		for i, m := range ms {
			hs[i] = m.ReceiptHandle
		}
		errs, err := r.b.DeleteBatch(ctx, "q", hs)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("delete while draining a full disk: %v", e)
			}
			deleted[ms[i].Body] = true
		}
	}
	if len(deleted) != len(sent) {
		t.Fatalf("drained %d of %d messages", len(deleted), len(sent))
	}
	// Sends resume by themselves.
	for i := 0; i < 20; i++ {
		b := body(n)
		n++
		if _, err := r.b.Send(ctx, "q", st.SendInput{Body: b}); err != nil {
			t.Fatalf("send after the drain, without a restart: %v (%+v)", err, r.b.StoreStats())
		}
		sent[b] = true
	}
	r.crash()
	r.clk.Advance(time.Minute)
	got := map[string]bool{}
	for _, b := range bodiesOf(t, r.b, "q") {
		got[b] = true
	}
	for b := range sent {
		if !deleted[b] && !got[b] {
			t.Fatalf("acknowledged send %.6s lost", b)
		}
	}
	for b := range deleted {
		if got[b] {
			t.Fatalf("acknowledged delete of %.6s came back", b)
		}
	}
	if len(got) != 20 {
		t.Fatalf("%d messages after the crash, want the 20 sent after the drain", len(got))
	}
}
