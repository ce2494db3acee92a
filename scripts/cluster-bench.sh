#!/usr/bin/env bash
# Benchmarks a three-node cluster on this machine against a single node, in
# the same run (docs/benchmarks.md, "Cluster"): sluice bench end to end (1 KiB
# messages, batches of 10) alternating between the two, ROUNDS rounds of
# DURATION each, over QUEUES queues; then the send latency of each at RATE
# messages a second (about half the cluster's rate). Everything runs on
# loopback ports 9600-9650 in a temporary directory, and stops at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-15s} QUEUES=${QUEUES:-1} RATE=${RATE:-2000}
dir=$(mktemp -d)
go build -o "$dir/sluice" ./cmd/sluice
pids=()
cleanup() {
  kill "${pids[@]}" 2> /dev/null || true
  wait "${pids[@]}" 2> /dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$dir/sluice" serve --sqs-addr 127.0.0.1:9604 --admin-addr 127.0.0.1:9605 --data-dir "$dir/single" 2> "$dir/single.log" &
pids+=($!)
peers=127.0.0.1:9616,127.0.0.1:9626,127.0.0.1:9636
for i in 1 2 3; do
  p=$((9604 + 10 * i))
  "$dir/sluice" serve --cluster bench --node "n$i" --peers "$peers" --cluster-addr "127.0.0.1:$((p + 2))" \
    --sqs-addr "127.0.0.1:$p" --admin-addr "127.0.0.1:$((p + 1))" --data-dir "$dir/n$i" 2> "$dir/n$i.log" &
  pids+=($!)
done
for port in 9604 9614 9624 9634; do
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$((port + 1))/healthz" > /dev/null && break
    sleep 0.5
  done
done
bench() { "$dir/sluice" bench --endpoint "http://127.0.0.1:$1" --duration "$2" --queues "$QUEUES" --queue "b$3" ${4:+--rate $4}; }
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: single node"
  bench 9604 "$DURATION" "s$r" | grep -E "end-to-end|send latency"
  echo "== round $r: three-node cluster (requests to node 1)"
  bench 9614 "$DURATION" "c$r" | grep -E "end-to-end|send latency"
done
echo "== send latency at $RATE msgs/s: single node"
bench 9604 "$DURATION" "sr" "$RATE" | grep -E "end-to-end|send latency"
echo "== send latency at $RATE msgs/s: three-node cluster"
bench 9614 "$DURATION" "cr" "$RATE" | grep -E "end-to-end|send latency"
