package peers

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// SQS is the little of the SQS API the Sluice peer uses. Package loadgen
// supplies it: a lean JSON 1.0 client over its own keep-alive connections,
// or the AWS SDK.
type SQS interface {
	// CreateQueue creates the queue (or finds it) and returns its URL.
	CreateQueue(ctx context.Context, name string, attrs map[string]string) (string, error)
	DeleteQueue(ctx context.Context, url string) error
	// SendBatch sends bodies (with a MessageGroupId each when groups is
	// not nil) and says how many were sent and how many failed.
	SendBatch(ctx context.Context, url string, bodies, groups []string) (sent, failed int, err error)
	Receive(ctx context.Context, url string, max int) ([]SQSMessage, error)
	DeleteBatch(ctx context.Context, url string, handles []string) error
}

// SQSMessage is a received message as the bench needs it.
type SQSMessage struct{ Body, Handle string }

// Sluice drives Sluice (or any SQS) over API. A send's response comes once
// its records are durable: with the server's default sync=always, after
// the log's fsync. Each producer and each consumer keeps about
// Workload.InFlight messages in flight as InFlight/Batch calls of Batch
// messages at once (at least one).
type Sluice struct {
	API SQS
	// Batch is messages per send, receive and delete call, 1-10 (default
	// 10), fewer when the message size would pass the batch limit (1 MiB).
	Batch int
	// Tenants is the number of distinct MessageGroupId values (0 or 1:
	// none).
	Tenants int
	// Queue prefixes the names of the run's queues, Queue-<run>-0, …
	// (default "bench"): each run creates its own and deletes them at the
	// end, since SQS refuses a second purge within 60 s and a run that
	// could not drain would leave its backlog to the next.
	Queue string
	// Metrics, when set, is the server's Prometheus endpoint (its admin
	// address's /metrics): the run reads the server's CPU time there
	// (process_cpu_seconds_total) for its CPU per message.
	Metrics string
}

func (s Sluice) Name() string { return "sluice" }

// CPUSeconds reads process_cpu_seconds_total at s.Metrics.
func (s Sluice) CPUSeconds(ctx context.Context) (float64, bool) {
	if s.Metrics == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Metrics, nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func (s Sluice) Durability() string { return "fsync before answer (sync=always)" }

// SluiceCluster drives a Sluice cluster (docs/cluster.md) as Sluice drives
// one server: the same queues, batches and tenants, with API spreading the
// calls over every node (a Spread of one client a node), as a load
// balancer in front of the nodes would. Each queue has one owner, so most
// calls reach a node that forwards them to the owner. A send is answered
// once its records are in the queue's R3 JetStream stream, which with
// sync always means fsynced on two of the three nodes.
type SluiceCluster struct{ Sluice }

func (SluiceCluster) Name() string { return "sluice-cluster" }

func (SluiceCluster) Durability() string {
	return "R3 JetStream, sync always: answered after the replicated write"
}

// Spread is an SQS that sends each call to the next of several clients in
// turn, one a node of a cluster. A queue URL works on every node (a node
// resolves the queue from the URL's path, not its host), so the URL
// CreateQueue returned goes unchanged to whichever node gets the call.
type Spread struct {
	apis []SQS
	next atomic.Uint64
}

// NewSpread returns a Spread over apis (at least one).
func NewSpread(apis ...SQS) *Spread {
	if len(apis) == 0 {
		panic("peers: NewSpread needs at least one client")
	}
	return &Spread{apis: apis}
}

// pick returns the client the next call goes to.
func (s *Spread) pick() SQS { return s.apis[(s.next.Add(1)-1)%uint64(len(s.apis))] }

func (s *Spread) CreateQueue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	return s.pick().CreateQueue(ctx, name, attrs)
}

func (s *Spread) DeleteQueue(ctx context.Context, url string) error {
	return s.pick().DeleteQueue(ctx, url)
}

func (s *Spread) SendBatch(ctx context.Context, url string, bodies, groups []string) (int, int, error) {
	return s.pick().SendBatch(ctx, url, bodies, groups)
}

func (s *Spread) Receive(ctx context.Context, url string, max int) ([]SQSMessage, error) {
	return s.pick().Receive(ctx, url, max)
}

func (s *Spread) DeleteBatch(ctx context.Context, url string, handles []string) error {
	return s.pick().DeleteBatch(ctx, url, handles)
}

// maxBatchBytes is the SQS limit on a send batch's total size.
const maxBatchBytes = 1 << 20

// sqsDefaultMaxSize is Amazon SQS's long-standing MaximumMessageSize
// default; Sluice allows up to 1 MiB (internal/attr), and the Sluice peer
// asks for it when the messages are larger.
const sqsDefaultMaxSize = 256 << 10

func (s Sluice) Open(ctx context.Context, w Workload) (Session, error) {
	name := s.Queue
	if name == "" {
		name = "bench"
	}
	// A short visibility timeout: a batch whose response is lost comes
	// back within the drain.
	attrs := map[string]string{"VisibilityTimeout": "5"}
	if w.Size > sqsDefaultMaxSize {
		attrs["MaximumMessageSize"] = strconv.Itoa(maxBatchBytes)
	}
	ss := &sluiceSession{s: s, w: w, batch: s.Batch}
	if ss.batch <= 0 || ss.batch > 10 {
		ss.batch = 10
	}
	ss.batch = max(1, min(ss.batch, maxBatchBytes/w.Size))
	run := strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	for i := range w.Queues {
		url, err := s.API.CreateQueue(ctx, name+"-"+run+"-"+strconv.Itoa(i), attrs)
		if err != nil {
			ss.Close()
			return nil, err
		}
		ss.urls = append(ss.urls, url)
	}
	return ss, nil
}

type sluiceSession struct {
	s     Sluice
	w     Workload
	batch int
	urls  []string
}

// sluiceCallTimeout bounds one call; calls in flight when the producers'
// window ends are finished, not cut short, so what they sent is counted.
const sluiceCallTimeout = 30 * time.Second

func (s *sluiceSession) calls() int { return max(1, s.w.InFlight/s.batch) }

func (s *sluiceSession) Produce(ctx context.Context, queues []int, m *Meter) error {
	done := make(chan struct{}, s.calls())
	for c := range s.calls() {
		go func() {
			defer func() { done <- struct{}{} }()
			n := 0
			for k := c; ctx.Err() == nil; k++ {
				if m.Pace(ctx, s.batch) != nil {
					return
				}
				bodies := make([]string, s.batch)
				var groups []string
				if s.s.Tenants > 1 {
					groups = make([]string, s.batch)
				}
				for i := range bodies {
					bodies[i] = m.BodyString()
					if groups != nil {
						n++
						groups[i] = "t" + strconv.Itoa((c*7919+n)%s.s.Tenants)
					}
				}
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sluiceCallTimeout)
				t0 := time.Now()
				ok, failed, err := s.s.API.SendBatch(cctx, s.urls[queues[k%len(queues)]], bodies, groups)
				cancel()
				if err != nil {
					m.Error(1)
					continue
				}
				m.Acked(t0, ok)
				m.Error(failed)
			}
		}()
	}
	for range s.calls() {
		<-done
	}
	return nil
}

func (s *sluiceSession) Consume(ctx context.Context, queues []int, m *Meter) error {
	done := make(chan struct{}, s.calls())
	for c := range s.calls() {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := c; ctx.Err() == nil; k++ {
				url := s.urls[queues[k%len(queues)]]
				t0 := time.Now()
				msgs, err := s.s.API.Receive(ctx, url, s.batch)
				if err != nil {
					if ctx.Err() == nil {
						m.Error(1)
					}
					continue
				}
				m.ReceiveCall(len(msgs), time.Since(t0))
				if len(msgs) == 0 {
					continue
				}
				handles := make([]string, len(msgs))
				for i, msg := range msgs {
					m.ReceivedString(msg.Body)
					handles[i] = msg.Handle
				}
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sluiceCallTimeout)
				err = s.s.API.DeleteBatch(cctx, url, handles)
				cancel()
				if err != nil {
					m.Error(1)
					continue
				}
				m.Settled(len(msgs))
			}
		}()
	}
	for range s.calls() {
		<-done
	}
	return nil
}

func (s *sluiceSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), sluiceCallTimeout)
	defer cancel()
	var first error
	for _, u := range s.urls {
		if err := s.s.API.DeleteQueue(ctx, u); err != nil && first == nil {
			first = err
		}
	}
	return first
}
