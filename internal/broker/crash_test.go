package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var crashKills = flag.Int("crash.kills", 5, "SIGKILLs in TestCrashRecovery (the full run uses 60)")

func TestMain(m *testing.M) {
	if dir := os.Getenv("SLUICE_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	if dir := os.Getenv("SLUICE_TOPIC_CRASH_CHILD"); dir != "" {
		topicCrashChild(dir)
		return
	}
	goleak.VerifyTestMain(m) // fails the tests if any goroutine outlives them

}

// crashConfig is the broker of the children and of the check: 64 KiB
// segments, so that a child's second rolls dozens; compaction every 10ms;
// and every body tracked, so that a wrong release is counted.
func crashConfig(dir string) broker.Config {
	return broker.Config{Dir: dir, CheckpointBytes: 256 << 10, SegmentBytes: 64 << 10,
		CompactInterval: 10 * time.Millisecond, CheckReleases: true}
}

const (
	// crashSnapshotEvery is how often a child renews its snapshots. The
	// maintenance timer asks the store once a second, longer than a child
	// lives: without this the replay floor never moved, and nothing below
	// it was compacted or unlinked.
	crashSnapshotEvery = 25 * time.Millisecond
	// crashReportEvery is how often a child prints its store's figures.
	crashReportEvery = 10 * time.Millisecond
	// crashBacklog is the backlog two producers of a child fill the queue
	// to before they join the mixed load: whole segments of messages that
	// the consumers drain (and the store frees) while the child lives.
	crashBacklog = 1000
)

// crashChild runs a broker under concurrent load and prints one line per
// acknowledged operation, naming a message by its id (the text of its
// body before the first space; the rest is padding): "S id", "R id count",
// "X id" (a delete is tried), "D id". Every crashReportEvery it prints
// "T" and the store's figures since it opened (crashFigures). It runs
// until it is killed.
func crashChild(dir string) {
	b, err := broker.Open(crashConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if _, err := b.CreateQueue(ctx, "crash", map[string]string{"VisibilityTimeout": "1"}, nil); err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	emit := func(lines ...string) {
		mu.Lock()
		for _, l := range lines {
			out.WriteString(l)
			out.WriteByte('\n')
		}
		out.Flush()
		mu.Unlock()
	}
	report := func() {
		s := b.StoreStats()
		emit(fmt.Sprintf("T snapshots=%d segmentsRemoved=%d relocated=%d badReleases=%d unreadable=%d",
			s.Snapshots, s.SegmentsRemoved, s.Relocated, s.BadReleases, s.Unreadable))
	}
	report() // recovery's figures (Unreadable), before any kill can come
	go func() {
		for range time.Tick(crashReportEvery) {
			report()
		}
	}()
	go func() {
		for range time.Tick(crashSnapshotEvery) {
			if err := b.Snapshot(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "snapshot:", err)
				os.Exit(2)
			}
		}
	}()
	backlog := func() int {
		a, err := b.GetQueueAttributes("crash", []string{"ApproximateNumberOfMessages"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "attributes:", err)
			os.Exit(2)
		}
		n, _ := strconv.Atoi(a["ApproximateNumberOfMessages"])
		return n
	}
	run := os.Getenv("SLUICE_CRASH_RUN")
	pad := strings.Repeat("x", 1500)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(time.Now().UnixNano() + int64(g)))
			next := 0
			send := func(n int) {
				ids := make([]string, n)
				in := make([]st.SendInput, n)
				for k := range in {
					ids[k] = fmt.Sprintf("%s-%d-%d", run, g, next)
					next++
					in[k] = st.SendInput{Body: ids[k] + " " + pad[:100+rng.Intn(len(pad)-100)]}
				}
				var errs []error
				if n == 1 {
					_, err := b.Send(ctx, "crash", in[0])
					errs = []error{err}
				} else {
					var err error
					if _, errs, err = b.SendBatch(ctx, "crash", in); err != nil {
						return
					}
				}
				var acked []string
				for k, err := range errs {
					if err == nil {
						acked = append(acked, "S "+ids[k])
					}
				}
				emit(acked...)
			}
			for g < 2 && backlog() < crashBacklog {
				send(10)
			}
			for {
				send(1 + rng.Intn(5))
				ms, err := b.Receive(ctx, "crash", st.ReceiveInput{MaxMessages: 10})
				if err != nil {
					continue
				}
				// Three in four are deleted; the rest come back after the
				// visibility timeout, so segments stay partly live for a
				// while (what compaction copies out of).
				var received, tries, ids, handles []string
				for _, m := range ms {
					id, _, _ := strings.Cut(m.Body, " ")
					received = append(received, fmt.Sprintf("R %s %d", id, m.ReceiveCount))
					if rng.Intn(4) != 0 {
						tries = append(tries, "X "+id)
						ids = append(ids, id)
						handles = append(handles, m.ReceiptHandle)
					}
				}
				emit(received...)
				// Announce the attempts: a delete may be durable even when
				// the kill comes before its answer.
				emit(tries...)
				if g%2 == 0 {
					for k, h := range handles {
						if err := b.Delete(ctx, "crash", h); err == nil {
							emit("D " + ids[k])
						}
					}
				} else if len(handles) > 0 {
					errs, err := b.DeleteBatch(ctx, "crash", handles)
					if err != nil {
						continue
					}
					for k, err := range errs {
						if err == nil {
							emit("D " + ids[k])
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
}

// startCrashChild starts this test binary again as a child with env added
// (which TestMain reads to run a child), its stderr going to stderr, and
// returns it with the lines of its stdout. On a failure while it runs, the
// child goes too.
func startCrashChild(t *testing.T, stderr io.Writer, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range lines {
		}
		cmd.Wait()
	})
	return cmd, lines
}

// crashFigures is what a child's store did since it opened (a "T" line).
type crashFigures struct {
	snapshots, segmentsRemoved, relocated, badReleases, unreadable int64
}

func parseCrashFigures(l string) (crashFigures, bool) {
	var f crashFigures
	fields := map[string]*int64{"snapshots": &f.snapshots, "segmentsRemoved": &f.segmentsRemoved,
		"relocated": &f.relocated, "badReleases": &f.badReleases, "unreadable": &f.unreadable}
	words := strings.Fields(l)
	if len(words) != len(fields)+1 {
		return f, false
	}
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		p, ok := fields[k]
		if !ok {
			return f, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return f, false
		}
		*p = n
	}
	return f, true
}

// crashHistory is what the children acknowledged, by message id.
type crashHistory struct {
	sent      map[string]bool // send acknowledged
	attempted map[string]bool // delete tried
	deleted   map[string]bool // delete acknowledged
	maxCount  map[string]int  // highest acknowledged receive count
}

func (h *crashHistory) record(l string) {
	f := strings.Fields(l)
	if len(f) < 2 {
		return
	}
	switch f[0] {
	case "S":
		h.sent[f[1]] = true
	case "D":
		h.deleted[f[1]] = true
	case "X":
		h.attempted[f[1]] = true
	case "R":
		if len(f) == 3 {
			n, _ := strconv.Atoi(f[2])
			if n > h.maxCount[f[1]] {
				h.maxCount[f[1]] = n
			}
		}
	}
}

// TestCrashRecovery kills a broker under load with SIGKILL at random
// moments and checks the invariants after every restart: each acknowledged
// send is present unless its delete was tried, no acknowledged delete
// comes back, receive counts never go back below an acknowledged receive,
// no message is there twice, and the store keeps the bodies of the
// messages there and no others. Each child lives long enough for its store
// to do everything it does in production (segments rolled, snapshots that
// move the replay floor, compaction, segments unlinked, releases checked);
// the test fails if over the run any of that never happened, or if a
// child's store saw a wrong release or an unreadable body.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	h := &crashHistory{sent: map[string]bool{}, attempted: map[string]bool{}, deleted: map[string]bool{}, maxCount: map[string]int{}}
	var total crashFigures
	checks, left := 0, 0
	for kill := 0; kill < *crashKills; kill++ {
		// The child's log goes on to ours; under -race its reports fail
		// the test (a killed child cannot fail it by its exit status).
		var stderr bytes.Buffer
		cmd, lines := startCrashChild(t, io.MultiWriter(os.Stderr, &stderr), "SLUICE_CRASH_CHILD="+dir, fmt.Sprintf("SLUICE_CRASH_RUN=k%d", kill))
		// The kill comes at a random moment once the child has
		// acknowledged a delete and its store has taken a snapshot,
		// unlinked a segment and relocated a message: every life holds all
		// the store's work, however slow the machine. stuck only bounds a
		// child that never gets there.
		var (
			deleted bool
			last    crashFigures
			timer   <-chan time.Time
			stuck   = time.After(time.Minute)
			killed  bool
		)
		ready := func() bool {
			return deleted && last.snapshots > 0 && last.segmentsRemoved > 0 && last.relocated > 0
		}
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if strings.HasPrefix(l, "T ") {
					f, ok := parseCrashFigures(l)
					if !ok {
						t.Fatalf("child %d: bad figures line %q", kill, l)
					}
					last = f
				} else {
					h.record(l)
					deleted = deleted || strings.HasPrefix(l, "D ")
				}
				if !killed && timer == nil && ready() {
					timer = time.After(time.Duration(250+rng.Intn(700)) * time.Millisecond)
				}
			case <-timer:
				cmd.Process.Kill()
				killed, timer = true, nil
			case <-stuck:
				t.Fatalf("child %d: in a minute, %v acknowledged delete, %d snapshots, %d segments removed, %d relocated; want each",
					kill, deleted, last.snapshots, last.segmentsRemoved, last.relocated)
			}
		}
		if err := cmd.Wait(); !killed {
			t.Fatalf("child %d ended by itself before its kill: %v", kill, err)
		}
		if bytes.Contains(stderr.Bytes(), []byte("WARNING: DATA RACE")) {
			t.Fatalf("child %d: data race (see its report above)", kill)
		}
		if last.badReleases != 0 || last.unreadable != 0 {
			t.Fatalf("child %d: %d bad releases, %d unreadable messages (see its log above)", kill, last.badReleases, last.unreadable)
		}
		total.snapshots += last.snapshots
		total.segmentsRemoved += last.segmentsRemoved
		total.relocated += last.relocated
		n, there := verifyCrashDir(t, dir, h)
		checks, left = checks+n, there
	}
	msg := fmt.Sprintf("crash test: %d kills, %d acknowledged sends, %d acknowledged deletes, %d messages with acknowledged receives, %d checks, %d messages left; in the children: %d snapshots, %d segments removed, %d messages relocated by compaction",
		*crashKills, len(h.sent), len(h.deleted), len(h.maxCount), checks, left, total.snapshots, total.segmentsRemoved, total.relocated)
	t.Log(msg)
	fmt.Println(msg)
	// A crash test whose children never move the floor, compact or unlink
	// cannot catch a body freed too early (it once ran like that for months).
	if total.snapshots == 0 || total.segmentsRemoved == 0 || total.relocated == 0 {
		t.Fatalf("the children's stores did not do all their work: %d snapshots, %d segments removed, %d relocated; want each above 0",
			total.snapshots, total.segmentsRemoved, total.relocated)
	}
}

// verifyCrashDir opens a copy of the data directory (so the check does not
// change the state the next child sees), checks the invariants, and
// returns the checks made and the messages there.
func verifyCrashDir(t *testing.T, dir string, h *crashHistory) (checks, there int) {
	t.Helper()
	cp := t.TempDir()
	copyCrashDir(t, dir, cp)
	// A clock far ahead makes every in-flight message visible again.
	cfg := crashConfig(cp)
	cfg.Clock = clock.NewFake(time.Now().Add(time.Hour))
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer b.Close()
	opened := b.StoreStats()
	if opened.Unreadable != 0 || opened.BadReleases != 0 {
		t.Fatalf("reopen after kill: %d unreadable messages, %d bad releases", opened.Unreadable, opened.BadReleases)
	}
	present := map[string]int{}
	for {
		ms, err := b.Receive(context.Background(), "crash", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(3600)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			id, _, _ := strings.Cut(m.Body, " ")
			if _, dup := present[id]; dup {
				t.Fatalf("message %q is there twice", id)
			}
			present[id] = m.ReceiveCount - 1 // this receive added one
		}
	}
	checks = 1
	if s := b.StoreStats(); opened.LiveMessages != int64(len(present)) || s.LiveMessages != opened.LiveMessages {
		t.Fatalf("the store keeps %d bodies after reopening (%d after receiving them all), the queue holds %d messages",
			opened.LiveMessages, s.LiveMessages, len(present))
	}
	for id := range h.sent {
		checks++
		if !h.attempted[id] {
			if _, ok := present[id]; !ok {
				t.Fatalf("acknowledged send %q lost", id)
			}
		}
	}
	for id := range h.deleted {
		checks++
		if _, ok := present[id]; ok {
			t.Fatalf("acknowledged delete of %q came back", id)
		}
	}
	for id, n := range h.maxCount {
		if c, ok := present[id]; ok {
			checks++
			if c < n {
				t.Fatalf("receive count of %q went back from %d to %d", id, n, c)
			}
		}
	}
	return checks, len(present)
}

// copyCrashDir copies the data directory's files (it has no
// subdirectories) from src to dst.
func copyCrashDir(t *testing.T, src, dst string) {
	t.Helper()
	names, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !n.Type().IsRegular() {
			t.Fatalf("data directory holds %s, not a regular file", n.Name())
		}
		if err := copyFile(filepath.Join(src, n.Name()), filepath.Join(dst, n.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
