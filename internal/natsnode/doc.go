// Package natsnode runs the embedded NATS server of a Sluice process: in
// cluster mode every sluice process runs exactly one Node, a nats-server
// with JetStream whose routes connect it to the other nodes of the
// cluster, and the JetStream store keeps its replicated logs there. A
// single node (no Peers) runs JetStream without clustering.
//
// The package owns the server's configuration, its lifecycle (Start,
// Ready, Close) and the translation of its log into slog. It must not
// create streams or know about queues: that belongs to the store built on
// top of it.
//
// # Durability
//
// Every node runs with sync_interval "always" (Options.SyncAlways): each
// Raft append entry is fsynced before it is acknowledged, so an
// acknowledged write survives a power loss on a minority of nodes. That is
// not configurable; nats-server's default (a sync every two minutes) loses
// acknowledged writes on a correlated crash.
//
// # Readiness
//
// Start returns once the listeners are up. JetStream is usable only once
// the cluster's meta group (the Raft group that creates streams) has a
// leader that this node follows and is current with: Ready waits for that,
// logging at Warn every 5 s while it waits. A brand-new cluster elects its
// first meta leader only when every node listed in Peers is up (nats-server
// v2.15.2 refuses to elect a leader from empty logs without hearing from
// the whole cluster); from then on a majority is enough.
//
// # Misconfiguration
//
// nats-server refuses a route from a node with another cluster name, with
// this node's name, or without the cluster secret (Config.ClusterSecret),
// and says so only in its log. The log adapter recognises those lines: it
// logs them at Error in plain words (once per 30 s while they repeat),
// Ready fails at once with ErrDuplicateNodeName (and with ErrRouteAuth on
// a node without a secret that a peer refused for it), and the error Ready
// returns when it gives up wraps ErrClusterNameMismatch or ErrRouteAuth.
// The secret itself is never logged. A route whose TLS handshake fails
// (Config.ClusterTLSCert: a certificate of another CA, expired, or not
// naming the host dialled; one side without TLS) is logged at Warn in
// plain words with the peer's address (once per 30 s for one host and
// reason), and Ready's error when it gives up wraps ErrRouteTLS.
//
// # In-process clients
//
// Without Config.ClientAddr a node has no client listener for other
// processes; the process's own code connects with Node.Connect. (A
// clustered node still listens on a loopback port, because nats-server
// starts its routes only after a client listener, but that port requires a
// random token only Connect knows.)
//
// # The client listener
//
// Config.ClientAddr opens a client listener for other processes (the NATS
// CLI: stream backups, peer removal). Whoever uses it can read, purge and
// delete every stream, so it always requires Config.ClientToken, which
// Start checks and never logs; Connect presents it too. The token crosses
// the network in clear text: the listener has no TLS.
package natsnode
