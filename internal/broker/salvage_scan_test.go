package broker_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	scanFlips = flag.Int("salvage.flips", 384, "TestSalvageCountsIndexDamage: bits flipped, one at a time, in the queue's newest snapshot")
	scanAt    = flag.Int64("salvage.at", -1, "TestSalvageCountsIndexDamage: flip only the bit at this offset of the segment (with -salvage.mask), and log what did not come back")
	scanMask  = flag.Int("salvage.mask", 0x08, "the bit -salvage.at flips")
)

// TestSalvageCountsIndexDamage flips one bit at a time across the queue's
// newest snapshot (a stretch of it byte by byte, then bytes anywhere in
// it) and salvages each copy: every message that does not come back is
// counted, and nothing comes back that was not sent. A bit of an index
// entry can make it name another message (its sequence, or where its
// Send record is) and still decode; the count must not take the two for
// one.
func TestSalvageCountsIndexDamage(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	cfg := broker.Config{Dir: "/data", FS: mem, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		SegmentBytes: 512 << 10, CheckpointBytes: 64 << 10,
		Rand: rand.NewChaCha8([32]byte{7}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	pad := strings.Repeat("x", 300)
	for i := range 600 {
		body := fmt.Sprintf("m-%05d-%s", i, pad)
		in := st.SendInput{Body: body}
		if i%3 == 0 {
			in.GroupID = fmt.Sprintf("tenant-%d", i%7) // entries of several lengths
		}
		if _, err := b.Send(ctx, "q", in); err != nil {
			t.Fatal(err)
		}
		sent[body] = true
		if i == 400 {
			if err := b.Snapshot(ctx); err != nil { // then 200 sends after it, in the log
				t.Fatal(err)
			}
		}
	}
	b.Close()

	file, off, n := newestSnapshot(t, mem)
	if n < 4<<10 {
		t.Fatalf("the queue's newest snapshot is %d bytes (%s at %d): too small to hold its index", n, file, off)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var checked, refusedNone, counted int
	for i := range *scanFlips {
		at := off + n/2 + int64(i) // a stretch byte by byte: every field of a few entries
		if i >= *scanFlips/2 {
			at = off + rng.Int64N(n) // and anywhere in the frame
		}
		mask := byte(1) << (i % 8)
		if *scanAt >= 0 {
			if i > 0 {
				break
			}
			at, mask = *scanAt, byte(*scanMask)
		}
		c := mem.Crash()
		if err := c.Flip("/data/"+file, at, mask); err != nil {
			t.Fatal(err)
		}
		s := cfg
		s.FS = c
		if b, err := broker.Open(s); err == nil {
			b.Close()
			refusedNone++
			t.Errorf("bit %#02x of %s at %d: a start took the damaged snapshot", mask, file, at)
			continue
		}
		s.Salvage = true
		b, err := broker.Open(s)
		if err != nil {
			t.Fatalf("bit %#02x of %s at %d: salvage: %v", mask, file, at, err)
		}
		rep := b.Salvaged()
		got := bodiesOf(t, b, "q")
		b.Close()
		back := 0
		for _, body := range got {
			if !sent[body] {
				t.Fatalf("bit %#02x of %s at %d: a message came back that was never sent: %.20q", mask, file, at, body)
			}
			back++
		}
		lost := len(sent) - back
		if *scanAt >= 0 {
			have := map[string]bool{}
			for _, body := range got {
				have[body] = true
			}
			for body := range sent {
				if !have[body] {
					t.Logf("did not come back: %.8s", body)
				}
			}
		}
		if rep == nil || rep.Lost() != lost {
			t.Errorf("bit %#02x of %s at %d: %d messages did not come back, the salvage counts %d: %+v", mask, file, at, lost, rep.Lost(), rep.Queues)
		}
		checked++
		counted += lost
	}
	t.Logf("snapshot of %d bytes in %s at %d: %d flipped bits salvaged, %d messages lost and counted over all of them", n, file, off, checked, counted)
}

// newestSnapshot finds the queue's newest snapshot frame in the log.
func newestSnapshot(t *testing.T, mem *vfs.Mem) (file string, off, n int64) {
	t.Helper()
	eachFrame(mem, func(name string, o int64, flen int, recs []format.Record) {
		snap := slices.ContainsFunc(recs, func(r format.Record) bool {
			return (r.Kind == format.KindSnap || r.Kind == format.KindSnapFirst) && r.P != store.Catalog
		})
		if snap && (name > file || (name == file && o > off)) {
			file, off, n = name, o, int64(flen)
		}
	})
	if file == "" {
		t.Fatal("no snapshot of the queue in the log")
	}
	return file, off, n
}

// eachFrame calls fn with each frame of the data directory's segments, in
// file name order, up to each segment's end or first bad frame.
func eachFrame(mem *vfs.Mem, fn func(file string, off int64, flen int, recs []format.Record)) {
	names, _ := mem.ReadDir("/data") // sorted
	for _, name := range names {
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		f, err := mem.OpenFile("/data/"+name, os.O_RDONLY, 0)
		if err != nil {
			continue // listed, so it opens: Mem fails no open
		}
		format.Scan(f, func(o int64, flen int, recs []format.Record) error {
			fn(name, o, flen, recs)
			return nil
		})
		f.Close()
	}
}

// TestSalvageBringsBackQueueWhoseDeletionIsLost damages the catalog
// record of a queue's deletion, in the middle of the log, one byte of its
// frame at a time: a start refuses it, and a salvage brings the queue
// back, names it among the restored, and counts the catalog's lost record
// (or a stretch of which nothing read); the queue beside it is whole.
func TestSalvageBringsBackQueueWhoseDeletionIsLost(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	cfg := broker.Config{Dir: "/data", FS: mem, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Rand: rand.NewChaCha8([32]byte{8}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone", "kept"} {
		if _, err := b.CreateQueue(ctx, name, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	send := func(q string, n int) {
		for i := range n {
			if _, err := b.Send(ctx, q, st.SendInput{Body: fmt.Sprintf("%s-%d", q, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("gone", 5)
	send("kept", 5)
	if err := b.DeleteQueue(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	file, off, n := lastCatalogFrame(t, mem)
	send("kept", 5) // the deletion is in the middle of the log, not its torn tail
	b.Close()

	var read, misread, unread int
	for at := off; at < off+n; at++ {
		c := mem.Crash()
		if err := c.Flip("/data/"+file, at, 0x10); err != nil {
			t.Fatal(err)
		}
		s := cfg
		s.FS = c
		if b, err := broker.Open(s); !errors.Is(err, broker.ErrDamaged) {
			if err == nil {
				b.Close()
			}
			t.Fatalf("byte %d of the deletion's frame: a start gives %v, want ErrDamaged", at-off, err)
		}
		s.Salvage = true
		sb, err := broker.Open(s)
		if err != nil {
			t.Fatalf("byte %d of the deletion's frame: salvage: %v", at-off, err)
		}
		sv := sb.Salvaged()
		if sv == nil || !slices.Contains(sv.Restored, "gone") {
			sb.Close()
			t.Fatalf("byte %d of the deletion's frame: the salvage restored %+v, want the deleted queue gone back", at-off, sv)
		}
		// The damaged record reads as the catalog's, or (its partition
		// field the damaged one) as another partition's, or not at all.
		switch i := slices.IndexFunc(sv.Queues, func(l st.QueueLoss) bool { return l.Records > 0 }); {
		case i >= 0 && sv.Queues[i].Name == st.CatalogLoss:
			read++
		case i >= 0:
			misread++
		case sv.Unknown > 0:
			unread++
		default:
			sb.Close()
			t.Fatalf("byte %d of the deletion's frame: the salvage reports %+v, want the catalog's lost record counted", at-off, sv)
		}
		for q, want := range map[string]int{"gone": -1, "kept": 10} {
			ps, _, err := sb.Peek(q, broker.PeekFilter{Max: 100})
			if err != nil {
				t.Fatalf("byte %d of the deletion's frame: peek %s after the salvage: %v", at-off, q, err)
			}
			for _, p := range ps {
				if !strings.HasPrefix(p.Body, q+"-") {
					t.Errorf("byte %d of the deletion's frame: queue %s holds %q after the salvage, sent to another queue", at-off, q, p.Body)
				}
			}
			if want >= 0 && len(ps) != want {
				t.Errorf("byte %d of the deletion's frame: queue %s holds %d messages after the salvage, want %d", at-off, q, len(ps), want)
			}
		}
		if err := sb.DeleteQueue(ctx, "gone"); err != nil {
			t.Fatalf("byte %d of the deletion's frame: deleting the queue the salvage brought back: %v", at-off, err)
		}
		sb.Close()
	}
	t.Logf("%d bytes of the deletion's frame damaged: the catalog's record read as lost %d times, read as another partition's %d, not read %d", n, read, misread, unread)
	if read == 0 || unread == 0 {
		t.Errorf("the damage never hit the record (%d) or the frame's header (%d)", read, unread)
	}
}

// lastCatalogFrame finds the newest frame of the log that holds a record
// of the catalog.
func lastCatalogFrame(t *testing.T, mem *vfs.Mem) (file string, off, n int64) {
	t.Helper()
	eachFrame(mem, func(name string, o int64, flen int, recs []format.Record) {
		if slices.ContainsFunc(recs, func(r format.Record) bool { return r.P == store.Catalog && r.Kind == format.KindRec }) &&
			(name > file || (name == file && o > off)) {
			file, off, n = name, o, int64(flen)
		}
	})
	if file == "" {
		t.Fatal("no record of the catalog in the log")
	}
	return file, off, n
}
