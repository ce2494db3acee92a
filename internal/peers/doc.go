// Package peers runs one workload against Sluice and against the brokers a
// user would pick instead, so that their figures come from the same
// harness on the same machine: P producers keep N messages each in flight,
// every message counts as sent only once the broker acknowledged it as
// durable, and C consumers receive it and acknowledge (delete) it.
//
// The harness (Run, Meter) owns the clock, the counting and the
// latencies; a Peer only connects, publishes and consumes. One file a
// peer: rabbitmq.go (quorum queues, publisher confirms), nats.go
// (JetStream work-queue streams on file storage) and sluice.go (the SQS
// JSON protocol through a client that package loadgen supplies, against
// one server or spread over the nodes of a cluster).
//
// It must not start or configure the brokers themselves
// (scripts/peers.sh does), nor print: package loadgen renders the results.
package peers
