// Package process runs one `sluice serve` for a black-box test: the child
// process, its output read line by line (when it serves and where, its
// ERROR and WARN lines, its last lines for a failure message), and its
// end, by SIGTERM, which must end it cleanly, or by SIGKILL.
//
// What outlives one process (a data directory, fixed addresses, figures
// added up over restarts) is the test's: it starts a new Process over
// them each time.
package process

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Stop is how a process is stopped.
type Stop int

const (
	Term Stop = iota // SIGTERM: graceful; it must exit 0
	Kill             // SIGKILL: kill -9, wherever it is
)

func (s Stop) String() string {
	if s == Kill {
		return "SIGKILL"
	}
	return "SIGTERM"
}

func (s Stop) signal() syscall.Signal {
	if s == Kill {
		return syscall.SIGKILL
	}
	return syscall.SIGTERM
}

// Config is what to run.
type Config struct {
	// Bin is the sluice binary (testkit.Main builds it). Required.
	Bin string
	// Args are its arguments: "serve" and its flags.
	Args []string
	// Env is added to the test's environment. Default: none.
	Env []string
	// Log takes a copy of the output, and is closed once the process
	// exited (or when Start fails). Default nil: no copy.
	Log io.WriteCloser
	// Line is called with each line of the output, in order, one at a
	// time, from the goroutine that copies the output: it must not block.
	// Default nil.
	Line func(line string)
}

// TailLines is how many of a process's last lines Tail keeps.
const TailLines = 60

// Figures is what a process's log says about its health.
type Figures struct {
	Errors, Warns int      // lines at level ERROR, and at WARN
	Samples       []string // the first few ERROR lines
}

// Add adds g's figures to f's, and keeps the first few samples of both.
func (f *Figures) Add(g Figures) {
	f.Errors += g.Errors
	f.Warns += g.Warns
	f.Samples = append(f.Samples, g.Samples[:min(len(g.Samples), max(0, 5-len(f.Samples)))]...)
}

// Serving is where a process serves, as its "sluice serving" line says.
type Serving struct {
	SQS, Admin string        // the listeners' URLs: http://host:port
	After      time.Duration // from exec to the line: for a restart, the recovery
}

// Process is one running `sluice serve`.
type Process struct {
	cmd     *exec.Cmd
	began   time.Time
	line    func(string)
	serving chan Serving  // the "sluice serving" line, once
	exited  chan struct{} // closed once Wait returned
	waitErr error         // Wait's result, once exited is closed

	mu      sync.Mutex
	log     io.WriteCloser // nil once closed
	partial []byte
	last    []string // the last TailLines lines, but noise
	figs    Figures
	said    bool // the serving line came
}

// Start runs a new process and returns without waiting for it to serve
// (a new cluster elects its first leaders only once every node runs: start
// them all, then wait).
func Start(cfg Config) (*Process, error) {
	p := &Process{line: cfg.Line, log: cfg.Log, serving: make(chan Serving, 1), exited: make(chan struct{})}
	p.cmd = exec.Command(cfg.Bin, cfg.Args...)
	p.cmd.Env = append(os.Environ(), cfg.Env...)
	out := &output{p} // one writer for both, so that exec copies them with one goroutine
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		p.closeLog()
		return nil, err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		p.closeLog()
		close(p.exited)
	}()
	return p, nil
}

// AwaitServing waits until p logs that it serves, for timeout at most,
// then asks its /healthz once through rt, and says where it serves.
func (p *Process) AwaitServing(rt http.RoundTripper, timeout time.Duration) (Serving, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var s Serving
	select {
	case s = <-p.serving:
	case <-p.exited:
		return s, fmt.Errorf("sluice serve exited before serving (%v)", p.waitErr)
	case <-deadline.C:
		return s, fmt.Errorf("sluice serve did not serve within %v", timeout)
	}
	// It logs that it serves once its listeners are open: a connection is
	// taken (at worst queued until its accept loop runs) and answered.
	hc := &http.Client{Transport: rt, Timeout: 30 * time.Second}
	resp, err := hc.Get(s.Admin + "/healthz")
	if err != nil {
		return s, fmt.Errorf("/healthz: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("/healthz answered %s", resp.Status)
	}
	return s, nil
}

// Stop signals p and waits until it exited, for timeout at most, then
// kills it. A SIGTERM must end it cleanly (exit 0). It returns how long
// the process took to exit.
func (p *Process) Stop(how Stop, timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	if err := p.cmd.Process.Signal(how.signal()); err != nil {
		return 0, fmt.Errorf("%v: %w", how, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
		return time.Since(begin), fmt.Errorf("sluice serve did not stop within %v of %v", timeout, how)
	}
	took := time.Since(begin)
	if how == Term && p.waitErr != nil {
		return took, fmt.Errorf("sluice serve exited with %v after SIGTERM", p.waitErr)
	}
	return took, nil
}

// Kill ends p, if it still runs, and waits until it exited: for a test's
// cleanup.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// Pid is p's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// ExitErr is how p exited (Wait's error), once it did; nil before.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// Exited says whether p exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Figures is what p's log said so far.
func (p *Process) Figures() Figures {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.figs
	f.Samples = append([]string(nil), f.Samples...)
	return f
}

// Tail is p's last lines, for a failure message.
func (p *Process) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.last, "\n")
}

// output takes a process's output.
type output struct{ p *Process }

func (o *output) Write(b []byte) (int, error) {
	p := o.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		p.log.Write(b)
	}
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.lineLocked(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

var servingLine = regexp.MustCompile(`msg="sluice serving" sqs=(\S+) admin=(\S+)`)

// noise says whether a line is left out of the tail: a cluster node's
// route connections come and go by the dozen at every start, and would
// crowd out everything else.
func noise(line string) bool {
	return strings.Contains(line, "Route connection created") || strings.Contains(line, "Router connection closed")
}

func (p *Process) lineLocked(line string) {
	if !noise(line) {
		if len(p.last) == TailLines {
			p.last = p.last[1:]
		}
		p.last = append(p.last, line)
	}
	if !p.said {
		if m := servingLine.FindStringSubmatch(line); m != nil {
			p.said = true
			p.serving <- Serving{SQS: m[1], Admin: m[2], After: time.Since(p.began)}
		}
	}
	switch {
	case strings.Contains(line, "level=ERROR"):
		p.figs.Errors++
		if len(p.figs.Samples) < 5 {
			p.figs.Samples = append(p.figs.Samples, line)
		}
	case strings.Contains(line, "level=WARN"):
		p.figs.Warns++
	}
	if p.line != nil {
		p.line(line)
	}
}

func (p *Process) closeLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
}
