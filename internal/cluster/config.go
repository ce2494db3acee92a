package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Config configures a Manager. Zero fields take the defaults given.
type Config struct {
	// Conn is this node's connection to NATS with JetStream. Required; the
	// manager does not close it.
	Conn *nats.Conn
	// Cluster is the cluster's name, the same on every node. Required.
	// The lease bucket ("<cluster>-leases") and the catalog subject
	// ("sluice.<cluster>.catalog") derive from it; characters other than
	// letters, digits, '-' and '_' are replaced (and a hash of the name
	// appended, so that two names stay apart).
	Cluster string
	// Node is this node's name: unique in the cluster and stable across
	// restarts. Required.
	Node string
	// Replicas is the lease bucket's replica count. Default 3; use 1 with a
	// single NATS server. Every node should give the same count: the
	// bucket takes the config of the node that started last.
	Replicas int
	// LeaseTTL is how long a lease (and a membership) lasts without being
	// renewed: the longest a crashed node keeps its partitions. Whole
	// seconds, at least 2 s. Default 6 s. Leases are renewed every
	// LeaseTTL/3. A renewal stalls while the bucket elects a leader (4-9 s
	// after its leader's host dies), so a TTL under ~12 s can move every
	// partition at such a moment; they then move back when Settle allows.
	LeaseTTL time.Duration
	// Tick is how often the manager compares the leases with
	// Host.Partitions. Default 500 ms. It also runs at once when a lease
	// is released or expires, and when the catalog changes.
	Tick time.Duration
	// RankStep is how long each rank of a partition's preferred order
	// waits, once the partition is seen without a lease, before its node
	// tries to take it: the preferred node at once, the next after
	// RankStep, and so on. Default 1 s. A manager also waits RankStep after
	// Start before it takes any partition, so that nodes started together
	// see each other first.
	RankStep time.Duration
	// Settle is how long a node must have been a member, and a partition
	// owned here, before the partition is handed over to that node as its
	// preferred one; also how long a held partition may be missing from
	// Host.Partitions before it is given up. Default 10 s.
	Settle time.Duration
	// Silent, if set, reports whether another node is known not to answer
	// (its machine or its network is down: it is still a member until its
	// membership expires). Placement skips it: a partition without a
	// lease does not wait a RankStep for it (the next node takes it at
	// once), and none is handed over to it.
	Silent func(node string) bool
	// Logger receives the manager's events. Default: discarded.
	Logger *slog.Logger
}

const (
	defaultReplicas = 3
	defaultLeaseTTL = 6 * time.Second
	defaultTick     = 500 * time.Millisecond
	defaultRankStep = time.Second
	defaultSettle   = 10 * time.Second
	minLeaseTTL     = 2 * time.Second
	maxReplicas     = 5
)

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("cluster: invalid config")

func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = defaultReplicas
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = defaultLeaseTTL
	}
	if c.Tick == 0 {
		c.Tick = defaultTick
	}
	if c.RankStep == 0 {
		c.RankStep = defaultRankStep
	}
	if c.Settle == 0 {
		c.Settle = defaultSettle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Conn == nil:
		return fmt.Errorf("%w: no NATS connection", ErrConfig)
	case c.Cluster == "":
		return fmt.Errorf("%w: no cluster name", ErrConfig)
	case c.Node == "":
		return fmt.Errorf("%w: no node name", ErrConfig)
	case c.Replicas < 1 || c.Replicas > maxReplicas:
		return fmt.Errorf("%w: replicas %d, want 1 to %d", ErrConfig, c.Replicas, maxReplicas)
	case c.LeaseTTL < minLeaseTTL || c.LeaseTTL%time.Second != 0:
		// JetStream's per-message TTL has whole-second granularity: a
		// fraction would be cut off on the server but not here.
		return fmt.Errorf("%w: lease TTL %s, want whole seconds, at least %s", ErrConfig, c.LeaseTTL, minLeaseTTL)
	case c.Tick < 0 || c.RankStep < 0 || c.Settle < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	}
	return nil
}
