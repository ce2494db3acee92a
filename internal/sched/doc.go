// Package sched decides which ready message a receive gets: the
// anti-backlog policy of a queue. It holds the ready messages of a standard
// queue arranged by shard, lane and tenant, and the per-tenant state
// that limits need (in-flight counts, token buckets, delivery rates).
//
// The policy, in the order a pick applies it:
//
//   - Shards (shuffle sharding). A queue has N shards; a tenant
//     hashes to k of them and each message goes to the least loaded of its
//     k. A receive serves the shards in turn, or one shard when the
//     consumer binds to it.
//   - Lanes. Ready messages wait in lanes: live, retry-1..n, spillover,
//     backlog, served by priority, except that a lower lane that has been
//     passed over builds credit at LowerLaneShare per pick and is served
//     when its credit reaches one, so no lane starves.
//   - Tenants. Within a lane, tenants are served by deficit round robin
//     with weights (one message costs one unit; the quantum is one unit
//     times the weight), so one tenant's backlog cannot delay another
//     beyond its fair share. A tenant at its in-flight cap is skipped until
//     one of its messages settles. A tenant over its receive rate moves to
//     the spillover lane until its bucket refills. Messages older than the
//     sideline age leave the live lane for the backlog lane when their
//     tenant's turn comes, so fresh traffic goes first after an outage.
//   - Headroom. While fewer than Headroom other receivers wait (the owner
//     says how many, per pick), a tenant above its fair share of the
//     messages in flight is passed over, so that the next message of a
//     tenant within its share finds a receiver waiting.
//   - Sends. AllowSend applies a tenant's send token bucket; its rate grows
//     with steady use up to a ceiling, and shrinks in proportion when the
//     tenant's backlog is over its target (backpressure).
//
// The scheduler is deterministic: no goroutines, no clock, no I/O. Times
// are unix milliseconds passed in by the caller, which owns the lock. A
// tenant costs memory only while it has messages ready or in flight, or a
// token bucket that has not refilled yet: idle tenants are forgotten.
package sched
