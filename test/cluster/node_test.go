package cluster

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stopMode is how a node is stopped.
type stopMode int

const (
	sigterm stopMode = iota // graceful: it hands its queues over, then exits 0
	sigkill                 // kill -9
)

func (m stopMode) String() string {
	if m == sigkill {
		return "SIGKILL"
	}
	return "SIGTERM"
}

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
	mu        sync.Mutex      // guards proc, starts, pastFigs and pastTails
	proc      *process
	starts    int
	pastFigs  logFigures // the stopped processes'
	pastTails []string   // the last lines of each stopped process
}

// process is one running `sluice serve`.
type process struct {
	cmd     *exec.Cmd
	log     *nodeLog
	exited  chan struct{} // closed once Wait returned
	waitErr error         // Wait's result, once exited is closed
}

// start runs a new process for n and returns without waiting for it to
// serve (a new cluster elects its first JetStream leader only once every
// node runs: start all three, then wait).
func (n *node) start() (*process, error) {
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
	log := newNodeLog(f)
	cmd := exec.Command(bin, n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		log.close()
		close(p.exited)
	}()
	n.proc = p
	return p, nil
}

// awaitServing waits until p logs that it serves and its /healthz answers.
func (n *node) awaitServing(p *process, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-p.log.serving:
	case <-p.exited:
		return fmt.Errorf("%s: sluice serve exited before serving (%v)", n.name, p.waitErr)
	case <-deadline.C:
		return fmt.Errorf("%s: sluice serve did not serve within %v", n.name, timeout)
	}
	// It logs that it serves once its listeners are open: a connection is
	// taken (at worst queued until its accept loop runs) and answered.
	hc := &http.Client{Transport: n.tr, Timeout: 30 * time.Second}
	resp, err := hc.Get("http://" + n.admin + "/healthz")
	if err != nil {
		return fmt.Errorf("%s: /healthz: %v", n.name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: /healthz answered %s", n.name, resp.Status)
	}
	n.serving.Store(true)
	return nil
}

// stop signals the running process and waits until it exited. A SIGTERM
// must end it cleanly (exit 0). It returns how long the process took to
// exit.
func (n *node) stop(how stopMode) (time.Duration, error) {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return 0, fmt.Errorf("%s: stop: no process", n.name)
	}
	n.serving.Store(false)
	n.downs.Add(1)
	sig := syscall.SIGTERM
	if how == sigkill {
		sig = syscall.SIGKILL
	}
	begin := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return 0, fmt.Errorf("%s: %v: %v", n.name, how, err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-p.exited:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
		err = fmt.Errorf("%s: sluice serve did not stop within %v of %v", n.name, stopTimeout, how)
	}
	took := time.Since(begin)
	n.tr.CloseIdleConnections()
	n.mu.Lock()
	n.proc = nil
	n.pastFigs.add(p.log.figures())
	n.pastTails = append(n.pastTails, fmt.Sprintf("start %d, stopped by %v (%v):\n%s", n.starts, how, p.waitErr, p.log.tail()))
	n.mu.Unlock()
	if err == nil && how == sigterm && p.waitErr != nil {
		err = fmt.Errorf("%s: sluice serve exited with %v after SIGTERM", n.name, p.waitErr)
	}
	return took, err
}

// running is the node's process, nil between a stop and the next start.
func (n *node) running() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// serves says whether the running process's log says it serves partition
// p (it claimed or acquired it, and has not given it up or lost it
// since), and since when.
func (n *node) serves(p int) (since time.Time, ok bool) {
	if proc := n.running(); proc != nil && n.serving.Load() {
		return proc.log.serves(p)
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
func (n *node) figures() logFigures {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.pastFigs
	if n.proc != nil {
		f.add(n.proc.log.figures())
	}
	return f
}

// tails is the last lines of every process of the node, for a failure.
func (n *node) tails() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := slices.Clone(n.pastTails)
	if n.proc != nil {
		out = append(out, fmt.Sprintf("start %d, running:\n%s", n.starts, n.proc.log.tail()))
	}
	return strings.Join(out, "\n")
}

// kill ends the running process, if any, for the test's cleanup.
func (n *node) kill() {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p != nil {
		p.cmd.Process.Kill()
		<-p.exited
	}
	n.tr.CloseIdleConnections()
}

// logFigures is what a node's log says about its health.
type logFigures struct {
	errors, warns int
	samples       []string // the first few ERROR lines
}

func (f *logFigures) add(g logFigures) {
	f.errors += g.errors
	f.warns += g.warns
	f.samples = append(f.samples, g.samples[:min(len(g.samples), max(0, 5-len(f.samples)))]...)
}

// The lines of a node's log the test reads: that it serves, and which
// partitions it serves (cluster.Manager's and the engine's Info and Warn
// lines; the catalog is partition 0).
var (
	servingLine = regexp.MustCompile(`msg="sluice serving"`)
	servesLine  = regexp.MustCompile(`msg="(claimed a new partition|acquired a queue's partition|` +
		`took a queue's partition over again after another writer fenced it)".* partition=(\d+)`)
	leavesLine = regexp.MustCompile(`msg="(stopped owning a queue's partition|another node took a partition over|` +
		`giving a partition up|forgot a partition: another node fenced its owner here|the host gave a partition up while acquiring it)".* partition=(\d+)`)
)

// tailLines is how many of a process's last lines a failure shows.
const tailLines = 60

// nodeLog takes a process's output line by line: it writes it to the
// node's log file, notes that the node serves and which partitions it
// serves, counts warnings and errors, and keeps the last lines.
type nodeLog struct {
	serving chan struct{} // closed at the "sluice serving" line

	mu      sync.Mutex
	file    *os.File // nil once closed
	partial []byte
	last    []string
	owned   map[int]time.Time // partitions it serves, and since when (the line's arrival)
	figs    logFigures
	said    bool // serving is closed
}

func newNodeLog(f *os.File) *nodeLog {
	return &nodeLog{serving: make(chan struct{}), file: f, owned: map[int]time.Time{}}
}

func (l *nodeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lineLocked(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// Route connections come and go by the dozen at every start: they would
// crowd out of a tail everything else.
func noise(line string) bool {
	return strings.Contains(line, "Route connection created") || strings.Contains(line, "Router connection closed")
}

func (l *nodeLog) lineLocked(line string) {
	if !noise(line) {
		if len(l.last) == tailLines {
			l.last = l.last[1:]
		}
		l.last = append(l.last, line)
	}
	if !l.said && servingLine.MatchString(line) {
		l.said = true
		close(l.serving)
	}
	if m := servesLine.FindStringSubmatch(line); m != nil {
		p, _ := strconv.Atoi(m[2])
		l.owned[p] = time.Now()
	} else if m := leavesLine.FindStringSubmatch(line); m != nil {
		p, _ := strconv.Atoi(m[2])
		delete(l.owned, p)
	}
	switch {
	case strings.Contains(line, "level=ERROR"):
		l.figs.errors++
		if len(l.figs.samples) < 5 {
			l.figs.samples = append(l.figs.samples, line)
		}
	case strings.Contains(line, "level=WARN"):
		l.figs.warns++
	}
}

func (l *nodeLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

func (l *nodeLog) serves(p int) (since time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	since, ok = l.owned[p]
	return since, ok
}

func (l *nodeLog) figures() logFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.figs
	f.samples = slices.Clone(f.samples)
	return f
}

func (l *nodeLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n")
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
