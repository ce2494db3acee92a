package peers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Workload is what every peer runs. Zero fields take the defaults below.
type Workload struct {
	// Producers is the number of concurrent publishers (default 8).
	Producers int `json:"producers"`
	// Consumers is the number of concurrent consumers (default 4).
	Consumers int `json:"consumers"`
	// InFlight is how many messages each producer keeps published but not
	// yet acknowledged by the broker, and how many each consumer holds
	// received but not yet acknowledged (default 32).
	InFlight int `json:"in_flight"`
	// Size is the message body in bytes (default 1024; at least 21, the
	// timestamp the body carries).
	Size int `json:"size_bytes"`
	// Queues spreads the same load over this many queues (default 1).
	Queues int `json:"queues"`
	// Duration is how long producers publish (default 10 s).
	Duration time.Duration `json:"-"`
	// Rate caps the producers' total rate in messages a second (0: as
	// fast as the broker acknowledges).
	Rate int `json:"rate,omitempty"`
	// Drain bounds the wait, after producers stop, for consumers to take
	// every message sent (default 30 s).
	Drain time.Duration `json:"-"`
}

// WithDefaults fills the zero fields.
func (w Workload) WithDefaults() Workload {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&w.Producers, 8)
	def(&w.Consumers, 4)
	def(&w.InFlight, 32)
	def(&w.Size, 1024)
	def(&w.Queues, 1)
	if w.Duration == 0 {
		w.Duration = 10 * time.Second
	}
	if w.Drain == 0 {
		w.Drain = 30 * time.Second
	}
	return w
}

// Validate says what is wrong with a workload after WithDefaults.
func (w Workload) Validate() error {
	switch {
	case w.Producers < 1 || w.Consumers < 1 || w.InFlight < 1 || w.Queues < 1:
		return errors.New("peers: producers, consumers, in-flight and queues must be at least 1")
	case w.Size < minSize:
		return fmt.Errorf("peers: message size %d below %d bytes (the body carries its send time)", w.Size, minSize)
	case w.Duration > time.Hour:
		return errors.New("peers: duration is capped at one hour")
	}
	return nil
}

// minSize holds a decimal Unix nanosecond time and its separator.
const minSize = 21

// Peer is a broker the workload runs against.
type Peer interface {
	// Name is the short name used on the command line and in results.
	Name() string
	// Durability says what the broker has done with a message when it
	// acknowledges it to the producer.
	Durability() string
	// Open connects and prepares w.Queues empty queues.
	Open(ctx context.Context, w Workload) (Session, error)
}

// Session is one run's connection to a peer.
type Session interface {
	// Produce publishes to queues in turn, keeping w.InFlight messages in
	// flight, until ctx is done; then it waits (bounded) for the
	// acknowledgements of those in flight and returns. It reports every
	// acknowledged message to m.Acked.
	Produce(ctx context.Context, queues []int, m *Meter) error
	// Consume receives from queues until ctx is done, reporting each
	// message's body to m.Received when it arrives and m.Settled once it
	// was acknowledged (deleted).
	Consume(ctx context.Context, queues []int, m *Meter) error
	// Close ends the session; it may delete the queues.
	Close() error
}

// Result is one run of a workload against one peer.
type Result struct {
	Peer       string `json:"peer"`
	Durability string `json:"durability"`
	Round      int    `json:"round"`
	Size       int    `json:"size_bytes"`
	Queues     int    `json:"queues"`
	// WindowS is how long producers published, in seconds.
	WindowS float64 `json:"window_seconds"`
	// DurationS includes the drain.
	DurationS float64 `json:"duration_seconds"`
	Sent      int64   `json:"sent"`
	Received  int64   `json:"received"`
	Errors    int64   `json:"errors"`
	// Rate is messages received and acknowledged by consumers while
	// producers were publishing, per second of that window: the figure
	// the tables and charts show.
	Rate float64 `json:"msgs_per_second"`
	// SendRate is messages acknowledged to producers in the window, per
	// second.
	SendRate float64 `json:"send_msgs_per_second"`
	// Latencies in milliseconds: p50, p90, p99, p999 and max. Send is
	// publish to the broker's acknowledgement; end to end is publish to
	// receipt by a consumer.
	SendLatencyMS map[string]float64 `json:"send_latency_ms"`
	E2ELatencyMS  map[string]float64 `json:"end_to_end_latency_ms"`
	// ReceiveLatencyMS, ReceiveCalls and EmptyReceives are for peers
	// whose consumers ask (Sluice); MsgsPerReceive is messages per
	// non-empty receive.
	ReceiveLatencyMS map[string]float64 `json:"receive_latency_ms,omitempty"`
	ReceiveCalls     int64              `json:"receive_calls,omitempty"`
	EmptyReceives    int64              `json:"empty_receives,omitempty"`
	MsgsPerReceive   float64            `json:"messages_per_receive,omitempty"`
	// Backlog is the messages acknowledged to producers in the window and
	// not yet through (received and deleted) at its end: how far the
	// consumers fell behind.
	Backlog int64 `json:"backlog_at_window_end"`
	// ServerCPUMicros is the server's CPU time per message through, in
	// microseconds, over the run with its drain (peers that report it,
	// a ServerCPU; 0 otherwise).
	ServerCPUMicros float64 `json:"server_cpu_us_per_message,omitempty"`
	// ClientCPUMicros is the load generator's CPU time per message
	// through, in microseconds, over the same span: this process's, so its
	// producers, consumers, client library and meters (0 where the
	// process's CPU time cannot be read). Every peer's clients run here, so
	// it compares what each broker's clients cost; with the server on the
	// same cores, client and server share them.
	ClientCPUMicros float64 `json:"client_cpu_us_per_message,omitempty"`
}

// ServerCPU is a peer that can tell its server process's CPU time so far.
type ServerCPU interface {
	// CPUSeconds is the server's user and system CPU time so far; ok is
	// false when it cannot be read.
	CPUSeconds(ctx context.Context) (secs float64, ok bool)
}

// Run runs w against p once.
func Run(ctx context.Context, p Peer, w Workload) (Result, error) {
	w = w.WithDefaults()
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	s, err := p.Open(ctx, w)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", p.Name(), err)
	}
	defer s.Close()
	m := newMeter(w)
	cpu, _ := p.(ServerCPU)
	var cpu0 float64
	cpuOK := false
	if cpu != nil {
		cpu0, cpuOK = cpu.CPUSeconds(ctx)
	}
	client0, clientOK := processCPU()
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		if err != nil {
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
		}
	}
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var cwg sync.WaitGroup
	for i := range w.Consumers {
		cwg.Go(func() { fail(s.Consume(cctx, consumerQueues(i, w.Consumers, w.Queues), m)) })
	}
	start := time.Now()
	pctx, stopProducers := context.WithDeadline(ctx, start.Add(w.Duration))
	defer stopProducers()
	var window time.Duration
	var sentInWindow, receivedInWindow int64
	windowDone := make(chan struct{})
	go func() {
		defer close(windowDone)
		<-pctx.Done()
		window = time.Since(start)
		sentInWindow, receivedInWindow = m.sent.Load(), m.settled.Load()
	}()
	var pwg sync.WaitGroup
	for i := range w.Producers {
		qs := make([]int, w.Queues)
		for j := range qs {
			qs[j] = (i + j) % w.Queues // each producer starts at a different queue
		}
		pwg.Go(func() { fail(s.Produce(pctx, qs, m)) })
	}
	pwg.Wait()
	<-windowDone
	// Drain: until consumers have taken everything acknowledged.
	drain := time.NewTimer(w.Drain)
	defer drain.Stop()
	select {
	case <-m.drainedAt(m.sent.Load()):
	case <-drain.C:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	stopConsumers()
	cwg.Wait()
	res := Result{
		Peer: p.Name(), Durability: p.Durability(), Size: w.Size, Queues: w.Queues,
		WindowS: window.Seconds(), DurationS: elapsed.Seconds(),
		Sent: m.sent.Load(), Received: m.settled.Load(), Errors: m.errs.Load(),
		Rate: float64(receivedInWindow) / window.Seconds(), SendRate: float64(sentInWindow) / window.Seconds(),
		SendLatencyMS: m.sendLat.percentiles(), E2ELatencyMS: m.e2e.percentiles(),
		ReceiveCalls: m.recvCalls.Load(), EmptyReceives: m.emptyRecvs.Load(),
		Backlog: max(0, sentInWindow-receivedInWindow),
	}
	if cpuOK {
		if cpu1, ok := cpu.CPUSeconds(ctx); ok && res.Received > 0 {
			res.ServerCPUMicros = (cpu1 - cpu0) * 1e6 / float64(res.Received)
		}
	}
	if client1, ok := processCPU(); ok && clientOK && res.Received > 0 {
		res.ClientCPUMicros = (client1 - client0) * 1e6 / float64(res.Received)
	}
	if m.recvLat.len() > 0 {
		res.ReceiveLatencyMS = m.recvLat.percentiles()
	}
	if n := res.ReceiveCalls - res.EmptyReceives; n > 0 {
		res.MsgsPerReceive = float64(res.Received) / float64(n)
	}
	if firstErr != nil && ctx.Err() == nil {
		return res, fmt.Errorf("%s: %w", p.Name(), firstErr)
	}
	return res, ctx.Err()
}

// consumerQueues deals the queues out to consumers: each queue has at
// least one consumer, each consumer at least one queue.
func consumerQueues(i, consumers, queues int) []int {
	if queues <= consumers {
		return []int{i % queues}
	}
	var qs []int
	for q := i; q < queues; q += consumers {
		qs = append(qs, q)
	}
	return qs
}

// Meter counts and times what producers and consumers report. Its
// methods are safe for concurrent use.
type Meter struct {
	size                  int
	pad                   []byte
	lim                   *rate.Limiter
	sent, settled, errs   atomic.Int64
	recvCalls, emptyRecvs atomic.Int64
	sendLat, e2e, recvLat latencies
	mu                    sync.Mutex
	target                int64
	drained               chan struct{}
}

func newMeter(w Workload) *Meter {
	m := &Meter{size: w.Size, pad: make([]byte, w.Size)}
	for i := range m.pad {
		m.pad[i] = 'x'
	}
	if w.Rate > 0 {
		m.lim = rate.NewLimiter(rate.Limit(w.Rate), max(10, w.Rate/100))
	}
	return m
}

// Body returns a new message body of the workload's size that carries its
// send time.
func (m *Meter) Body() []byte {
	b := make([]byte, m.size)
	copy(b, m.pad)
	n := len(strconv.AppendInt(b[:0], time.Now().UnixNano(), 10))
	b[n] = ':'
	return b
}

// BodyString is Body as a string.
func (m *Meter) BodyString() string {
	var b strings.Builder
	b.Grow(m.size)
	ts := strconv.FormatInt(time.Now().UnixNano(), 10)
	b.WriteString(ts)
	b.WriteByte(':')
	b.Write(m.pad[len(ts)+1:])
	return b.String()
}

// Pace waits for the workload's rate to allow n more messages.
func (m *Meter) Pace(ctx context.Context, n int) error {
	if m.lim == nil {
		return ctx.Err()
	}
	return m.lim.WaitN(ctx, min(n, m.lim.Burst()))
}

// Acked counts n messages the broker acknowledged, published at t0.
func (m *Meter) Acked(t0 time.Time, n int) {
	d := time.Since(t0)
	m.sendLat.add(d, n)
	m.sent.Add(int64(n))
}

// Error counts a failed publish, receive or acknowledgement.
func (m *Meter) Error(n int) { m.errs.Add(int64(n)) }

// ReceiveCall counts one receive request of a peer whose consumers ask
// for messages, and how long a non-empty one took.
func (m *Meter) ReceiveCall(n int, d time.Duration) {
	m.recvCalls.Add(1)
	if n == 0 {
		m.emptyRecvs.Add(1)
		return
	}
	m.recvLat.add(d, 1)
}

// Received records a message's end-to-end latency from its body.
func (m *Meter) Received(body []byte) { m.received(sentAt(body)) }

// ReceivedString is Received for a body held as a string.
func (m *Meter) ReceivedString(body string) { m.received(sentAt(body)) }

func (m *Meter) received(t time.Time, ok bool) {
	if ok {
		m.e2e.add(time.Since(t), 1)
	}
}

// sentAt reads the send time a body starts with.
func sentAt[B string | []byte](body B) (time.Time, bool) {
	var ns int64
	for i := 0; i < len(body) && i < minSize; i++ {
		c := body[i]
		if c == ':' && i > 0 {
			return time.Unix(0, ns), true
		}
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		ns = ns*10 + int64(c-'0')
	}
	return time.Time{}, false
}

// Settled counts n messages a consumer acknowledged (deleted).
func (m *Meter) Settled(n int) {
	v := m.settled.Add(int64(n))
	m.mu.Lock()
	if m.drained != nil && v >= m.target {
		close(m.drained)
		m.drained = nil
	}
	m.mu.Unlock()
}

// drainedAt returns a channel closed once target messages were settled.
func (m *Meter) drainedAt(target int64) <-chan struct{} {
	ch := make(chan struct{})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settled.Load() >= target {
		close(ch)
		return ch
	}
	m.target, m.drained = target, ch
	return ch
}

// latencies collects durations; percentiles sorts them once at the end.
type latencies struct {
	mu sync.Mutex
	v  []time.Duration
}

func (l *latencies) add(d time.Duration, n int) {
	l.mu.Lock()
	for range n {
		l.v = append(l.v, d)
	}
	l.mu.Unlock()
}

func (l *latencies) len() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.v) }

// PercentileKeys are the keys of the latency maps, in order (with "max").
func PercentileKeys() []string { return []string{"p50", "p90", "p99", "p999"} }

func (l *latencies) percentiles() map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	if len(l.v) == 0 {
		return out
	}
	slices.Sort(l.v)
	keys := PercentileKeys()
	for i, p := range []float64{50, 90, 99, 99.9} {
		k := int(float64(len(l.v)-1) * p / 100)
		out[keys[i]] = float64(l.v[k].Microseconds()) / 1000
	}
	out["max"] = float64(l.v[len(l.v)-1].Microseconds()) / 1000
	return out
}
