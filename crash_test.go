package sluice_test

import (
	"bufio"
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

	"github.com/sluicemq/sluice"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var crashKills = flag.Int("crash.kills", 5, "SIGKILLs in TestCrashRecovery (the full run uses 50)")

func TestMain(m *testing.M) {
	if dir := os.Getenv("SLUICE_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m) // fails the tests if any goroutine outlives them

}

// crashChild runs a broker under concurrent load and prints one line per
// acknowledged operation: "S body", "R body count", "D body". It runs until
// it is killed.
func crashChild(dir string) {
	b, err := sluice.Open(sluice.Config{Dir: dir, CheckpointBytes: 256 << 10, SegmentBytes: 64 << 10, CompactInterval: 10 * time.Millisecond})
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
	emit := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	run := os.Getenv("SLUICE_CRASH_RUN")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf("%s-%d-%d", run, g, i)
				if _, err := b.Send(ctx, "crash", st.SendInput{Body: body}); err == nil {
					emit("S %s", body)
				}
				ms, err := b.Receive(ctx, "crash", st.ReceiveInput{MaxMessages: 10})
				if err != nil {
					continue
				}
				for j, m := range ms {
					emit("R %s %d", m.Body, m.ReceiveCount)
					if j%2 == 0 {
						// Announce the attempt: a delete may be durable even
						// when the kill comes before its answer.
						emit("X %s", m.Body)
						if err := b.Delete(ctx, "crash", m.ReceiptHandle); err == nil {
							emit("D %s", m.Body)
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestCrashRecovery kills a broker under load with SIGKILL at random
// moments and checks the invariants after every restart: each acknowledged
// send is present unless its delete was acknowledged, no acknowledged
// delete comes back, and receive counts never go back below an
// acknowledged receive.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	sent := map[string]bool{}
	deleted := map[string]bool{}
	attempted := map[string]bool{}
	maxCount := map[string]int{}
	checks := 0
	for kill := 0; kill < *crashKills; kill++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SLUICE_CRASH_CHILD="+dir, fmt.Sprintf("SLUICE_CRASH_RUN=k%d", kill))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
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
		// Wait for the child to get going, then kill it at a random moment.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("child %d produced nothing", kill)
		}
		timer := time.After(time.Duration(50+rng.Intn(400)) * time.Millisecond)
		record := func(l string) {
			f := strings.Fields(l)
			if len(f) < 2 {
				return
			}
			switch f[0] {
			case "S":
				sent[f[1]] = true
			case "D":
				deleted[f[1]] = true
			case "X":
				attempted[f[1]] = true
			case "R":
				if len(f) == 3 {
					n, _ := strconv.Atoi(f[2])
					if n > maxCount[f[1]] {
						maxCount[f[1]] = n
					}
				}
			}
		}
		record(first)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				record(l)
			case <-timer:
				cmd.Process.Kill()
				timer = nil
			}
		}
		cmd.Wait()
		checks += verifyCrashDir(t, dir, sent, deleted, attempted, maxCount)
	}
	t.Logf("crash test: %d kills, %d acknowledged sends, %d acknowledged deletes, %d messages with acknowledged receives, %d checks",
		*crashKills, len(sent), len(deleted), len(maxCount), checks)
	fmt.Printf("crash test: %d kills, %d acknowledged sends, %d acknowledged deletes, %d messages with acknowledged receives, %d checks\n",
		*crashKills, len(sent), len(deleted), len(maxCount), checks)
}

// verifyCrashDir opens a copy of the data directory (so the check does not
// change the state the next child sees) and checks the invariants.
func verifyCrashDir(t *testing.T, dir string, sent, deleted, attempted map[string]bool, maxCount map[string]int) int {
	t.Helper()
	cp := t.TempDir()
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		src, _ := os.Open(filepath.Join(dir, n.Name()))
		dst, _ := os.Create(filepath.Join(cp, n.Name()))
		io.Copy(dst, src)
		src.Close()
		dst.Close()
	}
	// A clock far ahead makes every in-flight message visible again.
	clk := clock.NewFake(time.Now().Add(time.Hour))
	b, err := sluice.Open(sluice.Config{Dir: cp, Clock: clk})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer b.Close()
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
			present[m.Body] = m.ReceiveCount - 1 // this receive added one
		}
	}
	checks := 0
	for body := range sent {
		checks++
		if !attempted[body] {
			if _, ok := present[body]; !ok {
				t.Fatalf("acknowledged send %q lost", body)
			}
		}
	}
	for body := range deleted {
		checks++
		if _, ok := present[body]; ok {
			t.Fatalf("acknowledged delete of %q came back", body)
		}
	}
	for body, n := range maxCount {
		if c, ok := present[body]; ok {
			checks++
			if c < n {
				t.Fatalf("receive count of %q went back from %d to %d", body, n, c)
			}
		}
	}
	return checks
}
