package record

import (
	"context"
	"encoding/hex"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

func ptr[T any](v T) *T { return &v }

func samples() []*Record {
	msg := &Msg{Seq: 42, Sent: 1700000000000, VisibleAt: 1700000005000, Group: "g", Tenant: "t", DLQSource: "arn:aws:sqs:us-east-1:000000000000:src",
		Count: 3, First: 1700000001000, Last: 1700000004000, Fence: 3, State: 3, Level: 2,
		Fail: &Fail{Reason: "Retry", LastError: "boom", First: 1700000002000, Failures: 2}, Hint: store.Hint{A: 1, B: 2, C: 3, D: 4}}
	payload := &Payload{ID: "id", Body: "hello ☃", Trace: "Root=1", Sender: "alice", Dedup: "d", SeqNum: "000001", TraceParent: "00-x", MD5: "0123456789abcdef",
		Attrs: map[string]st.AttributeValue{"s": {DataType: "String", StringValue: ptr("v")}, "b": {DataType: "Binary", BinaryValue: []byte{0, 1}},
			"l": {DataType: "String", StringListValues: []string{"a", "b"}, BinaryListValues: [][]byte{{9}}}}}
	return []*Record{
		{Type: Meta, Meta: &QueueMeta{ID: 7, Name: "q", FIFO: true, Attrs: map[string]string{"VisibilityTimeout": "5"}, Created: 1, Modified: 2,
			Tenants: map[string]TenantLimits{"a": {Weight: 2, MaxInFlight: 3}}}},
		{Type: Send, Msg: msg, Payload: payload},
		{Type: Index, Msgs: []Msg{*msg, *msg}},
		{Type: Receive, Seq: 9, Count: 2, First: 10, Last: 11, VisibleAt: 12, Fence: 2, Level: 1},
		{Type: Receive, Seq: 9, Count: 3, First: 10, Last: 14, VisibleAt: 15, Fence: 3, Level: 2,
			Fail: &Fail{Reason: "VisibilityTimeout", LastError: "upstream 503", First: 12, Failures: 2}},
		{Type: Visibility, Seq: 9, VisibleAt: -5},
		{Type: Delete, Seq: 9, Reason: ByWatermark},
		{Type: Purge},
		{Type: Purge, Until: 1_700_000_060_000},
		{Type: Update, Seq: 42, Msg: msg},
		{Type: Dedup, Key: "k", ID: "i", SeqNum: "n", Until: 99},
		{Type: State, NextSeqNum: 123},
		{Type: State, NextSeqNum: 123, Until: 1_700_000_060_000},
		{Type: Create, Partition: 5, Name: "orders"},
		{Type: Drop, Partition: 5},
		{Type: Drop, Partition: 5, Name: "orders", Until: 1_700_000_060_000},
		{Type: Catalog, NextPartition: 6},
		{Type: OriginMark, Partition: 9, OriginPos: 1 << 40},
		{Type: Epoch, Node: "n2", Term: 77},
		{Type: Entered, Key: "7/1234", Until: 1_700_000_000_000},
		{Type: Task, Task: &MoveTask{Handle: "eyJ0YXNrSWQiOiJ4In0=", Source: "arn:aws:sqs:us-east-1:000000000000:dlq", Rate: 50,
			Status: TaskRunning, Started: 1_700_000_000_000, ToMove: 200, Moved: 100, Bound: 1 << 33, Allowed: []string{"src", "other"}}},
		{Type: Task, Task: &MoveTask{Handle: "h", Source: "arn:aws:sqs:us-east-1:000000000000:dlq", Destination: "arn:aws:sqs:us-east-1:000000000000:q",
			Status: TaskFailed, Started: 1, Ended: 2, ToMove: 3, Moved: 1, Failure: "AWS.SimpleQueueService.NonExistentQueue", Bound: 9,
			Filter: &TaskFilter{Tenant: "a", Source: "src", Reason: "Reject", Since: 10, Until: 20}, Allowed: []string{"q"}}},
		{Type: TopicCreate, Partition: 12, Name: "orders"},
		{Type: TopicDrop, Partition: 12, Name: "orders"},
		{Type: TopicMeta, Topic: &TopicInfo{ID: 12, Name: "orders.fifo", FIFO: true, Attrs: map[string]string{"ContentBasedDeduplication": "true"},
			Tags: map[string]string{"team": "a"}, Created: 1, Modified: 2, Subs: map[string]Subscription{
				"5f0c": {Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:q.fifo", Account: "000000000000",
					Attrs: map[string]string{"RawMessageDelivery": "true", "FilterPolicy": `{"a":["b"]}`}, Created: 3}}}},
		{Type: State, NextSeqNum: 7, Number: 1 << 35},
		{Type: Publish, Number: 1 << 33, Payload: &Payload{ID: "m-1", Body: "hello", Dedup: "d", SeqNum: "10000000000000000001", Sender: "AKID",
			Attrs: map[string]st.AttributeValue{"n": {DataType: "Number", StringValue: ptr("1.5")}}}, Subject: "subject", Group: "group", Published: 1_700_000_000_123, JSON: true},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range samples() {
		got, err := Decode(Encode(r), true)
		if err != nil {
			t.Fatalf("%s: %v", r.Type, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", r.Type, got, r)
		}
	}
}

// TestEncodeRawEqualsPayload: a Send encoded from its payload encoded in
// advance (the header written into the room before it) is the same bytes
// as one encoded whole, also when the header is too long for the room.
// TestDecodesOlderRecords: records written before a field was added
// decode with the field zero.
func TestDecodesOlderRecords(t *testing.T) {
	for _, c := range []struct {
		raw  []byte
		want Record
	}{
		{[]byte{Version, byte(Purge)}, Record{Type: Purge}},
		{[]byte{Version, byte(State), 123}, Record{Type: State, NextSeqNum: 123}},
		{[]byte{Version, byte(Drop), 5}, Record{Type: Drop, Partition: 5}},
	} {
		got, err := Decode(c.raw, true)
		if err != nil || !reflect.DeepEqual(*got, c.want) {
			t.Fatalf("% x: got %+v, %v; want %+v", c.raw, got, err, c.want)
		}
	}
}

func TestEncodeRawEqualsPayload(t *testing.T) {
	// A header that fits, one that fits but is longer than half the room
	// (moved up over itself), one that does not fit.
	for _, group := range []string{"g", strings.Repeat("y", 90), strings.Repeat("x", 200)} {
		r := samples()[1]
		m := *r.Msg
		m.Group = group
		r.Msg = &m
		want := string(Encode(r))
		raw := *r
		raw.Raw = EncodePayload(r.Payload)
		if got := string(Encode(&raw)); got != want {
			t.Fatalf("group of %d bytes: encoded from Raw differs", len(group))
		}
	}
	r := samples()[1]
	head, err := Decode(Encode(r), false)
	if err != nil || head.Payload.Body != "" || head.Payload.ID != "id" || head.Payload.SeqNum != "000001" || head.Msg.Seq != 42 {
		t.Fatalf("decoding without the body: %+v %v", head, err)
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {Version}, {3, 2, 0}, {Version, 99}, {Version, byte(Receive), 0xff}} {
		if _, err := Decode(b, true); err == nil {
			t.Fatalf("decoded %x", b)
		}
	}
	full := Encode(samples()[1])
	for i := 2; i < len(full); i++ {
		if _, err := Decode(full[:i], true); err == nil {
			t.Fatalf("decoded a record cut at %d of %d", i, len(full))
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, r := range samples() {
		f.Add(Encode(r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b, true)
		if err != nil {
			return
		}
		if _, err := Decode(Encode(r), true); err != nil {
			t.Fatalf("re-encoding a decoded record: %v", err)
		}
	})
}

// ReadPayload reads a Send's payload back as Decode does (reading past
// its index entry, failures and all) and refuses any other record.
func TestReadPayload(t *testing.T) {
	s := store.NewMemory()
	recs := []store.Rec{{Data: Encode(samples()[1]), Keep: true}, {Data: Encode(samples()[3])}}
	f := s.Append(1, 0, recs)
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := f.Hints()
	got, err := ReadPayload(s, 1, 1, h[0])
	if err != nil || !reflect.DeepEqual(got, samples()[1].Payload) {
		t.Fatalf("ReadPayload = %+v, %v\nwant %+v", got, err, samples()[1].Payload)
	}
	if _, err := ReadPayload(s, 1, 2, h[1]); err == nil || !strings.Contains(err.Error(), "receive") {
		t.Fatalf("ReadPayload of a receive: %v", err)
	}
}

// TestDecodeIndexAsFarAsItReads: a damaged Index record gives the entries
// before the damage and the count it held, or, when the count is what was
// damaged, the entries that read to its end.
func TestDecodeIndexAsFarAsItReads(t *testing.T) {
	var msgs []Msg
	for i := range 300 {
		msgs = append(msgs, Msg{Seq: uint64(10 + i), Sent: 1000, Group: "tenant-a", Hint: store.Hint{A: uint32(i)}})
	}
	b := Encode(&Record{Type: Index, Msgs: msgs})

	got, n, ok := DecodeIndex(b)
	if !ok || n != 300 || len(got) != 300 || got[299].Seq != 309 {
		t.Fatalf("undamaged: %d entries of %d, %v", len(got), n, ok)
	}
	count := slices.Clone(b)
	count[2] ^= 0x04 // the count's low byte: 300 read as 296
	if got, n, ok := DecodeIndex(count); !ok || n != 300 || len(got) != 300 {
		t.Fatalf("damaged count: %d entries of %d, %v", len(got), n, ok)
	}
	entry := slices.Clone(b)
	cut := 2 + 2 + len(b)/2 // an entry in the middle
	entry = entry[:cut]     // the rest unreadable
	if got, n, ok := DecodeIndex(entry); !ok || n != 300 || len(got) >= 300 || len(got) < 100 {
		t.Fatalf("cut in the middle: %d entries of %d, %v", len(got), n, ok)
	}
	if _, _, ok := DecodeIndex(Encode(&Record{Type: Delete, Seq: 4})); ok {
		t.Fatal("a Delete record read as an index")
	}
}

// TestEncodingUnchanged: the samples encode to the bytes the codec wrote
// for them before its fields were renamed (testdata/samples.hex, one
// record a line, written by the codec of 5bf9fb1): the format on disk
// does not move with the names in the code.
func TestEncodingUnchanged(t *testing.T) {
	raw, err := os.ReadFile("testdata/samples.hex")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(raw)), "\n")
	got := samples()
	if len(got) != len(want) {
		t.Fatalf("%d samples, testdata has %d", len(got), len(want))
	}
	for i, r := range got {
		if h := hex.EncodeToString(Encode(r)); h != want[i] {
			t.Errorf("sample %d (%s) encodes to\n%s\nwant\n%s", i, r.Type, h, want[i])
		}
	}
}
