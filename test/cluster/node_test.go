package cluster

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/test/process"
)

// Bounds on waiting for a node: none of it may hang a test run.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
)

// node is one member of the cluster: its name, data directory and
// addresses (the same across restarts), and its running process, one at
// a time.
type node struct {
	name      string // n1, n2, n3
	dir       string
	sqs       string // host:port of each listener
	admin     string
	route     string
	nats      string
	logPath   string
	args      []string
	env       []string        // added to the test's environment: the NATS token
	tr        *http.Transport // the test's connections to its admin address
	serving   atomic.Bool     // between a start that saw it serve and the next stop or kill
	downs     atomic.Int64    // stops and kills so far: a request that spans one met a node going down
	mu        sync.Mutex      // guards proc, owned, starts, pastFigs and pastTails
	proc      *process.Process
	owned     *partitions // what proc's log says it serves
	starts    int
	pastFigs  process.Figures // the stopped processes'
	pastTails []string        // the last lines of each stopped process
}

// start runs a new process for n and returns without waiting for it to
// serve (a new cluster elects its first JetStream leader only once every
// node runs: start all three, then wait).
func (n *node) start() (*process.Process, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return nil, fmt.Errorf("%s: start: a process is running", n.name)
	}
	n.starts++
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "---- start %d of %s at %s\n", n.starts, n.name, time.Now().Format(time.RFC3339Nano))
	owned := &partitions{owned: map[int]time.Time{}}
	p, err := process.Start(process.Config{Bin: bin, Args: n.args, Env: n.env, Log: f, Line: owned.line})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.name, err)
	}
	n.proc, n.owned = p, owned
	return p, nil
}

// awaitServing waits until p logs that it serves and its /healthz answers.
func (n *node) awaitServing(p *process.Process, timeout time.Duration) error {
	if _, err := p.AwaitServing(n.tr, timeout); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	n.serving.Store(true)
	return nil
}

// stop signals the running process and waits until it exited. A SIGTERM
// must end it cleanly (exit 0). It returns how long the process took to
// exit.
func (n *node) stop(how process.Stop) (time.Duration, error) {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return 0, fmt.Errorf("%s: stop: no process", n.name)
	}
	n.serving.Store(false)
	n.downs.Add(1)
	took, err := p.Stop(how, stopTimeout)
	if !p.Exited() {
		return 0, fmt.Errorf("%s: %w", n.name, err) // not signalled: it runs on
	}
	n.tr.CloseIdleConnections()
	n.mu.Lock()
	n.proc, n.owned = nil, nil
	n.pastFigs.Add(p.Figures())
	n.pastTails = append(n.pastTails, fmt.Sprintf("start %d, stopped by %v (%v):\n%s", n.starts, how, p.ExitErr(), p.Tail()))
	n.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%s: %w", n.name, err)
	}
	return took, err
}

// serves says whether the running process's log says it serves partition
// p (it claimed or acquired it, and has not given it up or lost it
// since), and since when.
func (n *node) serves(p int) (since time.Time, ok bool) {
	n.mu.Lock()
	owned := n.owned
	n.mu.Unlock()
	if owned != nil && n.serving.Load() {
		return owned.serves(p)
	}
	return time.Time{}, false
}

// startCount is how many processes the node started.
func (n *node) startCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// figures adds up the log figures of every process of the node so far.
func (n *node) figures() process.Figures {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.pastFigs
	f.Samples = slices.Clone(f.Samples)
	if n.proc != nil {
		f.Add(n.proc.Figures())
	}
	return f
}

// tails is the last lines of every process of the node, for a failure.
func (n *node) tails() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := slices.Clone(n.pastTails)
	if n.proc != nil {
		out = append(out, fmt.Sprintf("start %d, running:\n%s", n.starts, n.proc.Tail()))
	}
	return strings.Join(out, "\n")
}

// kill ends the running process, if any, for the test's cleanup.
func (n *node) kill() {
	n.mu.Lock()
	p := n.proc
	n.proc, n.owned = nil, nil
	n.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	n.tr.CloseIdleConnections()
}

// The lines of a node's log that say which partitions it serves
// (cluster.Manager's and the engine's Info and Warn lines; the catalog is
// partition 0).
var (
	servesLine = regexp.MustCompile(`msg="(claimed a new partition|acquired a queue's partition|` +
		`took a queue's partition over again after another writer fenced it)".* partition=(\d+)`)
	leavesLine = regexp.MustCompile(`msg="(stopped owning a queue's partition|another node took a partition over|` +
		`giving a partition up|forgot a partition: another node fenced its owner here|the host gave a partition up while acquiring it)".* partition=(\d+)`)
)

// partitions is what one process's log says it serves: each partition,
// and since when (the line's arrival).
type partitions struct {
	mu    sync.Mutex
	owned map[int]time.Time
}

// line takes a line of the process's log.
func (ps *partitions) line(line string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if m := servesLine.FindStringSubmatch(line); m != nil {
		p, _ := strconv.Atoi(m[2])
		ps.owned[p] = time.Now()
	} else if m := leavesLine.FindStringSubmatch(line); m != nil {
		p, _ := strconv.Atoi(m[2])
		delete(ps.owned, p)
	}
}

func (ps *partitions) serves(p int) (since time.Time, ok bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	since, ok = ps.owned[p]
	return since, ok
}

// logFile is where node name's log goes: under -cluster.log-dir, kept,
// or in dir.
func logFile(dir, test, name string) (string, error) {
	if *logDir == "" {
		return filepath.Join(dir, name+".log"), nil
	}
	d := filepath.Join(*logDir, strings.ReplaceAll(test, "/", "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(d, name+".log"), nil
}
