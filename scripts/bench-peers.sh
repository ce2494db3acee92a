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
# server's CPU time for its CPU per message). Environment: SLUICE (the
# binary, default: sluice on PATH), ROUNDS (3), DURATION (10s), OUT
# (docs/bench), PEERS (rabbitmq,nats,sluice).
set -euo pipefail
SLUICE=${SLUICE:-sluice}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
OUT=${OUT:-docs/bench}
PEERS=${PEERS:-rabbitmq,nats,sluice}
mkdir -p "$OUT"
run() { # name flags...
  local name=$1
  shift
  echo "== $name: sluice bench --peers $PEERS --rounds $ROUNDS --duration $DURATION $*"
  "$SLUICE" bench --peers "$PEERS" --rounds "$ROUNDS" --duration "$DURATION" --json "$OUT/peers-$name.json" "$@"
}
run default
run lean --producers 16 --consumers 32 --inflight 10
run sdk --producers 16 --consumers 32 --inflight 10 --sdk
