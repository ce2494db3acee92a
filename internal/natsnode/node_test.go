package natsnode_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
)

// waitTimeout bounds every wait for a condition: generous, because a
// loaded 2-core CI machine runs all packages' tests at once and a Raft
// election takes up to 9 s.
const waitTimeout = 30 * time.Second

// eventually polls cond until it returns nil or waitTimeout passes, then
// fails the test with cond's last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond) // the polling interval
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, waitTimeout, err)
		}
		<-tick.C
	}
}

func jetStream(t *testing.T, n *natsnode.Node) jetstream.JetStream {
	t.Helper()
	nc, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// appendFenced publishes body to subj expecting the stream's last sequence
// to be last, retrying (with the same fence and message id) while the
// stream has no leader, and returns the new sequence.
func appendFenced(t *testing.T, js jetstream.JetStream, subj, body string, last uint64) uint64 {
	t.Helper()
	var seq uint64
	eventually(t, "publish "+body, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ack, err := js.Publish(ctx, subj, []byte(body),
			jetstream.WithExpectLastSequence(last), jetstream.WithMsgID(body))
		if err != nil {
			return err
		}
		seq = ack.Sequence
		return nil
	})
	if seq != last+1 {
		t.Fatalf("publish %s: sequence %d, want %d", body, seq, last+1)
	}
	return seq
}

func TestClusterR3Stream(t *testing.T) {
	t.Parallel()
	nodes := natstest.Cluster(t, 3)
	for _, n := range nodes {
		if got := len(n.Peers()); got != 2 {
			t.Errorf("%s: %d peers connected, want 2: %+v", n.Name(), got, n.Peers())
		}
		if n.ClientURL() != "" {
			t.Errorf("%s: client URL %q without a client address", n.Name(), n.ClientURL())
		}
	}
	// Every node follows the same meta leader (within one heartbeat).
	eventually(t, "one meta leader", func() error {
		leader := nodes[0].MetaLeader()
		for _, n := range nodes {
			if got := n.MetaLeader(); got == "" || got != leader {
				return fmt.Errorf("%s says %q, %s says %q", n.Name(), got, nodes[0].Name(), leader)
			}
		}
		return nil
	})

	js := jetStream(t, nodes[1])
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wal", Subjects: []string{"wal.>"},
		Replicas: 3, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 10 {
		last = appendFenced(t, js, "wal.p0", fmt.Sprint("m", i), last)
	}
	// A stale fence is refused.
	if _, err := js.Publish(ctx, "wal.p0", []byte("stale"), jetstream.WithExpectLastSequence(5)); err == nil {
		t.Error("publish with a stale expected last sequence succeeded")
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 10 || len(info.Cluster.Replicas) != 2 {
		t.Errorf("stream: %d msgs, %d replicas besides the leader; want 10, 2", info.State.Msgs, len(info.Cluster.Replicas))
	}
}

// TestRestartRejoins closes a node and starts it again on the same store:
// it rejoins, catches up on what was written meanwhile, and serves.
func TestRestartRejoins(t *testing.T) {
	t.Parallel()
	nodes := natstest.Cluster(t, 3)
	js := jetStream(t, nodes[0])
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wal", Subjects: []string{"wal.>"},
		Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 5 {
		last = appendFenced(t, js, "wal.p0", fmt.Sprint("before", i), last)
	}

	victim := nodes[2]
	cfg := victim.Config()
	victim.Close()
	victim.Close() // idempotent
	if err := victim.Ready(ctx); !errors.Is(err, natsnode.ErrStopped) {
		t.Errorf("Ready after Close: %v, want ErrStopped", err)
	}
	for i := range 5 {
		last = appendFenced(t, js, "wal.p0", fmt.Sprint("during", i), last)
	}

	restarted, err := natsnode.Start(cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(restarted.Close)
	if err := restarted.Ready(ctx); err != nil {
		t.Fatalf("restarted node not ready: %v", err)
	}
	eventually(t, "peers reconnected", func() error {
		if p := restarted.Peers(); len(p) != 2 {
			return fmt.Errorf("peers %+v", p)
		}
		return nil
	})
	// Its replica catches up; then it serves reads and fenced writes.
	jsr := jetStream(t, restarted)
	eventually(t, "replica current", func() error {
		info, err := jsr.Stream(ctx, "wal")
		if err != nil {
			return err
		}
		ci := info.CachedInfo()
		if ci.State.LastSeq != last {
			return fmt.Errorf("last sequence %d, want %d", ci.State.LastSeq, last)
		}
		for _, r := range ci.Cluster.Replicas {
			if !r.Current {
				return fmt.Errorf("replica %s not current (lag %d)", r.Name, r.Lag)
			}
		}
		return nil
	})
	appendFenced(t, jsr, "wal.p0", "after", last)
}

func TestSingle(t *testing.T) {
	t.Parallel()
	n := natstest.Single(t)
	if got := n.MetaLeader(); got != n.Name() {
		t.Errorf("meta leader %q, want itself %q", got, n.Name())
	}
	if p := n.Peers(); len(p) != 0 {
		t.Errorf("peers %+v, want none", p)
	}
	js := jetStream(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wal", Subjects: []string{"wal.>"}}); err != nil {
		t.Fatal(err)
	}
	appendFenced(t, js, "wal.p0", "m0", 0)
	// A body of 1 MiB with room for attributes fits the default MaxPayload.
	big := make([]byte, 6<<20)
	if _, err := js.Publish(ctx, "wal.p0", big); err != nil {
		t.Errorf("publish 6 MiB: %v", err)
	}
}

// TestClientListener checks that a node with a client address serves
// clients in other processes that present its token, and only those: a
// client without a token, or with another one, is refused. In-process
// clients (Connect) present it themselves. The node logs at LevelTrace
// (each protocol message, CONNECT lines included): no line holds either
// token.
func TestClientListener(t *testing.T) {
	t.Parallel()
	token, wrong := "good-"+rand.Text(), "wrong-"+rand.Text()
	var log logBuffer
	n, err := natsnode.Start(natsnode.Config{Node: "n1", Dir: t.TempDir(), ClientAddr: "127.0.0.1:0",
		ClientToken: token, Logger: log.logger(natsnode.LevelTrace)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := n.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if n.ClientURL() == "" {
		t.Fatal("no client URL")
	}
	if want := "client_authenticated=true"; !strings.Contains(log.String(), want) {
		t.Errorf("the start line lacks %s:\n%s", want, log.String())
	}

	// The right token, over TCP: JetStream works.
	nc, err := nats.Connect(n.ClientURL(), nats.Token(token))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wal", Subjects: []string{"wal.>"}}); err != nil {
		t.Fatal(err)
	}
	appendFenced(t, js, "wal.p0", "m0", 0)
	// So does the in-process client, which presents it itself.
	appendFenced(t, jetStream(t, n), "wal.p0", "m1", 1)

	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"no token", nil},
		{"another token", []nats.Option{nats.Token(wrong)}},
	} {
		nc, err := nats.Connect(n.ClientURL(), tc.opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", tc.name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want %v", tc.name, err, nats.ErrAuthorization)
		}
		for _, s := range []string{token, wrong} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error %v quotes a token", tc.name, err)
			}
		}
	}
	n.Close() // the log is complete
	out := log.String()
	if !strings.Contains(out, "authentication error") {
		t.Errorf("the log has no refused client:\n%s", out)
	}
	for _, s := range []string{token, wrong} {
		if j := strings.Index(out, s); j >= 0 {
			t.Errorf("the log holds a token: %s", out[max(0, j-200):j+len(s)])
		}
	}
	// The trace lines were there to leak it: the CONNECT lines of the
	// clients were traced, with the token redacted.
	if !strings.Contains(out, `\"auth_token\":\"[REDACTED]\"`) {
		t.Errorf("the log has no trace of a client's CONNECT with its token redacted:\n%s", out)
	}
}
