package natsnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"
)

// ErrClusterNameMismatch says that a peer's cluster name differs from
// this node's: nats-server refuses the route, so the two never form a
// quorum together. Either side may be the misconfigured one.
var ErrClusterNameMismatch = errors.New("natsnode: cluster name does not match a peer's")

// ErrDuplicateNodeName says that another node runs with this node's name.
// JetStream derives Raft peer identities from names, so two nodes with one
// name corrupt the cluster's view of its members.
var ErrDuplicateNodeName = errors.New("natsnode: another node uses this node's name")

// ErrRouteAuth says that a route between this node and a peer was refused
// because their cluster secrets (Config.ClusterSecret) differ, or because
// one of the two has a secret and the other none: the two never form a
// quorum together. Either side may be the misconfigured one, except that
// a node without a secret that a peer refuses lacks the cluster's secret.
var ErrRouteAuth = errors.New("natsnode: cluster secret does not match a peer's")

// ErrRouteTLS says that the TLS handshake of a route between this node
// and a peer failed (Config.ClusterTLSCert): a certificate that the other
// side's CA bundle does not verify, that has expired, or that does not
// name the host dialled; or one side without route TLS. The two never
// route to each other. Either side may be the misconfigured one.
var ErrRouteTLS = errors.New("natsnode: route TLS handshake failed")

// conflictRepeat is how long a recognised conflict is logged at Debug after
// it was logged at Error: nats-server retries a refused route every second.
const conflictRepeat = 30 * time.Second

// What nats-server v2.15.2 logs for the conflicts it detects on routes
// (route.go). The prefix of each line names the connection:
// "<ip:port> - rid:<n> - ".
var (
	// Logged by the node that accepts a route from a node with another
	// cluster name, and by the soliciting node as
	// "Route Error 'Rejecting connection, ...'" when the refusal comes back.
	clusterMismatchRE = regexp.MustCompile(`Rejecting connection, cluster name "([^"]*)" does not match "([^"]*)"`)
	// Logged right after the refusal above, by the node that refused.
	clusterConflictRE = regexp.MustCompile(`cluster name from remote server conflicts$`)
	// Logged by a node that accepts a route from a node with its own name.
	duplicateNameRE = regexp.MustCompile(`Remote server has a duplicate name: "([^"]*)"`)
	// Logged by a node that requires a cluster secret and accepts a route
	// that presents another one (`authentication error - User "sluice"`)
	// or none (`authentication error`) (client.go, authViolation). The
	// route prefix tells it from a client's (cid:).
	routeAuthRefusedRE = regexp.MustCompile(`^\S+ - rid:\d+ - authentication error( - User)?`)
	// Logged by the node whose route was refused so, when the refusal
	// comes back (client.go, processErr).
	routeAuthViolationRE = regexp.MustCompile(`Route Error 'Authorization Violation'`)
	// The connection prefix of a route's log lines.
	routePrefixRE = regexp.MustCompile(`^(\S+) - rid:\d+ - `)
	// Logged at Error by both sides of a route whose TLS handshake failed
	// (client.go, doTLSHandshake), followed by the subjects of the
	// certificates it could not verify, if any.
	routeTLSRE = regexp.MustCompile(`^\S+ - rid:\d+ - TLS route handshake error: (.*)$`)
)

// logAdapter implements nats-server's server.Logger on top of slog, and
// recognises the lines that report a misconfigured cluster.
type logAdapter struct {
	log       *slog.Logger
	cluster   string // this node's cluster name
	hasSecret bool   // this node has a cluster secret; set before the server starts
	hasTLS    bool   // this node's routes use TLS; set before the server starts

	mu             sync.Mutex
	fatal          error     // the first Fatalf: nats-server gave up starting
	mismatch       error     // the latest cluster name mismatch, ErrClusterNameMismatch
	dup            error     // the first duplicate name, ErrDuplicateNodeName
	authIn         error     // the latest route this node refused for its secret, ErrRouteAuth
	authOut        error     // the latest route of this node's that a peer refused for its secret, ErrRouteAuth
	noSecret       error     // the first refusal of this node's route for its lack of a secret, ErrRouteAuth
	mismatchLogged time.Time // when a mismatch was last logged at Error
	dupLogged      time.Time // when a duplicate name was last logged at Error
	authLogged     time.Time // when a refused route authentication was last logged at Error
	tls            error     // the latest failed route TLS handshake, ErrRouteTLS
	// When a failed route TLS handshake was last logged at Warn, by the
	// peer's host and what failed. Bounded: cleared when full.
	tlsLogged map[string]time.Time
}

// plainRefusedTLS is what a node without route TLS and without a cluster
// secret says of a route that did not start with a CONNECT (nats-server
// calls that an authentication error, parser.go): most likely a peer's
// TLS handshake.
const plainRefusedTLS = "the peer sent something other than a route's CONNECT: most likely it uses route TLS and this node does not; every node of a cluster needs route TLS, or none"

// maxTLSLogged bounds logAdapter.tlsLogged: anyone who reaches the route
// port can fail handshakes from many hosts.
const maxTLSLogged = 256

func newLogAdapter(log *slog.Logger, cluster string) *logAdapter {
	return &logAdapter{log: log, cluster: cluster}
}

func (a *logAdapter) Noticef(format string, v ...any) { a.emit(slog.LevelInfo, format, v) }
func (a *logAdapter) Warnf(format string, v ...any)   { a.emit(slog.LevelWarn, format, v) }
func (a *logAdapter) Debugf(format string, v ...any)  { a.emit(slog.LevelDebug, format, v) }
func (a *logAdapter) Tracef(format string, v ...any)  { a.emit(LevelTrace, format, v) }

// Errorf logs at Error, except that a recognised conflict is logged in
// clearer words, and at Debug while it repeats; and that a peer that
// cannot be reached (it is down or restarting: nats-server retries every
// second) is logged at Debug (Ready's warnings and the cluster's status
// say which peers are missing).
func (a *logAdapter) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if a.conflict(line) {
		return
	}
	if routeRetryRE.MatchString(line) {
		a.log.Debug(line)
		return
	}
	a.log.Error(line)
}

// routeRetryRE matches nats-server's line for a route it cannot connect
// to yet (route.go: "Error trying to connect to route (attempt %v): %v").
var routeRetryRE = regexp.MustCompile(`Error trying to connect to route \(attempt \d+\)`)

// Fatalf records why nats-server gave up (it returns instead of exiting,
// since it is embedded) and logs it at Error. The first error among v is
// kept, so errors.Is works on Start's error (e.g. syscall.EADDRINUSE).
func (a *logAdapter) Fatalf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	a.log.Error(line, "fatal", true)
	var cause error
	for _, x := range v {
		if err, ok := x.(error); ok {
			cause = err
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fatal == nil {
		a.fatal = &fatalError{line: line, cause: cause}
	}
}

func (a *logAdapter) emit(level slog.Level, format string, v []any) {
	if !a.log.Enabled(context.Background(), level) {
		return
	}
	a.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

// conflict records and logs line if it reports a conflict, and says if it
// did.
func (a *logAdapter) conflict(line string) bool {
	var addr string
	if m := routePrefixRE.FindStringSubmatch(line); m != nil {
		addr = m[1]
	}
	if m := clusterMismatchRE.FindStringSubmatch(line); m != nil {
		// One of the two names is ours; the other is the peer's.
		remote := m[1]
		if remote == a.cluster {
			remote = m[2]
		}
		err := fmt.Errorf("%w: a peer (connection %s) uses cluster name %q, this node %q; "+
			"every node of a cluster must use the same cluster name",
			ErrClusterNameMismatch, addr, remote, a.cluster)
		a.mu.Lock()
		a.mismatch = err
		level := repeatLevel(&a.mismatchLogged)
		a.mu.Unlock()
		a.log.Log(context.Background(), level, "cluster name does not match a peer's; the route is refused",
			"cluster", a.cluster, "peer_cluster", remote, "peer_addr", addr, "nats", line)
		return true
	}
	if m := duplicateNameRE.FindStringSubmatch(line); m != nil {
		err := fmt.Errorf("%w: another node (connection %s) is also named %q; "+
			"every node needs its own stable name", ErrDuplicateNodeName, addr, m[1])
		a.mu.Lock()
		if a.dup == nil {
			a.dup = err
		}
		level := repeatLevel(&a.dupLogged)
		a.mu.Unlock()
		a.log.Log(context.Background(), level, "another node uses this node's name; the route is refused",
			"peer_addr", addr, "nats", line)
		return true
	}
	if m := routeAuthRefusedRE.FindStringSubmatch(line); m != nil {
		// nats-server logs this for a route whose first bytes are not a
		// CONNECT, as well as for one whose CONNECT lacks the secret: a
		// TLS ClientHello from a peer with route TLS, here where there is
		// none, is one such.
		if m[1] == "" && !a.hasSecret && !a.hasTLS {
			a.tlsFailed(addr, plainRefusedTLS, "", line)
			return true
		}
		// A peer dialled this node with another secret, or none. Such a
		// peer still accepts the routes this node dials to it.
		why := "the peer's cluster secret differs from this node's"
		switch {
		case m[1] == "" && !a.hasTLS:
			why = "the peer has no cluster secret (so its own route listener accepts any node), or it uses route TLS and this node does not"
		case m[1] == "":
			why = "the peer has no cluster secret (so its own route listener accepts any node)"
		}
		a.authRefused(fmt.Errorf("%w: this node refused a route from a peer (connection %s): %s; "+
			"every node of a cluster must have the same cluster secret", ErrRouteAuth, addr, why), true, false, addr, line)
		return true
	}
	if routeAuthViolationRE.MatchString(line) {
		// A peer refused the route this node dialled.
		why := "its cluster secret differs from this node's"
		if !a.hasSecret {
			why = "it requires a cluster secret and this node has none"
		}
		a.authRefused(fmt.Errorf("%w: a peer (route %s) refused this node's route: %s; "+
			"every node of a cluster must have the same cluster secret", ErrRouteAuth, addr, why), false, !a.hasSecret, addr, line)
		return true
	}
	if m := routeTLSRE.FindStringSubmatch(line); m != nil {
		a.tlsFailed(addr, tlsReason(m[1]), m[1], line)
		return true
	}
	if clusterConflictRE.MatchString(line) {
		// The same refusal again, in nats-server's words.
		a.log.Debug(line)
		return true
	}
	return false
}

// authRefused records and logs a refused route authentication: by this
// node (in), or by a peer (out). noSecret says that a peer refused this
// node for having no secret.
func (a *logAdapter) authRefused(err error, in, noSecret bool, addr, line string) {
	a.mu.Lock()
	if in {
		a.authIn = err
	} else {
		a.authOut = err
	}
	if noSecret && a.noSecret == nil {
		a.noSecret = err
	}
	level := repeatLevel(&a.authLogged)
	a.mu.Unlock()
	// err names the peer and says which side refused; the line is
	// nats-server's, which names the route user, never the secret.
	a.log.Log(context.Background(), level, "cluster secret does not match a peer's; the route is refused",
		"peer_addr", addr, "err", err.Error(), "nats", line)
}

// tlsFailed records and logs a failed route TLS handshake with the peer at
// addr: at Warn, then at Debug while the same failure with the same host
// repeats within conflictRepeat (nats-server retries every second).
func (a *logAdapter) tlsFailed(addr, reason, cause, line string) {
	err := fmt.Errorf("%w: route with a peer (connection %s): %s", ErrRouteTLS, addr, reason)
	host := addr
	if h, _, splitErr := net.SplitHostPort(addr); splitErr == nil {
		host = h // an accepted route's port is the peer's ephemeral one
	}
	key := host + " " + reason
	a.mu.Lock()
	a.tls = err
	now := time.Now()
	level := slog.LevelDebug
	if now.Sub(a.tlsLogged[key]) >= conflictRepeat {
		if a.tlsLogged == nil || len(a.tlsLogged) >= maxTLSLogged {
			a.tlsLogged = make(map[string]time.Time)
		}
		a.tlsLogged[key] = now
		level = slog.LevelWarn
	}
	a.mu.Unlock()
	attrs := []any{"peer_addr", addr, "reason", reason}
	if cause != "" {
		attrs = append(attrs, "tls_error", cause)
	}
	a.log.Log(context.Background(), level, "route TLS handshake failed; the route is refused", append(attrs, "nats", line)...)
}

// tlsReason says in words why a route's TLS handshake failed, from the
// error nats-server logged. The side that logs it may be the one that
// dialled or the one that accepted.
func tlsReason(cause string) string {
	for _, r := range []struct{ in, reason string }{
		{"certificate signed by unknown authority", "the peer's certificate is not signed by a CA of this node's CA bundle"},
		{"remote error: tls: unknown certificate authority", "the peer refused this node's certificate: it is not signed by a CA of the peer's CA bundle"},
		{"remote error: tls: bad certificate", "the peer refused this node's certificate (not signed by a CA of the peer's CA bundle, expired, or not naming the host the peer dialled: the peer's log says which)"},
		{"certificate has expired or is not yet valid", "the peer's certificate has expired or is not valid yet (or the two machines' clocks disagree)"},
		{"remote error: tls: expired certificate", "the peer refused this node's certificate: it has expired or is not valid yet (or the two machines' clocks disagree)"},
		{"certificate is valid for", "the peer's certificate does not name the host this node dialled it at (an IP address or DNS name in its subject alternative names)"},
		{"certificate is not valid for any names", "the peer's certificate names no host (it needs its IP address or DNS name in its subject alternative names)"},
		{"incompatible key usage", "the certificate's extended key usage does not allow this use: a node's certificate needs serverAuth and clientAuth"},
		{"client didn't provide a certificate", "the peer presented no certificate"},
		{"first record does not look like a TLS handshake", "the peer does not use TLS on its routes: every node of a cluster needs route TLS, or none"},
		{"remote error: tls: certificate required", "the peer requires a certificate and this node presented none"},
		{"remote error: tls: protocol version not supported", "the peer does not speak TLS 1.3"},
		{"i/o timeout", "the handshake timed out: the peer may not use TLS on its routes, or be too slow to answer"},
		{"EOF", "the peer closed the connection during the handshake: it may not use TLS on its routes, or have refused this node's certificate"},
		{"connection reset by peer", "the peer closed the connection during the handshake: it may not use TLS on its routes, or have refused this node's certificate"},
	} {
		if strings.Contains(cause, r.in) {
			return r.reason
		}
	}
	return "the TLS handshake failed"
}

// repeatLevel is the level to log a conflict at now, given when it was
// last logged at Error: Error at most once per conflictRepeat, Debug in
// between. The caller holds the adapter's lock.
func repeatLevel(logged *time.Time) slog.Level {
	now := time.Now()
	if now.Sub(*logged) < conflictRepeat {
		return slog.LevelDebug
	}
	*logged = now
	return slog.LevelError
}

// state returns what the log told so far.
func (a *logAdapter) state() (fatal, mismatch, dup error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal, a.mismatch, a.dup
}

// authState returns the latest refused route authentications, those this
// node refused and those its peers refused joined (nil if none), and the
// first refusal of this node's routes for its lack of a secret.
func (a *logAdapter) authState() (auth, noSecret error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.authOut, a.authIn), a.noSecret
}

// tlsState returns the latest failed route TLS handshake, nil if none.
func (a *logAdapter) tlsState() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tls
}

// fatalError is a Fatalf line with the error it reported, if any.
type fatalError struct {
	line  string
	cause error
}

func (e *fatalError) Error() string { return strings.TrimSpace(e.line) }
func (e *fatalError) Unwrap() error { return e.cause }
