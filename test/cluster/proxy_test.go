package cluster

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// routeNet is the test's network between the nodes' route ports, so that
// a test can cut a node off without root: a TCP proxy for each ordered
// pair of nodes, which the dialing node's --peers name instead of the
// target's route address, and for each node an address that refuses
// every connection, which it advertises to its peers (--cluster-advertise).
//
// The advertised address is what closes the bypass. nats-server v2.15.2
// gossips every new route to the other routed servers (route.go:
// forwardNewRouteInfoToKnownServers), and a server that is not routed to
// the new one yet dials it at once as an implicit route
// (processImplicitRoute), at the address in the gossip: the advertised one
// if there is one (setRouteInfoHostPortAndIP), else the host it saw the
// route come from with the new server's real route port, which on one
// machine is a direct, unproxied route. hasThisRouteConfigured does not
// stop it: it compares the gossiped address with --peers, and --peers name
// proxies. An implicit route that cannot be dialled is given up after
// ClusterOpts.ConnectRetries further attempts (0 here: at once)
// (connectToRoute), while a configured route, through a proxy, is retried
// every second for ever. An address that is bound but not listening
// refuses the dial. (A listener that accepted and closed would not do: a
// dial succeeds, and a solicited implicit route whose connection closes is
// dialled again by client.go's reconnect, which counts no failures.)
type routeNet struct {
	nodes   []string              // node names, in order
	real    map[int]string        // each node's route port: its name
	proxies map[[2]string]*router // by dialer and target node name
	nowhere []int                 // the bound sockets' descriptors
	refuse  []string              // the address each node advertises, by node
}

// newRouteNet makes the proxies between nodes (names, with their route
// addresses) and the addresses they advertise; it closes them when the
// test ends.
func newRouteNet(names, routes []string) (*routeNet, error) {
	rn := &routeNet{nodes: names, real: map[int]string{}, proxies: map[[2]string]*router{}}
	for i, name := range names {
		_, ps, err := net.SplitHostPort(routes[i])
		if err != nil {
			return nil, err
		}
		port, _ := strconv.Atoi(ps)
		rn.real[port] = name
		addr, fd, err := refusingAddr()
		if err != nil {
			rn.close()
			return nil, err
		}
		rn.nowhere = append(rn.nowhere, fd)
		rn.refuse = append(rn.refuse, addr)
		for j, to := range names {
			if j == i {
				continue
			}
			p, err := newRouter(name, to, routes[j])
			if err != nil {
				rn.close()
				return nil, err
			}
			rn.proxies[[2]string{name, to}] = p
		}
	}
	return rn, nil
}

// refusingAddr binds a loopback TCP socket without listening on it: a
// connection to its address is refused, and no other socket can take the
// port while it is bound. The descriptor is closed on exec, so that the
// nodes the test starts do not hold it.
func refusingAddr() (string, int, error) {
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return "", 0, fmt.Errorf("a socket for an address that refuses: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", 0, fmt.Errorf("binding an address that refuses: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", 0, err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)), fd, nil
}

// peers is what node name's --peers list: its own route address (which
// nats-server skips) and the proxies to the others.
func (rn *routeNet) peers(name, own string) []string {
	out := []string{own}
	for _, to := range rn.nodes {
		if p := rn.proxies[[2]string{name, to}]; p != nil {
			out = append(out, p.addr())
		}
	}
	return out
}

// advertised is the address node name advertises: one that refuses.
func (rn *routeNet) advertised(name string) string {
	return rn.refuse[slices.Index(rn.nodes, name)]
}

// touching are the proxies from and to node name.
func (rn *routeNet) touching(name string) []*router {
	var out []*router
	for k, p := range rn.proxies {
		if k[0] == name || k[1] == name {
			out = append(out, p)
		}
	}
	return out
}

// isolate cuts node name off: the proxies from and to it close their
// connections and refuse new ones. It returns how many connections it
// closed.
func (rn *routeNet) isolate(name string) int {
	n := 0
	for _, p := range rn.touching(name) {
		n += p.block()
	}
	return n
}

// rejoin opens the proxies from and to node name again.
func (rn *routeNet) rejoin(name string) {
	for _, p := range rn.touching(name) {
		p.unblock()
	}
}

// silence cuts node name off the way a dead machine or network does: the
// proxies from and to it stop passing bytes, both ways, without closing
// anything, and hold the connections dialled meanwhile without carrying
// them (a dial succeeds, and nothing answers). Nothing sees a reset; a
// peer finds out only from silence. It returns how many connections it
// holds.
func (rn *routeNet) silence(name string) int {
	n := 0
	for _, p := range rn.touching(name) {
		n += p.stall()
	}
	return n
}

// unsilence lets the proxies from and to node name pass bytes again:
// what was held is delivered, as a network that comes back delivers what
// TCP retransmits (a connection that an end closed meanwhile ends).
func (rn *routeNet) unsilence(name string) {
	for _, p := range rn.touching(name) {
		p.resume()
	}
}

// carried is how many connections the proxies from and to node name carry
// now; refusedFrom and refusedTo how many dials by it, and by the others
// to it, they refused so far.
func (rn *routeNet) carried(name string) (live int, refusedFrom, refusedTo int64) {
	for k, p := range rn.proxies {
		switch name {
		case k[0]:
			live += p.live()
			refusedFrom += p.refused.Load()
		case k[1]:
			live += p.live()
			refusedTo += p.refused.Load()
		}
	}
	return live, refusedFrom, refusedTo
}

// routeConns reads the machine's TCP table (Linux: /proc/net/tcp) and
// counts, for each node, the established connections its route listener
// accepted, and lists those that no proxy made: a direct route. ok is
// false where the table cannot be read.
func (rn *routeNet) routeConns() (accepted map[string]int, direct []string, ok bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, nil, false
	}
	type conn struct{ local, remote int }
	var conns []conn
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[3] != "01" { // the header, or not ESTABLISHED
			continue
		}
		lip, lport, ok1 := hexAddr(fs[1])
		_, rport, ok2 := hexAddr(fs[2])
		if !ok1 || !ok2 || (lip != "0100007F" && lip != "7F000001") { // 127.0.0.1, either byte order
			continue
		}
		if _, ok := rn.real[lport]; ok {
			conns = append(conns, conn{lport, rport})
		}
	}
	f.Close()
	if sc.Err() != nil {
		return nil, nil, false
	}
	// Read after the table: a connection in it that a proxy made is known
	// to the proxy by now.
	made := map[int]bool{}
	for _, p := range rn.proxies {
		for _, port := range p.upstreamPorts() {
			made[port] = true
		}
	}
	accepted = map[string]int{}
	for _, c := range conns {
		name := rn.real[c.local]
		accepted[name]++
		if !made[c.remote] {
			direct = append(direct, fmt.Sprintf("%s's route listener has a connection from port %d that no proxy made", name, c.remote))
		}
	}
	return accepted, direct, true
}

// hexAddr splits an address of /proc/net/tcp ("0100007F:1F90").
func hexAddr(s string) (ip string, port int, ok bool) {
	ip, ps, found := strings.Cut(s, ":")
	p, err := strconv.ParseUint(ps, 16, 16)
	return ip, int(p), found && err == nil
}

func (rn *routeNet) close() {
	for _, p := range rn.proxies {
		p.close()
	}
	for _, fd := range rn.nowhere {
		syscall.Close(fd)
	}
	rn.nowhere = nil
}

// router is the TCP proxy that carries the routes node from dials to node
// to: it listens on a loopback port of its own and forwards each
// connection to to's route address, until it is blocked.
type router struct {
	from, to string
	target   string // to's route address
	ln       net.Listener
	wg       sync.WaitGroup // the accept loop and every connection's goroutines
	// accepted counts the connections carried; refused those closed at
	// once while blocked.
	accepted, refused atomic.Int64

	mu      sync.Mutex // guards blocked, closed, open and pipes
	blocked bool
	closed  bool
	// open is closed while bytes pass; while the proxy is stalled it is a
	// channel that resume closes.
	open chan struct{}
	// stopCh is closed when the proxy is blocked or closed (nil: not made
	// yet); unblock drops it.
	stopCh chan struct{}
	pipes  map[*pipe]struct{}
}

// pipe is one carried connection: the dialer's, and the proxy's to the
// target.
type pipe struct {
	in, out net.Conn
	once    sync.Once
	done    chan struct{} // closed by close
}

func (p *pipe) close() {
	p.once.Do(func() {
		close(p.done)
		p.in.Close()
		p.out.Close()
	})
}

func newRouter(from, to, target string) (*router, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	r := &router{from: from, to: to, target: target, ln: ln, open: open, pipes: map[*pipe]struct{}{}}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *router) addr() string { return r.ln.Addr().String() }

func (r *router) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		stop := r.blocked || r.closed
		r.mu.Unlock()
		if stop {
			r.refused.Add(1)
			c.Close()
			continue
		}
		r.wg.Go(func() { r.carry(c) })
	}
}

// carry dials the target for connection c and copies both ways until
// either side closes, or the proxy is blocked. While the proxy is stalled
// it neither dials nor copies.
func (r *router) carry(c net.Conn) {
	if !r.await(nil) {
		c.Close()
		return
	}
	d, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p := &pipe{in: c, out: d, done: make(chan struct{})}
	r.mu.Lock()
	if r.blocked || r.closed {
		r.mu.Unlock()
		r.refused.Add(1)
		p.close()
		return
	}
	r.pipes[p] = struct{}{}
	r.mu.Unlock()
	r.accepted.Add(1)
	done := func() {
		p.close()
		r.mu.Lock()
		delete(r.pipes, p)
		r.mu.Unlock()
	}
	r.wg.Go(func() { r.pump(d, c, p); done() })
	r.pump(c, d, p)
	done()
}

// pump copies src to dst until either ends, passing no byte while the
// proxy is stalled: what src sends meanwhile waits in the sockets'
// buffers, and src's writes block once they are full.
func (r *router) pump(dst, src net.Conn, p *pipe) {
	buf := make([]byte, 32<<10)
	for r.await(p) {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.await(p) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// await waits while the proxy is stalled; false once it, or pipe p (nil:
// none yet), is closed or blocked.
func (r *router) await(p *pipe) bool {
	for {
		r.mu.Lock()
		open, stop := r.open, r.blocked || r.closed
		r.mu.Unlock()
		if stop {
			return false
		}
		var done chan struct{}
		if p != nil {
			done = p.done
		}
		select {
		case <-open:
			return true
		case <-done:
			return false
		case <-r.stop():
			return false
		}
	}
}

// stop is a channel closed once the proxy is closed or blocked: a held
// connection is let go then.
func (r *router) stop() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopCh == nil {
		r.stopCh = make(chan struct{})
		if r.blocked || r.closed {
			close(r.stopCh)
		}
	}
	return r.stopCh
}

// stopLocked closes the stop channel, if one was made and is open.
func (r *router) stopLocked() {
	if r.stopCh == nil {
		r.stopCh = make(chan struct{})
	}
	select {
	case <-r.stopCh:
	default:
		close(r.stopCh)
	}
}

// stall stops passing bytes without closing anything (see
// routeNet.silence); it returns how many connections it holds.
func (r *router) stall() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
		r.open = make(chan struct{})
	default: // stalled already
	}
	return len(r.pipes)
}

// resume passes bytes again.
func (r *router) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
	default:
		close(r.open)
	}
}

// block closes every connection and refuses new ones until unblock; it
// returns how many it closed.
func (r *router) block() int {
	r.mu.Lock()
	r.blocked = true
	r.stopLocked()
	pipes := make([]*pipe, 0, len(r.pipes))
	for p := range r.pipes {
		pipes = append(pipes, p)
	}
	r.mu.Unlock()
	for _, p := range pipes {
		p.close()
	}
	return len(pipes)
}

func (r *router) unblock() {
	r.mu.Lock()
	r.blocked = false
	r.stopCh = nil // a held connection waits again
	r.mu.Unlock()
}

// live is how many connections it carries now.
func (r *router) live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pipes)
}

// upstreamPorts are the local ports of its live connections to the
// target.
func (r *router) upstreamPorts() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for p := range r.pipes {
		if a, ok := p.out.LocalAddr().(*net.TCPAddr); ok {
			out = append(out, a.Port)
		}
	}
	return out
}

// close stops the proxy and waits for its goroutines.
func (r *router) close() {
	r.mu.Lock()
	r.closed = true
	r.stopLocked()
	pipes := make([]*pipe, 0, len(r.pipes))
	for p := range r.pipes {
		pipes = append(pipes, p)
	}
	r.mu.Unlock()
	r.ln.Close()
	for _, p := range pipes {
		p.close()
	}
	r.wg.Wait()
}
