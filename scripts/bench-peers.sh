#!/usr/bin/env bash
# Runs the three workloads docs/benchmarks.md leads with, one after the
# other, each alternating RabbitMQ, NATS JetStream and Sluice round by
# round, and writes each one's results (JSON) to $OUT:
#
#   peers-default.json  the harness's defaults: 8 producers x 32 in flight, 4 consumers
#   peers-lean.json     16 producers x 10 in flight, 32 consumers
#   peers-sdk.json      the same, Sluice driven by the stock AWS SDK for Go v2
#
# Needs the peers (scripts/peers.sh start) and a Sluice server with its
# defaults on 127.0.0.1:9324, admin on :9325 (where the bench reads the
# server's CPU time for its CPU per message). RabbitMQ's and NATS's server
# CPU a message come from their processes' CPU time: the one beam.smp
# running here and the nats-server scripts/peers.sh started (its pid
# file); without them those columns stay empty. Environment: SLUICE (the
# binary, default: sluice on PATH), ROUNDS (3), DURATION (10s), OUT
# (docs/bench), PEERS (rabbitmq,nats,sluice), SLUICE_PEERS_DIR (as
# scripts/peers.sh's).
set -euo pipefail
SLUICE=${SLUICE:-sluice}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
OUT=${OUT:-docs/bench}
PEERS=${PEERS:-rabbitmq,nats,sluice}
mkdir -p "$OUT"
pids=()
if beam=$(pgrep -x beam.smp) && [ "$(wc -w <<< "$beam")" = 1 ]; then
  pids+=(--rabbitmq-pid "$beam")
fi
if nats=$(cat "${SLUICE_PEERS_DIR:-/tmp/sluice-peers}/nats.pid" 2> /dev/null) && kill -0 "$nats" 2> /dev/null; then
  pids+=(--nats-pid "$nats")
fi
run() { # name flags...
  local name=$1
  shift
  echo "== $name: sluice bench --peers $PEERS --rounds $ROUNDS --duration $DURATION ${pids[*]} $*"
  "$SLUICE" bench --peers "$PEERS" --rounds "$ROUNDS" --duration "$DURATION" "${pids[@]}" --json "$OUT/peers-$name.json" "$@"
}
run default
run lean --producers 16 --consumers 32 --inflight 10
run sdk --producers 16 --consumers 32 --inflight 10 --sdk
