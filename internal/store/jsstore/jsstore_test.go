package jsstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/jsstore"
	"github.com/sluicemq/sluice/internal/store/storetest"
)

var ctx = context.Background()

// single starts one node whose max payload is 1 MiB (the store's messages
// are at most that, headers included), closed when the test ends.
func single(t *testing.T) *natsnode.Node {
	t.Helper()
	node, err := natsnode.Start(natsnode.Config{Node: "n1", Dir: t.TempDir(), MaxPayload: 1 << 20, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	c, cancel := context.WithTimeout(ctx, natstest.ReadyTimeout)
	defer cancel()
	if err := node.Ready(c); err != nil {
		t.Fatal(err)
	}
	return node
}

func connect(t *testing.T, n *natsnode.Node) *nats.Conn {
	t.Helper()
	nc, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// open opens a store and closes it when the test ends (Close is
// idempotent: tests may close it earlier).
func open(t *testing.T, cfg jsstore.Config) *jsstore.Store {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = natstest.Logger(t)
	}
	s, err := jsstore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// replayed is what a replay handed over, per partition, in order (a Reset
// starts a partition afresh, as an owner does).
type replayed map[store.PartitionID][]store.Entry

func replay(t *testing.T, s *jsstore.Store) replayed {
	t.Helper()
	r := replayed{}
	err := s.Replay(func(e store.Entry) error {
		e.Data = bytes.Clone(e.Data)
		if e.Reset {
			r[e.P] = nil
		}
		r[e.P] = append(r[e.P], e)
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return r
}

func (r replayed) data(p store.PartitionID) []string {
	var out []string
	for _, e := range r[p] {
		if !e.Moved {
			out = append(out, string(e.Data))
		}
	}
	return out
}

// harness runs the conformance suite's stores on conns[0] (and a second
// store on conns[1]), each subtest with a prefix of its own.
func harness(name string, replicas int, conns []*nats.Conn) func(t *testing.T) *storetest.Harness {
	n := 0
	return func(t *testing.T) *storetest.Harness {
		n++
		cfg := jsstore.Config{Conn: conns[0], Prefix: fmt.Sprintf("%s%d", name, n), Replicas: replicas, Logger: natstest.Logger(t),
			AckTimeout: 2 * time.Second}
		s := open(t, cfg)
		replay(t, s)
		s.Recovered()
		h := &storetest.Harness{Store: s}
		h.Reopen = func() store.Store {
			h.Store.Close()
			s := open(t, cfg)
			h.Store = s
			return s
		}
		h.Second = func() store.Store {
			c := cfg
			c.Conn = conns[len(conns)-1]
			return open(t, c)
		}
		h.Fail = func(on bool) { failWrites(t, conns[0], cfg.Prefix, on) }
		return h
	}
}

// failWrites makes the servers refuse every write to the prefix's streams
// (their largest message: 1 byte), or accept them again.
func failWrites(t *testing.T, nc *nats.Conn, prefix string, on bool) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names := js.StreamNames(c)
	for name := range names.Name() {
		if !strings.HasPrefix(name, prefix+"_P") {
			continue
		}
		st, err := js.Stream(c, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.MaxMsgSize = int32(nc.MaxPayload())
		if on {
			cfg.MaxMsgSize = 1
		}
		if _, err := js.UpdateStream(c, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSingleNode(t *testing.T) {
	node := single(t)
	nc, nc2 := connect(t, node), connect(t, node)
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, harness("S", 1, []*nats.Conn{nc, nc2}))
	})
	t.Run("RecordLargerThanAMessage", func(t *testing.T) { largeRecord(t, nc, 1) })
	t.Run("ManyRecordsOneBatch", func(t *testing.T) { manyRecords(t, nc, 1) })
	t.Run("TooManyMessagesRefused", func(t *testing.T) { tooMany(t, nc) })
	t.Run("BatchAtServerLimit", func(t *testing.T) { batchAtLimit(t, nc, 1) })
	t.Run("PurgeFreesReleased", func(t *testing.T) { purgeFrees(t, nc, 1) })
	t.Run("CompactRehomesBody", func(t *testing.T) { compactRehomes(t, nc, 1) })
	t.Run("CompactWeighsBytes", func(t *testing.T) { compactWeighsBytes(t, nc) })
	t.Run("DiskAlarm", func(t *testing.T) { diskAlarm(t, nc) })
	t.Run("MissingOnLeaderIsNotLoss", func(t *testing.T) { missingOnLeader(t, nc) })
	t.Run("PurgedUnderReplay", func(t *testing.T) { purgedUnderReplay(t, []*nats.Conn{nc, nc2}, 1) })
	t.Run("SnapshotsRacingReplay", func(t *testing.T) { snapshotsRacingReplay(t, []*nats.Conn{nc, nc2}, 1) })
	t.Run("SnapshotWantedByWeight", func(t *testing.T) { snapshotWanted(t, nc) })
	t.Run("AppendsShareMessages", func(t *testing.T) { sharedMessages(t, nc) })
	t.Run("RefusalFromAFormerLeader", func(t *testing.T) { formerLeader(t, nc, nc2) })
}

// formerLeader: a server that still takes itself for a stream's leader (a
// cut-off node rejoining, before it hears of the leader elected without
// it) takes a publish too, and refuses its fence at once, before the
// leader has stored it. Each such write landed and the store says so (an
// owner told "fenced" would hand the request to the next owner, which
// would store it twice); a write another store fenced off is still
// fenced.
func formerLeader(t *testing.T, nc, other *nats.Conn) {
	cfg := jsstore.Config{Conn: nc, Prefix: "former", Replicas: 1, AckTimeout: 2 * time.Second}
	s := open(t, cfg)
	replay(t, s)
	s.Recovered()
	mustAppend(t, s, 1, 0, true, "w0") // makes the stream
	st := stream(t, other, "former_P1")
	refused := make(chan struct{}, 1000) // a value a publish refused
	sub, err := other.Subscribe(st.CachedInfo().Config.Subjects[0], func(m *nats.Msg) {
		if m.Reply != "" && m.Respond([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}`)) == nil {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	const writes = 20
	want := []string{"w0"}
	for i := 1; i <= writes; i++ {
		w := fmt.Sprint("w", i)
		mustAppend(t, s, 1, uint64(i), true, w)
		want = append(want, w)
		<-refused // the former leader answered this write too
	}
	t.Logf("%d writes sent again", s.Stats().ResentWrites)
	// Each write is in the partition once.
	b := open(t, cfg)
	var got []string
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error { got = append(got, string(e.Data)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the partition holds %q, want %q", got, want)
	}
	// b took the partition over and wrote: s is fenced off, whatever the
	// former leader answers.
	mustAppend(t, b, 1, writes+1, false, "epoch-b")
	if err := s.Append(1, writes+1, []store.Rec{{Data: []byte("stale")}}).Wait(ctx); !errors.Is(err, store.ErrFenced) || errors.Is(err, jsstore.ErrOutcomeUnknown) {
		t.Fatalf("a write after b took the partition over: %v, want ErrFenced (not in doubt)", err)
	}
}

// sharedMessages: appends queued while a commit is under way go out
// together, their records sharing stream messages; each record is read
// back by its hint, from the stream (no cache) and after a replay, where
// it has the same hint.
func sharedMessages(t *testing.T, nc *nats.Conn) {
	cfg := jsstore.Config{Conn: nc, Prefix: "shared", Replicas: 1, MaxBodyCache: -1}
	s := open(t, cfg)
	replay(t, s)
	s.Recovered()
	const n = 300
	var fs []store.Future
	var want []string
	for i := range n { // submitted without waiting: the writer groups them
		recs := []store.Rec{{Data: []byte(fmt.Sprint("body-", i)), Keep: i%3 != 0}, {Data: []byte(fmt.Sprint("rec-", i))}}
		if i == n/2 { // a record over several messages, between shared ones
			recs[0].Data = bytes.Repeat([]byte{'L'}, 5<<19)
		}
		want = append(want, string(recs[0].Data), string(recs[1].Data))
		fs = append(fs, s.Append(1, uint64(2*i), recs))
	}
	hints := make([]store.Hint, 0, 2*n)
	for i, f := range fs {
		if err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		hints = append(hints, f.Hints()...)
	}
	st := streamState(t, nc, "shared_P1")
	if st.Msgs >= n || st.Msgs < 4 {
		t.Fatalf("%d appends took %d stream messages: want fewer (shared), and at least the large record's three and one more", n, st.Msgs)
	}
	t.Logf("%d appends in %d stream messages, %d commits", n, st.Msgs, s.Stats().Batches)
	for i, h := range hints {
		if got, err := s.Read(1, uint64(i+1), h); err != nil || string(got) != want[i] {
			t.Fatalf("record %d by its hint %v: %q, %v; want %q", i+1, h, got, err, want[i])
		}
	}
	s.Close()
	r := replay(t, open(t, cfg))[1]
	if len(r) != 2*n {
		t.Fatalf("replay: %d records, want %d", len(r), 2*n)
	}
	for i, e := range r {
		if e.Pos != uint64(i+1) || string(e.Data) != want[i] || e.Hint != hints[i] {
			t.Fatalf("replayed record %d: position %d, %q, hint %v; want %d, %q, %v", i, e.Pos, e.Data, e.Hint, i+1, want[i], hints[i])
		}
	}
}

// snapshotWanted: Wanted names a partition once its log after the newest
// snapshot outweighs SnapshotBytes and the snapshot: after a small
// snapshot, SnapshotMessages small messages are enough; after a large one
// (a backlog), they are not, until the log weighs as much as it.
func snapshotWanted(t *testing.T, nc *nats.Conn) {
	s := open(t, jsstore.Config{Conn: nc, Prefix: "wanted", Replicas: 1, SnapshotBytes: 1 << 20, SnapshotMessages: 100})
	replay(t, s)
	s.Recovered()
	last := uint64(0)
	small := func(n int) { // n appends of one small record: n messages of about 200 bytes, headers included
		t.Helper()
		for range n {
			mustAppend(t, s, 1, last, false, "d")
			last++
		}
	}
	wanted := func() bool { return slices.Contains(s.Wanted(), 1) }
	snapshot := func(recs int, size int) {
		t.Helper()
		rs := make([]store.Rec, recs)
		for i := range rs {
			rs[i] = store.Rec{Data: bytes.Repeat([]byte{'s'}, size)}
		}
		if err := s.Snapshot(1, last, slices.Values(rs)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		last += uint64(recs)
	}
	small(90)
	if wanted() {
		t.Fatal("wanted after 90 small messages (SnapshotMessages 100)")
	}
	small(20)
	if !wanted() {
		t.Fatal("not wanted after 110 small messages (SnapshotMessages 100)")
	}
	snapshot(1, 100)
	if wanted() {
		t.Fatal("wanted right after a snapshot")
	}
	snapshot(4000, 1000) // a backlog's snapshot: about 4 MB
	small(200)
	if wanted() {
		t.Fatal("wanted after 200 small messages, against a snapshot of about 4 MB: a backlog written out again every SnapshotMessages")
	}
	small(300) // 500 messages weigh 500 × 10 KiB (SnapshotBytes / SnapshotMessages) and their bytes: more than the snapshot
	if !wanted() {
		t.Fatal("not wanted once the log outweighs the snapshot")
	}
}

// missingOnLeader: a message the store wrote and did not purge, which the
// stream's leader says it does not have (a leader cut off that has not
// stepped down, or one that lags), is not reported lost (ErrNotFound: the
// owner would drop the message) but as an error the owner may retry; one
// the store purged is ErrNotFound.
func missingOnLeader(t *testing.T, nc *nats.Conn) {
	s := open(t, jsstore.Config{Conn: nc, Prefix: "missing", Replicas: 1, MaxBodyCache: -1})
	replay(t, s)
	s.Recovered()
	hs := append(mustAppend(t, s, 1, 0, true, "a"), mustAppend(t, s, 1, 1, true, "b")...)
	str := stream(t, nc, "missing_P1")
	// Behind the store's back, as a stale leader's copy would lack it.
	if err := str.Purge(ctx, jetstream.WithPurgeSequence(seqOf(hs[0])+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(1, 1, hs[0]); err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("read of a message the stream must hold but its leader lacks: %v, want an error that is not a loss", err)
	}
	if got, err := s.Read(1, 2, hs[1]); err != nil || string(got) != "b" {
		t.Fatalf("read of the other record: %q, %v", got, err)
	}
}

func TestCluster(t *testing.T) {
	nodes := natstest.Cluster(t, 3)
	conns := []*nats.Conn{connect(t, nodes[0]), connect(t, nodes[1])}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, harness("C", 3, conns))
	})
	t.Run("RecordLargerThanAMessage", func(t *testing.T) { largeRecord(t, conns[0], 3) })
	t.Run("ManyRecordsOneBatch", func(t *testing.T) { manyRecords(t, conns[0], 3) })
	t.Run("BatchAtServerLimit", func(t *testing.T) { batchAtLimit(t, conns[0], 3) })
	t.Run("StaleWriterFenced", func(t *testing.T) { staleWriter(t, conns) })
	t.Run("PurgeFreesReleased", func(t *testing.T) { purgeFrees(t, conns[0], 3) })
	t.Run("CompactRehomesBody", func(t *testing.T) { compactRehomes(t, conns[0], 3) })
	t.Run("PurgedUnderReplay", func(t *testing.T) { purgedUnderReplay(t, conns, 3) })
	t.Run("SnapshotsRacingReplay", func(t *testing.T) { snapshotsRacingReplay(t, conns, 3) })
}

func mustAppend(t *testing.T, s store.Store, p store.PartitionID, prev uint64, keep bool, data ...string) []store.Hint {
	t.Helper()
	recs := make([]store.Rec, len(data))
	for i, d := range data {
		recs[i] = store.Rec{Data: []byte(d), Keep: keep}
	}
	f := s.Append(p, prev, recs)
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("append to %d after %d: %v", p, prev, err)
	}
	if f.Last() != prev+uint64(len(data)) {
		t.Fatalf("append of %d after %d ends at %d", len(data), prev, f.Last())
	}
	return f.Hints()
}

// largeRecord: a record of 2 MiB and some (a body with its attributes)
// spans three messages of at most 1 MiB; it reads back whole, through a
// store that wrote it (cached), one that did not (from the stream), and
// replay.
func largeRecord(t *testing.T, nc *nats.Conn, replicas int) {
	cfg := jsstore.Config{Conn: nc, Prefix: fmt.Sprint("big", replicas), Replicas: replicas}
	s := open(t, cfg)
	body := bytes.Repeat([]byte("0123456789abcdef"), (2<<20)/16)
	body = append(body, "attributes"...)
	hs := mustAppend(t, s, 1, 0, true, "before", string(body), "after")
	if hs[1].D != 3 {
		t.Fatalf("a record of %d bytes spans %d messages, want 3", len(body), hs[1].D)
	}
	check := func(s store.Store, hs []store.Hint) {
		t.Helper()
		for i, want := range []string{"before", string(body), "after"} {
			got, err := s.Read(1, uint64(i+1), hs[i])
			if err != nil || string(got) != want {
				t.Fatalf("read of record %d: %d bytes, %v", i+1, len(got), err)
			}
		}
		// The big record's hint with a record count cut short is not it.
		h := hs[1]
		h.D = 2
		if got, err := s.Read(1, 2, h); err == nil {
			t.Fatalf("a read of 2 of the 3 messages of a record returned %d bytes", len(got))
		}
	}
	check(s, hs)
	s.Close()
	s = open(t, cfg)
	r := replay(t, s)
	if got := r.data(1); len(got) != 3 || got[1] != string(body) || got[0] != "before" || got[2] != "after" {
		t.Fatalf("replayed %d records", len(got))
	}
	var rh []store.Hint
	for _, e := range r[1] {
		rh = append(rh, e.Hint)
	}
	if !slices.Equal(rh, hs) {
		t.Fatalf("replay's hints %v, the append's %v", rh, hs)
	}
	check(s, rh)
	mustAppend(t, s, 1, 3, false, "more")
}

// manyRecords: an append of 2,500 small records is written whole, in one
// commit, and replayed whole.
func manyRecords(t *testing.T, nc *nats.Conn, replicas int) {
	cfg := jsstore.Config{Conn: nc, Prefix: fmt.Sprint("many", replicas), Replicas: replicas}
	s := open(t, cfg)
	mustAppend(t, s, 1, 0, false, "first")
	before := s.Stats().Batches
	var data []string
	for i := range 2500 {
		data = append(data, fmt.Sprint("record-", i))
	}
	hs := mustAppend(t, s, 1, 1, true, data...)
	if n := s.Stats().Batches - before; n != 1 {
		t.Fatalf("an append of 2,500 records took %d commits", n)
	}
	for _, i := range []int{0, 1, 1249, 2499} {
		if got, err := s.Read(1, uint64(i+2), hs[i]); err != nil || string(got) != data[i] {
			t.Fatalf("record %d reads %q, %v", i, got, err)
		}
	}
	s.Close()
	s = open(t, cfg)
	got := replay(t, s).data(1)
	if len(got) != 2501 || got[0] != "first" || !slices.Equal(got[1:], data) {
		t.Fatalf("replayed %d records of 2,501", len(got))
	}
}

// tooMany: an append or snapshot that needs more messages than an atomic
// batch may hold is refused whole, and the partition goes on.
func tooMany(t *testing.T, nc *nats.Conn) {
	s := open(t, jsstore.Config{Conn: nc, Prefix: "toomany", Replicas: 1, MaxBatch: 3})
	mustAppend(t, s, 1, 0, false, "a")
	big := strings.Repeat("x", 600<<10) // one a message
	recs := func(n int) []store.Rec {
		out := make([]store.Rec, n)
		for i := range out {
			out[i] = store.Rec{Data: []byte(big)}
		}
		return out
	}
	err := s.Append(1, 1, recs(4)).Wait(ctx)
	if !errors.Is(err, store.ErrTooBig) {
		t.Fatalf("an append needing 4 messages with batches of 3: %v, want ErrTooBig", err)
	}
	if last, ok := store.LastPosition(err); !ok || last != 1 {
		t.Fatalf("the refusal reports the partition ending at %d, want 1", last)
	}
	if err := s.Snapshot(1, 1, slices.Values(recs(4))).Wait(ctx); !errors.Is(err, store.ErrTooBig) {
		t.Fatalf("a snapshot needing 4 messages with batches of 3: %v, want ErrTooBig", err)
	}
	mustAppend(t, s, 1, 1, false, big, big, big)
	mustAppend(t, s, 1, 4, false, "b")
}

// batchAtLimit: an append of records that need exactly as many messages as
// the servers take in one atomic batch (1,000; 17 MB here, so the batch
// also waits for the server's flow-control answers on the way) is written
// whole; one more message is refused.
func batchAtLimit(t *testing.T, nc *nats.Conn, replicas int) {
	cfg := jsstore.Config{Conn: nc, Prefix: "limit", Replicas: replicas, MaxMessage: 17 << 10}
	s := open(t, cfg)
	rec := strings.Repeat("r", 16<<10-64) // one a message
	recs := make([]store.Rec, 1001)
	for i := range recs {
		recs[i] = store.Rec{Data: []byte(rec)}
	}
	if err := s.Append(1, 0, recs).Wait(ctx); !errors.Is(err, store.ErrTooBig) {
		t.Fatalf("an append of 1,001 messages: %v, want ErrTooBig", err)
	}
	f := s.Append(1, 0, recs[:1000])
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if h := f.Hints(); seqOf(h[999]) != 1000 {
		t.Fatalf("the last record is at message %d, want 1000", seqOf(h[999]))
	}
	s.Close()
	s = open(t, cfg)
	if n := len(replay(t, s).data(1)); n != 1000 {
		t.Fatalf("replayed %d records of 1,000", n)
	}
}

func seqOf(h store.Hint) uint64 { return uint64(h.A)<<32 | uint64(h.B) }

// staleWriter: once another store took a partition over and wrote, every
// later write of the former writer fails with ErrFenced, whatever
// position it names, until it takes the partition over again.
func staleWriter(t *testing.T, conns []*nats.Conn) {
	cfg := jsstore.Config{Conn: conns[0], Prefix: "stale", Replicas: 3, AckTimeout: time.Second}
	a := open(t, cfg)
	mustAppend(t, a, 1, 0, true, "a1", "a2")
	cfg.Conn = conns[1]
	b := open(t, cfg)
	var last uint64
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error { last = e.Pos; return nil }); err != nil || last != 2 {
		t.Fatalf("takeover: last %d, %v", last, err)
	}
	mustAppend(t, b, 1, 2, false, "epoch-b")
	for i, prev := range []uint64{2, 3, 2, 0} {
		if err := a.Append(1, prev, []store.Rec{{Data: []byte("stale")}}).Wait(ctx); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale append %d after %d: %v, want ErrFenced", i, prev, err)
		}
	}
	if err := a.Snapshot(1, 2, slices.Values([]store.Rec{{Data: []byte("stale")}})).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale snapshot: %v, want ErrFenced", err)
	}
	if err := a.Drop(1, 2).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale drop: %v, want ErrFenced", err)
	}
	mustAppend(t, b, 1, 3, false, "b1")
	// a takes it back: now b is the stale one.
	var got []string
	if err := a.ReplayPartition(1, 0, func(e store.Entry) error { got = append(got, string(e.Data)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a1", "a2", "epoch-b", "b1"}) {
		t.Fatalf("the partition holds %q", got)
	}
	mustAppend(t, a, 1, 4, false, "epoch-a")
	if err := b.Append(1, 4, []store.Rec{{Data: []byte("stale")}}).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("b after a took the partition back: %v, want ErrFenced", err)
	}
	// a drops the partition: b, which wrote it before, is fenced (its
	// write finds no stream), and takes it over empty.
	if err := a.Drop(1, 5).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error { return fmt.Errorf("replayed %q of a dropped partition", e.Data) }); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, 1, 0, false, "again")
	if _, err := a.Read(1, 1, store.Hint{B: 1, D: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read of a record of the dropped partition: %v, want ErrNotFound", err)
	}
	// a, which does not know, writes after what it dropped and is fenced.
	t0 := time.Now()
	if err := a.Append(1, 0, []store.Rec{{Data: []byte("stale")}}).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's write to the partition it dropped, made again by b: %v, want ErrFenced", err)
	}
	t.Logf("fenced in %v", time.Since(t0))
	// a takes the partition over and drops it: b, its writer before,
	// finds no stream to write to, and is fenced (not left in doubt).
	if err := a.ReplayPartition(1, 0, func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Drop(1, 1).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := b.Append(1, 1, []store.Rec{{Data: []byte("stale")}}).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write to a partition another store dropped: %v, want ErrFenced", err)
	}
	t.Logf("fenced in %v", time.Since(t0))
}

// eventually polls cond until it holds, failing the test after a
// generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s in vain for %s", what)
		}
		<-tick.C
	}
}

// stream opens a stream through the JetStream client, behind the store's
// back.
func stream(t *testing.T, nc *nats.Conn, name string) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.Stream(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// streamState reads a stream's state through the JetStream client.
func streamState(t *testing.T, nc *nats.Conn, name string) jetstream.StreamState {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := stream(t, nc, name).Info(c)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// purgeFrees: bodies released and covered by a snapshot are purged from
// the stream; a body still kept holds them.
func purgeFrees(t *testing.T, nc *nats.Conn, replicas int) {
	prefix := fmt.Sprint("purge", replicas)
	s := open(t, jsstore.Config{Conn: nc, Prefix: prefix, Replicas: replicas, PurgeInterval: 20 * time.Millisecond})
	replay(t, s)
	s.Recovered()
	body := strings.Repeat("b", 100<<10)
	var hints []store.Hint
	var last uint64
	for range 40 {
		hints = append(hints, mustAppend(t, s, 1, last, true, body)...)
		last++
	}
	snap := func() {
		t.Helper()
		if err := s.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("state")}})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		last++
	}
	snap()
	full := streamState(t, nc, prefix+"_P1")
	if full.FirstSeq != 1 || full.Bytes < 40*100<<10 {
		t.Fatalf("with every body kept the stream holds %+v", full)
	}
	// Release all but the newest ten.
	for i, h := range hints[:30] {
		s.Release(1, uint64(i+1), h)
	}
	if b := s.Stats().BadReleases; b != 0 {
		t.Fatalf("%d bad releases", b)
	}
	// The store purges what releases freed in the background.
	eventually(t, "the stream begins at body 31", func() bool { return streamState(t, nc, prefix+"_P1").FirstSeq >= 31 })
	if st := streamState(t, nc, prefix+"_P1"); st.FirstSeq != 31 || st.Bytes > full.Bytes/3 {
		t.Fatalf("after releasing 30 of 40 bodies the stream holds %+v (it held %d bytes)", st, full.Bytes)
	}
	for i := 30; i < 40; i++ {
		if got, err := s.Read(1, uint64(i+1), hints[i]); err != nil || string(got) != body {
			t.Fatalf("kept body %d: %v", i+1, err)
		}
	}
	if _, err := s.Read(1, 1, hints[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read of a purged body: %v, want ErrNotFound", err)
	}
	if err := s.Keep(1, 1, hints[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("keep of a purged body: %v, want ErrNotFound", err)
	}
	// The rest released and a new snapshot: only the snapshot stays.
	for i := 30; i < 40; i++ {
		s.Release(1, uint64(i+1), hints[i])
	}
	snap()
	st := streamState(t, nc, prefix+"_P1")
	if st.Msgs != 1 || st.Bytes > 1<<10 {
		t.Fatalf("with nothing kept, after a snapshot the stream holds %+v", st)
	}
	if s.Stats().DiskBytes > 1<<10 {
		t.Fatalf("Stats.DiskBytes %d, the stream %d", s.Stats().DiskBytes, st.Bytes)
	}
}

// owner answers compaction as a queue owner does: the bodies it holds,
// and where they are.
type owner struct {
	mu    sync.Mutex
	hints map[uint64]store.Hint
	moved int
}

func (o *owner) Live(p store.PartitionID, pos uint64, h store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.hints[pos]
	return ok && cur == h
}

func (o *owner) Moved(p store.PartitionID, pos uint64, old, new store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.hints[pos]; !ok || cur != old {
		return false
	}
	o.hints[pos] = new
	o.moved++
	return true
}

// compactWeighsBytes: below the snapshot, ten large live bodies in
// messages of their own among 300 small dead messages are most of the
// bytes, though few of the messages: compaction leaves them. Once eight
// of them are released, the two left are a small part of the bytes, and
// compaction moves them.
func compactWeighsBytes(t *testing.T, nc *nats.Conn) {
	s := open(t, jsstore.Config{Conn: nc, Prefix: "weigh", Replicas: 1})
	replay(t, s)
	s.Recovered()
	o := &owner{hints: map[uint64]store.Hint{}}
	big := strings.Repeat("b", 16<<10)
	last := uint64(0)
	for range 10 {
		last++
		o.hints[last] = mustAppend(t, s, 1, last-1, true, big)[0]
	}
	for i := range 300 { // more than compactMin
		mustAppend(t, s, 1, last, false, fmt.Sprint("mark-", i))
		last++
	}
	if err := s.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("state")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	last++
	if n := s.Compact(1<<30, o); n != 0 || o.moved != 0 {
		t.Fatalf("with 160 KiB of live bodies among 300 small dead messages, compaction copied %d bytes (%d bodies)", n, o.moved)
	}
	for pos := uint64(3); pos <= 10; pos++ {
		s.Release(1, pos, o.hints[pos])
		delete(o.hints, pos)
	}
	if n := s.Compact(1<<30, o); n != int64(2*len(big)) || o.moved != 2 {
		t.Fatalf("with 32 KiB of live bodies left, compaction copied %d bytes (%d bodies), want the two bodies", n, o.moved)
	}
	for pos := uint64(1); pos <= 2; pos++ {
		if got, err := s.Read(1, pos, o.hints[pos]); err != nil || string(got) != big {
			t.Fatalf("moved body %d reads %d bytes, %v", pos, len(got), err)
		}
	}
}

// compactRehomes: a body older than the snapshot holds the purge floor;
// compaction copies it forward, the floor passes it, and it reads back
// at its new place (also after a restart, through the replayed move).
func compactRehomes(t *testing.T, nc *nats.Conn, replicas int) {
	prefix := fmt.Sprint("compact", replicas)
	cfg := jsstore.Config{Conn: nc, Prefix: prefix, Replicas: replicas}
	s := open(t, cfg)
	replay(t, s)
	s.Recovered()
	o := &owner{hints: map[uint64]store.Hint{}}
	o.hints[1] = mustAppend(t, s, 1, 0, true, "long-lived")[0]
	last := uint64(1)
	for i := range 300 { // more than compactMin, all but one dead
		h := mustAppend(t, s, 1, last, true, fmt.Sprint("short-", i))
		last++
		s.Release(1, last, h[0])
	}
	if err := s.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("state")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	last++
	if st := streamState(t, nc, prefix+"_P1"); st.FirstSeq != 1 {
		t.Fatalf("with the first body kept, the stream begins at %d", st.FirstSeq)
	}
	old := o.hints[1]
	if n := s.Compact(1<<20, o); n != int64(len("long-lived")) || o.moved != 1 {
		t.Fatalf("compaction copied %d bytes, moved %d bodies", n, o.moved)
	}
	if s.Stats().Relocated != 1 {
		t.Fatalf("Stats.Relocated %d", s.Stats().Relocated)
	}
	if st := streamState(t, nc, prefix+"_P1"); st.FirstSeq != 302 {
		t.Fatalf("after the body moved, the stream begins at %d, want 302 (the snapshot)", st.FirstSeq)
	}
	if got, err := s.Read(1, 1, o.hints[1]); err != nil || string(got) != "long-lived" {
		t.Fatalf("the moved body reads %q, %v", got, err)
	}
	if _, err := s.Read(1, 1, old); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a read at the body's old place: %v, want ErrNotFound", err)
	}
	// Nothing more to move.
	if n := s.Compact(1<<20, o); n != 0 {
		t.Fatalf("a second compaction copied %d bytes", n)
	}
	mustAppend(t, s, 1, last, false, "after")
	s.Close()

	s = open(t, cfg)
	r := replay(t, s)
	var moved []store.Entry
	for _, e := range r[1] {
		if e.Moved {
			moved = append(moved, e)
		}
	}
	if len(moved) != 1 || moved[0].Pos != 1 || moved[0].Hint != o.hints[1] {
		t.Fatalf("replayed moves %+v, want position 1 at %+v", moved, o.hints[1])
	}
	if got := r.data(1); !slices.Equal(got, []string{"state", "after"}) {
		t.Fatalf("replayed %q", got)
	}
	if err := s.Keep(1, 1, o.hints[1]); err != nil {
		t.Fatal(err)
	}
	s.Recovered()
	if got, err := s.Read(1, 1, o.hints[1]); err != nil || string(got) != "long-lived" {
		t.Fatalf("the moved body after a restart reads %q, %v", got, err)
	}
}

// diskAlarm: Disk measures the account's storage use against the limit
// it is given, and raises the alarm below the reserve.
func diskAlarm(t *testing.T, nc *nats.Conn) {
	// The node holds the other tests' streams too: the limit counts from
	// what it holds now.
	s := open(t, jsstore.Config{Conn: nc, Prefix: "disk", Replicas: 1, PurgeInterval: 10 * time.Millisecond,
		StoreLimit: 1 << 40, Reserve: 1 << 20})
	eventually(t, "a first reading", func() bool { return s.Disk().Free <= 1<<40 })
	used := 1<<40 - s.Disk().Free
	s.Close()
	s = open(t, jsstore.Config{Conn: nc, Prefix: "disk", Replicas: 1, PurgeInterval: 10 * time.Millisecond,
		StoreLimit: used + 3<<20, Reserve: 1 << 20})
	eventually(t, "a reading of free space", func() bool { d := s.Disk(); return d.Free <= 3<<20 && d.Free > 2<<20 })
	if d := s.Disk(); d.Alarm || d.Reserve != 1<<20 {
		t.Fatalf("with 3 MiB free of a 1 MiB reserve: %+v", d)
	}
	mustAppend(t, s, 1, 0, false, strings.Repeat("x", 900<<10), strings.Repeat("y", 900<<10), strings.Repeat("z", 900<<10))
	eventually(t, "the alarm", func() bool { return s.Disk().Alarm })
}
