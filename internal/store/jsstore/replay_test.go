package jsstore_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/jsstore"
)

// A store that replays a partition from 0 (an owner taking it over, a
// node reading the catalog) while the partition's writer snapshots it,
// and purges below each snapshot, hands over a whole snapshot and what
// follows it, or fails. Never a replay cut short or an empty one: an
// owner would take it for a partition without a queue, and a node
// reading the catalog for a catalog without the queues it owns (it drops
// their partitions).

// purgedUnderReplay: the writer snapshots again, and purges below the new
// snapshot, while the replay is inside the snapshot before it.
func purgedUnderReplay(t *testing.T, conns []*nats.Conn, replicas int) {
	prefix := fmt.Sprint("underreplay", replicas)
	w := open(t, jsstore.Config{Conn: conns[0], Prefix: prefix, Replicas: replicas})
	replay(t, w)
	w.Recovered()
	mustAppend(t, w, 1, 0, false, "settings")
	// A snapshot of eight messages or so: more than one batch of the
	// replay's reads (4 MiB).
	first := []string{"s1"}
	for i := range 40 {
		first = append(first, fmt.Sprintf("%02d", i)+strings.Repeat("b", 200<<10))
	}
	snapshot(t, w, 1, 1, first...)
	last := uint64(1 + len(first))

	r := open(t, jsstore.Config{Conn: conns[len(conns)-1], Prefix: prefix, Replicas: replicas})
	var got []store.Entry
	err := r.ReplayPartition(1, 0, func(e store.Entry) error {
		if len(got) == 0 {
			// The writer goes on meanwhile: a new snapshot, and the purge
			// below it (before its answer).
			snapshot(t, w, 1, last, "s2")
			if st := streamState(t, conns[0], prefix+"_P1"); st.Msgs != 1 {
				t.Fatalf("after the second snapshot the stream holds %+v, want it alone", st)
			}
		}
		e.Data = bytes.Clone(e.Data)
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Logf("the replay failed (the caller replays again): %v", err)
		return
	}
	wantWhole(t, got, [][]string{first, {"s2"}}, []uint64{2, last + 1})
}

// snapshotsRacingReplay: the writer snapshots over and over while another
// store replays the partition over and over.
func snapshotsRacingReplay(t *testing.T, conns []*nats.Conn, replicas int) {
	prefix := fmt.Sprint("racing", replicas)
	w := open(t, jsstore.Config{Conn: conns[0], Prefix: prefix, Replicas: replicas})
	replay(t, w)
	w.Recovered()
	mustAppend(t, w, 1, 0, false, "settings")
	snapshot(t, w, 1, 1, "settings", "state")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		last := uint64(3)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("settings")}, {Data: []byte("state")}})).Wait(ctx); err != nil {
				werr = err
				return
			}
			last += 2
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
		if werr != nil {
			t.Errorf("the writer: %v", werr)
		}
	}()

	r := open(t, jsstore.Config{Conn: conns[len(conns)-1], Prefix: prefix, Replicas: replicas})
	whole, failed := 0, 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && whole < 300; {
		var got []store.Entry
		err := r.ReplayPartition(1, 0, func(e store.Entry) error {
			e.Data = bytes.Clone(e.Data)
			got = append(got, e)
			return nil
		})
		if err != nil {
			failed++
			continue
		}
		// From its last Reset on, a replay holds one whole snapshot (the
		// writer writes nothing else).
		i := len(got) - 1
		for i >= 0 && !got[i].Reset {
			i--
		}
		if i < 0 || !slices.Equal(datas(got[i:]), []string{"settings", "state"}) || got[i+1].Pos != got[i].Pos+1 {
			t.Fatalf("replay %d handed over %s, want a whole snapshot", whole+failed+1, describe(got))
		}
		whole++
	}
	t.Logf("%d whole replays, %d failed (replayed again)", whole, failed)
	if whole == 0 {
		t.Fatalf("no replay was whole")
	}
}

// snapshot writes p's snapshot after position prev.
func snapshot(t *testing.T, s store.Store, p store.PartitionID, prev uint64, data ...string) {
	t.Helper()
	recs := make([]store.Rec, len(data))
	for i, d := range data {
		recs[i] = store.Rec{Data: []byte(d)}
	}
	if err := s.Snapshot(p, prev, slices.Values(recs)).Wait(ctx); err != nil {
		t.Fatalf("snapshot after %d: %v", prev, err)
	}
}

// wantWhole checks that a replay, from its last Reset on, handed over one
// of the snapshots whole, from its first position.
func wantWhole(t *testing.T, got []store.Entry, snaps [][]string, firsts []uint64) {
	t.Helper()
	i := len(got) - 1
	for i >= 0 && !got[i].Reset {
		i--
	}
	if i >= 0 {
		for j, s := range snaps {
			if slices.Equal(datas(got[i:]), s) && got[i].Pos == firsts[j] && got[len(got)-1].Pos == firsts[j]+uint64(len(s))-1 {
				return
			}
		}
	}
	t.Fatalf("the replay handed over %s, want a whole snapshot", describe(got))
}

func datas(es []store.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Data))
	}
	return out
}

// describe names a replay's entries: position, Reset, the data's start.
func describe(es []store.Entry) string {
	if len(es) == 0 {
		return "nothing"
	}
	var b strings.Builder
	for _, e := range es {
		d := string(e.Data)
		if len(d) > 8 {
			d = d[:8] + "…"
		}
		fmt.Fprintf(&b, " %d", e.Pos)
		if e.Reset {
			b.WriteString("(reset)")
		}
		fmt.Fprintf(&b, "%q", d)
	}
	return fmt.Sprintf("%d entries:%s", len(es), b.String())
}
