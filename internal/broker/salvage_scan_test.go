package broker_test

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
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
	names, _ := mem.ReadDir("/data")
	for _, name := range names {
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		f, err := mem.OpenFile("/data/"+name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		format.Scan(f, func(o int64, flen int, recs []format.Record) error {
			for _, r := range recs {
				if (r.Kind == format.KindSnap || r.Kind == format.KindSnapFirst) && r.P != store.Catalog {
					if name > file || (name == file && o > off) {
						file, off, n = name, o, int64(flen)
					}
					break
				}
			}
			return nil
		})
		f.Close()
	}
	if file == "" {
		t.Fatal("no snapshot of the queue in the log")
	}
	return file, off, n
}
