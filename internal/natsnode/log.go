package natsnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
)

// logAdapter implements nats-server's server.Logger on top of slog, and
// recognises the lines that report a misconfigured cluster.
type logAdapter struct {
	log       *slog.Logger
	cluster   string // this node's cluster name
	hasSecret bool   // this node has a cluster secret; set before the server starts

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
}

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
		// A peer dialled this node with another secret, or none. Such a
		// peer still accepts the routes this node dials to it.
		why := "the peer's cluster secret differs from this node's"
		if m[1] == "" {
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

// fatalError is a Fatalf line with the error it reported, if any.
type fatalError struct {
	line  string
	cause error
}

func (e *fatalError) Error() string { return strings.TrimSpace(e.line) }
func (e *fatalError) Unwrap() error { return e.cause }
