package broker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

var topicCrashKills = flag.Int("tcrash.kills", 4, "SIGKILLs in TestTopicCrash")

// topicCrashChild publishes to a topic under load until it is killed: a
// topic "t" with an enveloped subscription of queue "all" and a raw one
// of queue "red" filtered on color red. It prints "P id color" for each
// acknowledged publish, and "T" with the store's snapshots (renewed every
// crashSnapshotEvery, so the topic is trimmed and its log purged).
func topicCrashChild(dir string) {
	b, err := broker.Open(crashConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if len(b.Topics()) == 0 {
		for _, q := range []string{"all", "red"} {
			if _, err := b.CreateQueue(ctx, q, nil, nil); err != nil {
				fmt.Fprintln(os.Stderr, "create:", err)
				os.Exit(2)
			}
		}
		const arn = "arn:aws:sqs:us-east-1:000000000000:"
		info := broker.TopicInfo{Name: "t", Subs: map[string]broker.Subscription{
			"all": {Protocol: "sqs", Endpoint: arn + "all"},
			"red": {Protocol: "sqs", Endpoint: arn + "red", Attrs: map[string]string{"RawMessageDelivery": "true", "FilterPolicy": `{"color":["red"]}`}},
		}}
		if _, _, err := b.CreateTopic(ctx, info); err != nil {
			fmt.Fprintln(os.Stderr, "create topic:", err)
			os.Exit(2)
		}
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
	go func() {
		for range time.Tick(crashSnapshotEvery) {
			if err := b.Snapshot(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "snapshot:", err)
				os.Exit(2)
			}
			emit(fmt.Sprintf("T snapshots=%d", b.StoreStats().Snapshots))
		}
	}()
	run := os.Getenv("SLUICE_CRASH_RUN")
	pad := strings.Repeat("y", 1500)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(time.Now().UnixNano() + int64(g)))
			for next := 0; ; {
				n := 1 + rng.Intn(10)
				in := make([]broker.PublishInput, n)
				lines := make([]string, n)
				for k := range in {
					id := fmt.Sprintf("%s-%d-%d", run, g, next)
					next++
					color := []string{"red", "blue"}[rng.Intn(2)]
					in[k] = broker.PublishInput{ID: id, Message: id + " " + pad[:rng.Intn(len(pad))],
						Attrs: map[string]st.AttributeValue{"color": {DataType: "String", StringValue: &color}}}
					lines[k] = "P " + id + " " + color
				}
				if _, err := b.Publish(ctx, "t", in); err == nil {
					emit(lines...)
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestTopicCrash kills a broker publishing to a topic with SIGKILL at
// random moments, and restarts it on its data. At the end every
// acknowledged publish must be in every queue whose subscription admits
// it, once (a delivery resumed after a kill must not take one twice),
// and nothing else must be there but publishes under way at a kill.
func TestTopicCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[string]string{} // publish id -> color
	snapshots := 0
	for kill := 0; kill < *topicCrashKills; kill++ {
		cmd, lines := startCrashChild(t, os.Stderr, "SLUICE_TOPIC_CRASH_CHILD="+dir, fmt.Sprintf("SLUICE_CRASH_RUN=k%d", kill))
		// The kill comes at a random moment after the child published and
		// snapshotted a few times.
		var timer <-chan time.Time
		stuck := time.After(time.Minute)
		lifeSnaps, published := 0, 0
		killed := false
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				switch f := strings.Fields(l); {
				case len(f) == 3 && f[0] == "P":
					acked[f[1]] = f[2]
					published++
				case len(f) == 2 && f[0] == "T":
					lifeSnaps++
				}
				if timer == nil && lifeSnaps >= 3 && published >= 100 {
					timer = time.After(time.Duration(rng.Intn(300)) * time.Millisecond)
				}
			case <-timer:
				cmd.Process.Kill()
				killed, timer = true, nil
			case <-stuck:
				t.Fatalf("kill %d: the child did not publish and snapshot (%d publishes, %d snapshots)", kill, published, lifeSnaps)
			}
		}
		err := cmd.Wait()
		if !killed {
			t.Fatalf("kill %d: the child ended by itself (%v) after %d publishes and %d snapshots", kill, err, published, lifeSnaps)
		}
		snapshots += lifeSnaps
	}
	b, err := broker.Open(crashConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := map[string]int{"all": 0, "red": 0}
	for _, color := range acked {
		want["all"]++
		if color == "red" {
			want["red"]++
		}
	}
	for _, q := range []string{"all", "red"} {
		got := map[string]int{}
		extra := 0
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for matched := 0; matched < want[q] && ctx.Err() == nil; {
			wait := 2
			ms, err := b.Receive(ctx, q, st.ReceiveInput{MaxMessages: 10, WaitTimeSeconds: &wait})
			if err != nil && ctx.Err() == nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				body := m.Body
				if q == "all" {
					var env struct{ Message string }
					if err := json.Unmarshal([]byte(m.Body), &env); err != nil {
						t.Fatalf("all: not an envelope: %.60q", m.Body)
					}
					body = env.Message
				}
				id, _, _ := strings.Cut(body, " ")
				if got[id]++; got[id] > 1 {
					t.Fatalf("%s: publish %s delivered twice", q, id)
				}
				color, ok := acked[id]
				switch {
				case !ok:
					extra++ // under way at a kill: it may or may not have been taken
				case q == "red" && color != "red":
					t.Fatalf("red: publish %s is %s", id, color)
				default:
					matched++
				}
				if err := b.Delete(context.Background(), q, m.ReceiptHandle); err != nil {
					t.Fatal(err)
				}
			}
		}
		cancel()
		missing := 0
		for id, color := range acked {
			if (q == "all" || color == "red") && got[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("%s: %d acknowledged publishes of %d missing", q, missing, want[q])
		}
		t.Logf("%s: %d publishes delivered once each (and %d under way at a kill)", q, want[q], extra)
	}
	t.Logf("topic crash test: %d kills, %d acknowledged publishes, %d snapshots in the children", *topicCrashKills, len(acked), snapshots)
}
