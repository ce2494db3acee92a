package sluice

import (
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

func TestRecordRoundTrip(t *testing.T) {
	s := "v"
	with := func(m *queue.Msg, f func(m *queue.Msg)) *queue.Msg { f(m); return m }
	recs := []*record{
		{T: recHeader, NextQ: 7, NextSeq: 99},
		{T: recQueue, Meta: &queueMeta{ID: 3, Name: "q.fifo", FIFO: true, Attrs: map[string]string{"VisibilityTimeout": "5"}, Tags: map[string]string{"a": "b"}, Created: 1, Modified: 2}},
		{T: recSend, Q: 3, M: with(&queue.Msg{Seq: 42, Level: 2, Sent: 1700000000000, VisibleAt: 1700000005000, State: queue.InFlight,
			Loc: queue.Loc{Seg: 3, Off: 4096, FLen: 2000, Idx: 7}}, func(m *queue.Msg) {
			m.SetGroup("g")
			m.SetDelivery(2, 1700000001000, 1700000002000, 2)
			m.SetTenant("acme")
			m.SetFail(&queue.FailInfo{Reason: "Retry", LastError: "boom", First: 1700000001000, Failures: 2})
		}),
			P: &payload{ID: "id", Body: "body\r\n✓", Trace: "Root=1", Sender: "alice", Dedup: "d", SeqNum: "00000000000000000001", MD5: "0123456789abcdef",
				Attrs: map[string]st.AttributeValue{"s": {DataType: "String", StringValue: &s}, "b": {DataType: "Binary", BinaryValue: []byte{0, 1}}, "l": {DataType: "String", StringListValues: []string{"x", "y"}, BinaryListValues: [][]byte{{9}}}}}},
		{T: recReceive, Q: 3, Seq: 42, RC: 3, First: 1, Dlv: 2, Vis: 3, Fence: 3, Lvl: 2},
		{T: recUpdate, Q: 3, Seq: 42, M: with(&queue.Msg{Seq: 42, Level: 1, VisibleAt: 5}, func(m *queue.Msg) {
			m.SetDelivery(1, 0, 0, 0)
			m.SetFail(&queue.FailInfo{Reason: "VisibilityTimeout", First: 4, Failures: 1})
		})},
		{T: recMove, Q: 3, Seq: 42, To: 4, M: with(&queue.Msg{Seq: 43, Loc: queue.Loc{Seg: 1}}, func(m *queue.Msg) { m.SetDLQSource("arn") })},
		{T: recDedup, Q: 3, First: 99, P: &payload{Dedup: "k", ID: "i", SeqNum: "1"}},
		{T: recPurge, Q: 3, UpTo: 100},
	}
	for _, r := range recs {
		got, err := decodeRecord(r.encode())
		if err != nil {
			t.Fatalf("%s: %v", r.T, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s round trip:\n got %+v\nwant %+v", r.T, got, r)
		}
	}
}

// TestRecordVersion2: records written before the body's MD5 was kept
// (codec version 2) still decode, with no MD5.
func TestRecordVersion2(t *testing.T) {
	r := &record{T: recSend, Q: 3, M: &queue.Msg{Seq: 9, Sent: 5}, P: &payload{ID: "id", Body: "body", TraceParent: "tp", MD5: "0123456789abcdef"}}
	got, err := decodeRecord(r.encodeVersion(2))
	if err != nil {
		t.Fatal(err)
	}
	r.P.MD5 = ""
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("version 2 record:\n got %+v\nwant %+v", got, r)
	}
	if _, err := decodeRecord(append([]byte{codecVersion + 1}, r.encode()[1:]...)); err == nil {
		t.Fatal("a record from a newer codec version decoded")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&record{T: recSend, Q: 1, M: &queue.Msg{Seq: 1}, P: &payload{Body: "x"}}).encode())
	f.Add((&record{T: recQueue, Meta: &queueMeta{Name: "q"}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same record.
		r2, err := decodeRecord(r.encode())
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("unstable round trip: %v", err)
		}
	})
}
