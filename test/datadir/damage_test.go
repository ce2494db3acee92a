package datadir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/test/process"
)

// The second scenario: one flipped bit in the middle of the log.
// A server took 6,000 acknowledged sends (SendMessageBatch, ten a frame)
// and stopped cleanly; one bit of its segment is flipped. A start
// refuses, naming the segment and the frame's offset; `sluice verify`
// exits non-zero; `sluice verify --salvage` keeps every message whose
// frames read back and counts the others, exactly the damaged frame's;
// a start then serves every other message, and `sluice verify` exits 0.

const damageSends = 6000

// sent is what a server acknowledged: message id to body.
type sent map[string]string

// fill starts a server on dir (with extra flags), sends damageSends
// messages to queue "damaged" in batches of ten from four senders, waits
// until its snapshots hold snapshots bytes (if not 0), and stops it
// cleanly.
func fill(ctx context.Context, t *testing.T, dir string, snapshots int64, extra ...string) sent {
	t.Helper()
	s := serveWith(t, dir, extra...)
	url := queueURL(ctx, t, s.cl, "damaged", true)
	out := sent{}
	var mu sync.Mutex
	batches := make(chan int, damageSends/10)
	for i := range damageSends / 10 {
		batches <- i
	}
	close(batches)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for b := range batches {
				var in []types.SendMessageBatchRequestEntry
				for i := range 10 {
					in = append(in, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprintf("body %05d %s", b*10+i, strings.Repeat("d", 200)))})
				}
				res, err := s.cl.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: in})
				if err != nil || len(res.Failed) > 0 {
					errs <- fmt.Errorf("batch %d: %v %v", b, err, res)
					return
				}
				mu.Lock()
				for _, r := range res.Successful {
					var i int
					fmt.Sscan(*r.Id, &i)
					out[*r.MessageId] = *in[i].MessageBody
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if snapshots > 0 {
		awaitSnapshot(ctx, t, s, snapshots)
	}
	s.stop(t, process.Term)
	return out
}

// awaitSnapshot waits until the server's newest snapshots hold at least
// n bytes (the server renews snapshots at its own pace, once a second).
func awaitSnapshot(ctx context.Context, t *testing.T, s *server, n int64) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var st struct {
			SnapshotBytes int64 `json:"snapshot_bytes"`
		}
		resp, err := (&http.Client{Transport: s.tr}).Get(s.admin + "/api/store")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.SnapshotBytes >= n {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the server's snapshots hold %d bytes, want %d", st.SnapshotBytes, n)
		}
	}
}

// serveWith is serve with extra flags.
func serveWith(t *testing.T, dir string, extra ...string) *server {
	t.Helper()
	if len(extra) == 0 {
		return serve(t, dir)
	}
	p, err := process.Start(process.Config{Bin: bin,
		Args: append([]string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", dir, "--preallocate=false"}, extra...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return attach(t, p, dir)
}

// frame is one frame of a segment: where it is, and the message ids of
// the Send records in it (or, for a snapshot's, how many records).
type frame struct {
	off, len int64
	ids      []string
	snapshot bool
}

func framesIn(t *testing.T, path string) []frame {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frame
	_, bad, err := format.Scan(bytes.NewReader(b), func(off int64, flen int, recs []format.Record) error {
		f := frame{off: off, len: int64(flen)}
		for _, r := range recs {
			switch r.Kind {
			case format.KindKeep:
				rec, err := record.Decode(r.Data, false)
				if err == nil && rec.Type == record.Send {
					f.ids = append(f.ids, rec.Payload.ID)
				}
			case format.KindSnapFirst:
				f.snapshot = true
			}
		}
		out = append(out, f)
		return nil
	})
	if err != nil || bad != "" {
		t.Fatalf("%s: %q %v", path, bad, err)
	}
	return out
}

// run runs the sluice binary with args and returns its output and exit
// status.
func run(ctx context.Context, t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("sluice %v: %v", args, err)
	return "", -1
}

// drainAll receives and deletes every message of queue "damaged".
func drainAll(ctx context.Context, t *testing.T, s *server) sent {
	t.Helper()
	url := queueURL(ctx, t, s.cl, "damaged", false)
	got := sent{}
	for empty := 0; empty < 3; {
		res, err := s.cl.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range res.Messages {
			if _, dup := got[*m.MessageId]; dup {
				t.Fatalf("message %s received twice", *m.MessageId)
			}
			got[*m.MessageId] = *m.Body
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := s.cl.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// copyDir copies the files of a stopped data directory.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	es, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// damageAndSalvage flips one bit in the middle of frame f of segment seg
// in a copy of base, and goes through refusal, check, salvage, start and
// check; it returns the messages that came back and the salvage's output.
func damageAndSalvage(ctx context.Context, t *testing.T, base, seg string, f frame) (sent, string) {
	t.Helper()
	dir := copyDir(t, base)
	path := filepath.Join(dir, seg)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[f.off+f.len/2] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	p := launch(t, dir)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if _, err := p.AwaitServing(tr, startTimeout); err == nil || !p.Exited() || p.ExitErr() == nil {
		t.Fatalf("a server started on a damaged directory (exited %v, %v):\n%s", p.Exited(), p.ExitErr(), p.Tail())
	}
	where := fmt.Sprintf("%s at offset %d (%d bytes: checksum mismatch)", seg, f.off, f.len)
	if !strings.Contains(p.Tail(), where) || !strings.Contains(p.Tail(), "sluice verify --salvage --data-dir "+dir) {
		t.Fatalf("the refusal does not say %q and what to do:\n%s", where, p.Tail())
	}
	t.Logf("start refused: %s", firstLine(p.Tail()))

	if out, code := run(ctx, t, "verify", "--data-dir", dir); code == 0 || !strings.Contains(out, "damaged: "+seg+fmt.Sprintf(" at offset %d", f.off)) {
		t.Fatalf("sluice verify on the damaged directory: exit %d\n%s", code, out)
	}
	salvage, code := run(ctx, t, "verify", "--salvage", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("sluice verify --salvage: exit %d\n%s", code, salvage)
	}
	if out, code := run(ctx, t, "verify", "--data-dir", dir); code != 0 || strings.Contains(out, "damaged:") {
		t.Fatalf("sluice verify after the salvage: exit %d\n%s", code, out)
	}
	s := serve(t, dir)
	got := drainAll(ctx, t, s)
	s.stop(t, process.Term)
	return got, salvage
}

// TestFlippedBit: a bit flipped in a frame of sends at 10%, 50% and 90%
// of the segment, and in the queue's newest snapshot.
func TestFlippedBit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	base := t.TempDir()
	acked := fill(ctx, t, base, 0)
	if len(acked) != damageSends {
		t.Fatalf("%d sends acknowledged", len(acked))
	}
	segs, _ := filepath.Glob(filepath.Join(base, "log-*.seg"))
	slices.Sort(segs)
	seg := segs[len(segs)-1]
	fi, _ := os.Stat(seg)
	frames := framesIn(t, seg)
	for _, at := range []float64{0.1, 0.5, 0.9} {
		t.Run(fmt.Sprintf("at %.0f%%", 100*at), func(t *testing.T) {
			i := slices.IndexFunc(frames, func(f frame) bool { return f.off+f.len > int64(at*float64(fi.Size())) && len(f.ids) > 0 })
			f := frames[i]
			got, salvage := damageAndSalvage(ctx, t, base, filepath.Base(seg), f)
			want := maps.Clone(acked)
			for _, id := range f.ids {
				delete(want, id)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("after the salvage %d messages came back, want the %d but the damaged frame's %d", len(got), len(want), len(f.ids))
			}
			if !strings.Contains(salvage, fmt.Sprintf("salvaged: damaged: %d messages lost", len(f.ids))) {
				t.Fatalf("the salvage does not count the %d messages of the damaged frame:\n%s", len(f.ids), salvage)
			}
			t.Logf("frame at %d (%.1f%% of %d bytes): %d messages lost, %d back; %s", f.off, 100*float64(f.off)/float64(fi.Size()), fi.Size(), len(f.ids), len(got), firstLine(salvage))
		})
	}
}

// TestFlippedBitInSnapshot: a bit flipped in the queue's newest snapshot
// (a small checkpoint makes the server snapshot as it takes the sends).
// Its index is read back as far as it reads: every message whose body
// reads back comes back, and the salvage counts the others.
func TestFlippedBitInSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	base := t.TempDir()
	acked := fill(ctx, t, base, 128<<10, "--checkpoint-bytes", "256KiB", "--segment-bytes", "512KiB")
	var last frame
	var seg string
	segs, _ := filepath.Glob(filepath.Join(base, "log-*.seg"))
	slices.Sort(segs)
	for _, s := range segs {
		for _, f := range framesIn(t, s) {
			if f.snapshot && f.len > 64<<10 { // the queue's, not the catalog's
				last, seg = f, filepath.Base(s)
			}
		}
	}
	if seg == "" {
		for _, s := range segs {
			for _, f := range framesIn(t, s) {
				if f.snapshot {
					t.Logf("snapshot in %s at %d: %d bytes", s, f.off, f.len)
				}
			}
		}
		t.Fatalf("no snapshot of the queue was written (%d segments, %d sends)", len(segs), len(acked))
	}
	got, salvage := damageAndSalvage(ctx, t, base, seg, last)
	for id, body := range got {
		if acked[id] != body {
			t.Fatalf("message %s came back with another body, or was never sent", id)
		}
	}
	lost := len(acked) - len(got)
	if lost > 512 { // at most the messages of one chunk of the index
		t.Fatalf("%d messages lost to one bit of a snapshot", lost)
	}
	counted := max(countIn(salvage, `(\d+) without a body`), countIn(salvage, `damaged: (\d+) messages lost`))
	if counted != lost {
		t.Fatalf("%d messages did not come back, and the salvage counts %d:\n%s", lost, counted, salvage)
	}
	t.Logf("snapshot frame at %d of %s (%d bytes): %d of %d messages back; %s", last.off, seg, last.len, len(got), len(acked), firstLine(salvage))
}

// countIn is the number the first match of pattern (one group of digits)
// finds in s, 0 if none.
func countIn(s, pattern string) int {
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
