package peers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitMQ drives quorum queues over AMQP 0-9-1: publisher confirms (a
// quorum queue confirms once a quorum of its members has written and
// fsynced the message; on one node, that node), consumers with a prefetch
// of Workload.InFlight and manual acknowledgements.
type RabbitMQ struct {
	// URL of the broker, e.g. amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// Prefix names the queues: Prefix-0, Prefix-1, … (default "sluice-bench").
	Prefix string
	// Server is the broker's Erlang VM (beam.smp) when it runs on this
	// machine, for its server CPU a message (0: not measured).
	Server ProcessCPU
}

func (r RabbitMQ) Name() string { return "rabbitmq" }

// CPUSeconds is the broker's server process's CPU time (see Server).
func (r RabbitMQ) CPUSeconds(ctx context.Context) (float64, bool) { return r.Server.CPUSeconds(ctx) }

func (r RabbitMQ) Durability() string {
	return "quorum queue: confirm after fsync on a quorum (1 node)"
}

func (r RabbitMQ) queue(i int) string {
	p := r.Prefix
	if p == "" {
		p = "sluice-bench"
	}
	return p + "-" + strconv.Itoa(i)
}

// rabbitDrain bounds the wait for confirms of messages in flight when a
// producer stops.
const rabbitDrain = 30 * time.Second

func (r RabbitMQ) Open(ctx context.Context, w Workload) (Session, error) {
	conn, err := amqp.Dial(r.URL)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	for i := range w.Queues {
		// A fresh queue each run: nothing left from an earlier one.
		if _, err := ch.QueueDelete(r.queue(i), false, false, false); err != nil {
			return nil, fmt.Errorf("delete queue %s: %w", r.queue(i), err)
		}
		if _, err := ch.QueueDeclare(r.queue(i), true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			return nil, fmt.Errorf("declare quorum queue %s: %w", r.queue(i), err)
		}
	}
	return &rabbitSession{r: r, w: w}, nil
}

type rabbitSession struct {
	r RabbitMQ
	w Workload
}

func (s *rabbitSession) Produce(ctx context.Context, queues []int, m *Meter) error {
	conn, err := amqp.Dial(s.r.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	// Confirms arrive in publish order (the client orders them), so the
	// times of the messages in flight are a FIFO; its capacity is the
	// in-flight limit.
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, s.w.InFlight))
	pending := make(chan time.Time, s.w.InFlight)
	stopped := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		stopping := false
		for !stopping || len(pending) > 0 {
			select {
			case c, ok := <-confirms:
				if !ok {
					return
				}
				t0 := <-pending
				if c.Ack {
					m.Acked(t0, 1)
				} else {
					m.Error(1)
				}
			case <-stopped:
				stopped, stopping = nil, true
			}
		}
	}()
	var perr error
publish:
	for k := 0; ctx.Err() == nil; k++ {
		if m.Pace(ctx, 1) != nil {
			break
		}
		select {
		case pending <- time.Now():
		case <-ctx.Done():
			break publish
		}
		err := ch.PublishWithContext(context.WithoutCancel(ctx), "", s.r.queue(queues[k%len(queues)]), false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream", Body: m.Body()})
		if err != nil {
			<-pending
			perr = err
			m.Error(1)
			break
		}
	}
	close(stopped)
	t := time.NewTimer(rabbitDrain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return perr
}

func (s *rabbitSession) Consume(ctx context.Context, queues []int, m *Meter) error {
	conn, err := amqp.Dial(s.r.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	// The prefetch applies to the channel's consumers together: this
	// consumer holds at most InFlight unacknowledged messages.
	if err := ch.Qos(s.w.InFlight, 0, false); err != nil {
		return err
	}
	merged := make(chan amqp.Delivery, s.w.InFlight)
	for _, q := range queues {
		ds, err := ch.ConsumeWithContext(ctx, s.r.queue(q), "", false, false, false, false, nil)
		if err != nil {
			return err
		}
		go func() {
			for d := range ds {
				select {
				case merged <- d:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case d := <-merged:
			m.Received(d.Body)
			if err := d.Ack(false); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				m.Error(1)
				return err
			}
			m.Settled(1)
		}
	}
}

func (s *rabbitSession) Close() error {
	conn, err := amqp.Dial(s.r.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	for i := range s.w.Queues {
		if _, err := ch.QueueDelete(s.r.queue(i), false, false, false); err != nil {
			return err
		}
	}
	return nil
}
