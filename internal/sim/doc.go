// Package sim is the simulator (`sluice sim`): it replays a backlog
// scenario (tenants sending at given rates, consumers with a service time,
// failures and outages) against the code the server runs, not a model of
// it. A run opens a real engine (internal/engine, and through it the
// queue's owner, internal/partition) over the in-memory store, whose
// writes complete at once, on a fake clock, and drives it from one
// goroutine with a discrete-event queue of its own: before each event the
// clock is set to the event's time, which also runs the engine's timers
// (maintenance, the snapshots the store asks for) on that goroutine. The
// randomness of a run (arrivals, service times, failures, message ids and
// receipt handles) comes from the scenario's seed, so a scenario and seed
// give the same figures, byte for byte, on every run on one platform.
//
// The package owns the scenario format (Parse), the run (Run) and its
// report (Result: the summary table and the CSV time series). It must not
// reimplement queue policy: every send, receive and delete is a call into
// the queue's owner, and the figures it reports come from the owner's
// answers (sent and first-receive timestamps, receive counts) and its
// statistics (tenant backlogs and ages, queue counters).
package sim
