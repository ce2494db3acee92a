package remote

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// fakeQueue records what it was given and answers as told.
type fakeQueue struct {
	mu    sync.Mutex
	got   []st.SendInput
	from  []queue.Origin
	errs  []error
	err   error
	marks map[uint64]uint64
}

func (q *fakeQueue) Deliver(_ context.Context, in []st.SendInput, from []queue.Origin) ([]error, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.got, q.from = append(q.got, in...), append(q.from, from...)
	if q.err != nil {
		return nil, q.err
	}
	errs := make([]error, len(in))
	copy(errs, q.errs)
	return errs, nil
}

func (q *fakeQueue) Marks(context.Context) (map[uint64]uint64, error) { return q.marks, q.err }

func conn(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := natstest.Single(t).Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestDeliverCarriesMessagesOriginsAndRefusals: messages and origins reach
// the owner as sent, and each refusal comes back with its code, message
// and retry hint; marks come back whole.
func TestDeliverCarriesMessagesOriginsAndRefusals(t *testing.T) {
	nc := conn(t)
	delay := 5
	q := &fakeQueue{marks: map[uint64]uint64{7: 42, 9: 1},
		errs: []error{nil, &st.Error{Code: st.CodeRequestThrottled, Message: "tenant a is over its limit", RetryAfter: 1500 * time.Millisecond}}}
	subs, err := ServeQueue(nc, "t.deliver", "t.marks", q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	in := []st.SendInput{
		{Body: "one", GroupID: "g", DelaySeconds: &delay, Attributes: map[string]st.AttributeValue{"k": {DataType: "Binary", BinaryValue: []byte{0, 1, 2}}}},
		{Body: "two"},
	}
	from := []queue.Origin{{Partition: 7, Pos: 43, After: 42}, {Partition: 7, Pos: 44, After: 43}}
	errs, err := Deliver(context.Background(), nc, "t.deliver", "q", in, from)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || st.CodeOf(errs[1]) != st.CodeRequestThrottled {
		t.Fatalf("refusals %v", errs)
	}
	var se *st.Error
	if !errors.As(errs[1], &se) || se.Message != "tenant a is over its limit" || se.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("refusal %#v", errs[1])
	}
	q.mu.Lock()
	if len(q.got) != 2 || q.got[0].Body != "one" || *q.got[0].DelaySeconds != 5 || string(q.got[0].Attributes["k"].BinaryValue) != "\x00\x01\x02" ||
		q.got[0].GroupID != "g" || q.from[1] != from[1] {
		t.Fatalf("the owner got %+v from %+v", q.got, q.from)
	}
	q.mu.Unlock()
	marks, err := Marks(context.Background(), nc, "t.marks", "q")
	if err != nil || len(marks) != 2 || marks[7] != 42 || marks[9] != 1 {
		t.Fatalf("marks %v, %v", marks, err)
	}

	// A whole call refused: the error, not per-message ones.
	q.mu.Lock()
	q.err = &st.Error{Code: st.CodeServiceUnavailable, Message: "moving"}
	q.mu.Unlock()
	if _, err := Deliver(context.Background(), nc, "t.deliver", "q", in[:1], from[:1]); st.CodeOf(err) != st.CodeServiceUnavailable {
		t.Fatalf("a refused call: %v", err)
	}
	if _, err := Marks(context.Background(), nc, "t.marks", "q"); st.CodeOf(err) != st.CodeServiceUnavailable {
		t.Fatalf("refused marks: %v", err)
	}
}

// TestDeliverWithoutOwner: no node serves the queue (it is between
// owners), or the request is malformed: refusals, never a hang or a panic.
func TestDeliverWithoutOwner(t *testing.T) {
	nc := conn(t)
	_, err := Deliver(context.Background(), nc, "nobody.deliver", "q", []st.SendInput{{Body: "x"}}, nil)
	if st.CodeOf(err) != st.CodeServiceUnavailable {
		t.Fatalf("no owner: %v", err)
	}
	if _, err := Marks(context.Background(), nc, "nobody.marks", "q"); st.CodeOf(err) != st.CodeServiceUnavailable {
		t.Fatalf("no owner's marks: %v", err)
	}
	q := &fakeQueue{}
	subs, err := ServeQueue(nc, "m.deliver", "m.marks", q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, data := range []string{"", "{", `{"in":[]}`, `{"in":[{"Body":"a"}],"from":[{},{}]}`} {
		m, err := nc.Request("m.deliver", []byte(data), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep deliverReply
		if err := json.Unmarshal(m.Data, &rep); err != nil || rep.Err == nil || rep.Err.Code != st.CodeInvalidParameterValue {
			t.Fatalf("%q: answered %s", data, m.Data)
		}
	}
	if _, err := Deliver(context.Background(), nc, "m.deliver", "q", nil, nil); st.CodeOf(err) != st.CodeInvalidParameterValue {
		t.Fatalf("an empty delivery: %v", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.got) != 0 {
		t.Fatalf("malformed deliveries reached the queue: %v", q.got)
	}
}
