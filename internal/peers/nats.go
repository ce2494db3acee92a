package peers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/clock"
)

// NATS drives JetStream: one work-queue stream a queue (file storage, one
// replica, retention until acknowledged), asynchronous publishes with
// Workload.InFlight in flight per producer, and a shared durable pull
// consumer a stream with explicit acknowledgements. A publish is
// acknowledged once the server stored it; whether it was fsynced first is
// the server's `jetstream { sync_interval: always }` (scripts/peers.sh
// sets it; the default fsyncs every two minutes).
type NATS struct {
	// URL of the server, e.g. nats://127.0.0.1:4222.
	URL string
	// Prefix names the streams Prefix_0, … and their subjects
	// prefix.0, … (default "SLUICE_BENCH").
	Prefix string
	// Server is the nats-server process when it runs on this machine, for
	// its server CPU a message (0: not measured).
	Server ProcessCPU
}

func (n NATS) Name() string { return "nats" }

// CPUSeconds is the server process's CPU time (see Server).
func (n NATS) CPUSeconds(ctx context.Context) (float64, bool) { return n.Server.CPUSeconds(ctx) }

func (n NATS) Durability() string {
	return "JetStream file store, sync_interval always: fsync before ack"
}

func (n NATS) stream(i int) string {
	p := n.Prefix
	if p == "" {
		p = "SLUICE_BENCH"
	}
	return p + "_" + strconv.Itoa(i)
}

func (n NATS) subject(i int) string { return "sluicebench." + n.stream(i) }

// natsConsumer is the durable consumer every bench consumer shares.
const natsConsumer = "bench"

// natsTimeout bounds a publish's acknowledgement and the wait for those
// in flight when a producer stops.
const natsTimeout = 30 * time.Second

func (n NATS) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(n.URL, nats.Name("sluice-bench"))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func (n NATS) Open(ctx context.Context, w Workload) (Session, error) {
	nc, js, err := n.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	for i := range w.Queues {
		// A fresh stream each run: nothing left from an earlier one.
		if err := js.DeleteStream(ctx, n.stream(i)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("delete stream %s: %w", n.stream(i), err)
		}
		err := createStream(ctx, js, jetstream.StreamConfig{
			Name: n.stream(i), Subjects: []string{n.subject(i)},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: 1,
		})
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", n.stream(i), err)
		}
		_, err = js.CreateOrUpdateConsumer(ctx, n.stream(i), jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: max(1000, w.Consumers*w.InFlight*2),
		})
		if err != nil {
			return nil, fmt.Errorf("create consumer on %s: %w", n.stream(i), err)
		}
	}
	return &natsSession{n: n, w: w}, nil
}

// errStreamStoreFailed is nats-server's answer when a stream's store could
// not be made ("error creating store for stream", JSStreamCreateErrF).
const errStreamStoreFailed jetstream.ErrorCode = 10049

// createStream creates a stream, trying again for a while when the server
// could not make its store. nats-server removes an account's stream
// directory in the background once its last stream is deleted (as the run
// before's Close does), and a create in that moment fails to make its
// directory (v2.15.2: "could not create storage directory - mkdir
// .../streams: no such file or directory" in the server's log); the same
// create a moment later succeeds.
func createStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	const tries = 10
	for try := 1; ; try++ {
		_, err := js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		if err == nil || try == tries || !errors.As(err, &apiErr) || apiErr.ErrorCode != errStreamStoreFailed {
			return err
		}
		if !clock.Sleep(ctx, clock.Real{}, time.Duration(try)*20*time.Millisecond) {
			return err
		}
	}
}

type natsSession struct {
	n NATS
	w Workload
}

func (s *natsSession) Produce(ctx context.Context, queues []int, m *Meter) error {
	nc, err := nats.Connect(s.n.URL, nats.Name("sluice-bench"))
	if err != nil {
		return err
	}
	defer nc.Close()
	// The client's own pending limit is above ours, so that the
	// semaphore below, not a stall, is what holds a producer back.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(s.w.InFlight+1),
		jetstream.WithPublishAsyncTimeout(natsTimeout))
	if err != nil {
		return err
	}
	type pub struct {
		t0 time.Time
		f  jetstream.PubAckFuture
	}
	sem := make(chan struct{}, s.w.InFlight)
	pending := make(chan pub, s.w.InFlight)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range pending {
			select {
			case <-p.f.Ok():
				m.Acked(p.t0, 1)
			case <-p.f.Err():
				m.Error(1)
			}
			<-sem
		}
	}()
	var perr error
publish:
	for k := 0; ctx.Err() == nil; k++ {
		if m.Pace(ctx, 1) != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break publish
		}
		t0 := time.Now()
		f, err := js.PublishAsync(s.n.subject(queues[k%len(queues)]), m.Body())
		if err != nil {
			<-sem
			m.Error(1)
			perr = err
			break
		}
		pending <- pub{t0, f}
	}
	close(pending)
	<-done // each future ends by natsTimeout at the latest
	return perr
}

func (s *natsSession) Consume(ctx context.Context, queues []int, m *Meter) error {
	nc, js, err := s.n.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, q := range queues {
		c, err := js.Consumer(ctx, s.n.stream(q), natsConsumer)
		if err != nil {
			return err
		}
		cc, err := c.Consume(func(msg jetstream.Msg) {
			m.Received(msg.Data())
			if err := msg.Ack(); err != nil {
				m.Error(1)
				return
			}
			m.Settled(1)
		}, jetstream.PullMaxMessages(s.w.InFlight))
		if err != nil {
			return err
		}
		defer cc.Stop()
	}
	<-ctx.Done()
	return nil
}

func (s *natsSession) Close() error {
	nc, js, err := s.n.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range s.w.Queues {
		if err := js.DeleteStream(ctx, s.n.stream(i)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
	}
	return nil
}
