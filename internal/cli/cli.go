// Package cli is the sluice command: `sluice serve` runs the server,
// `sluice verify` checks a stopped server's data directory, the other
// commands talk to a running server over the SQS API (`sluice topics`
// over the SNS API). Commands write to injected writers so they can be
// tested.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/internal/loadgen"
)

// Env is what a command runs with.
type Env = cmdkit.Env

const usage = `sluice: a durable, SQS-compatible message queue.

Usage:
  sluice serve [flags]                 run the server (embedded store)
  sluice verify [--data-dir DIR] [--salvage]
                                       check a stopped server's data directory: nothing is
                                       damaged, every message's body reads back; --salvage
                                       keeps what reads back of damaged data (sluice verify -h)
  sluice queues list [--prefix P]      list queues with depth and age
  sluice queues create NAME [--attr K=V]... [--fifo]
  sluice queues delete NAME
  sluice queues attrs NAME             show all attributes
  sluice queues set NAME K=V...        set attributes
  sluice send QUEUE BODY [--group G] [--dedup D] [--delay S] [--attr K=V]...
  sluice receive QUEUE [--max N] [--wait S] [--visibility S] [--delete]
  sluice queues drop-before QUEUE --before TIME [--tenant T]
                                       the watermark: drop what was sent before TIME
  sluice tenants QUEUE                 tenants by backlog: lanes, caps, partitions
  sluice tenants show|set QUEUE TENANT [--weight W] [--max-in-flight N]
         [--send-rate R] [--send-burst B] [--receive-rate R] [--receive-burst B] [--backlog-target N]
  sluice dlq list                      dead-letter queues and their sources
  sluice dlq peek DLQ [--max N] [FILTER]   look at messages (they stay in the queue)
  sluice dlq purge DLQ [FILTER]
  sluice dlq redrive DLQ [--to QUEUE] [--rate N] [FILTER]
      FILTER: --tenant T --source Q --reason R --since T --until T --contains S
  sluice topics [list]                 topics and their subscription counts
  sluice topics create NAME [--fifo] [--content-dedup] [--attr K=V]...
  sluice topics delete NAME
  sluice topics subscriptions NAME     each subscription's queue, delivery and filter
  sluice topics subscribe NAME QUEUE [--raw] [--filter POLICY] [--filter-scope MessageBody] [--dlq QUEUE]
  sluice topics unsubscribe SUBSCRIPTION_ARN
  sluice topics publish NAME MESSAGE [--subject S] [--attr K=V]... [--group G] [--dedup D]
  sluice stats                         queue figures
  sluice copy --from URL --to URL [--queues GLOB] [--create] [--move] [--dry-run] [--concurrency N]
                                       copy or move queues and messages between SQS endpoints
                                       (upgrades across a storage-format change; see sluice copy -h)
  sluice bench [flags]                 load test over the SQS JSON protocol
  sluice scenario noisy|outage|cost|all [flags]
                                       anti-backlog scenarios (docs/benchmarks.md)
  sluice sim FILE|NAME [--csv FILE] [--chart PREFIX] [--seed N]   sluice sim --list
                                       simulate a backlog scenario on the server's own
                                       queue code, on a virtual clock (docs/simulator.md)

Client commands take --endpoint (default $SLUICE_ENDPOINT or
http://127.0.0.1:9324), --region (the server's: default $SLUICE_REGION
or us-east-1), --admin for the admin API (default
$SLUICE_ADMIN_ENDPOINT or http://127.0.0.1:9325) and --json for
machine-readable output. Times are RFC 3339 or a duration ago (2h).
sluice topics builds a topic's or queue's ARN from its name, --region
and --account-id (default $SLUICE_ACCOUNT_ID or 000000000000: the
server's), or takes the ARN itself.
`

// Run runs the command line args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(env.Stdout, usage)
		return 0
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], env)
	case "queues", "send", "receive", "dlq", "stats", "tenants":
		err = client(ctx, args, env)
	case "bench":
		err = loadgen.Bench(ctx, args[1:], env)
	case "scenario":
		err = loadgen.Scenario(ctx, args[1:], env)
	case "sim":
		err = simulate(ctx, args[1:], env)
	case "topics":
		err = topics(ctx, args[1:], env)
	case "copy":
		err = copyQueues(ctx, args[1:], env)
	case "verify":
		err = verify(ctx, args[1:], env)
	default:
		err = fmt.Errorf("unknown command %q (see sluice --help)", args[0])
	}
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(env.Stderr, "sluice:", err)
		return 1
	}
	return 0
}

// repeated collects a repeatable flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func kvs(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("want KEY=VALUE, got %q", s)
		}
		out[k] = v
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
