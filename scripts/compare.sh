#!/usr/bin/env bash
# Compares this checkout's speed with an older revision's, the two taking
# turns in one run, so that the machine's drift (fsync latency wanders by
# tens of percent over minutes) falls on both alike:
#
#   scripts/compare.sh BASE_REV [ROUNDS]     (default 5 rounds)
#
# Each round measures, old then new: send+receive+delete in process
# (BenchmarkSendReceiveDelete, 300,000 operations, ops/s), and end to end
# (`sluice serve` on loopback with a fresh data directory, loaded for 10 s
# by this checkout's `sluice bench`, msgs/s). It ends with the geometric
# mean of the new/old ratios of each.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/compare.sh BASE_REV [ROUNDS]}
rounds=${2:-5}
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null
  git worktree remove --force "$work/old" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "building $base and this checkout ($(git rev-parse --short HEAD))"
git worktree add -q --detach "$work/old" "$base"
# The in-process benchmarks' package: the module root before the server
# moved to internal/broker, internal/broker since.
benchpkg() { if [ -f "$1/internal/broker/broker_benchmark_test.go" ]; then echo ./internal/broker; else echo .; fi; }
(cd "$work/old" && go test -c -o "$work/old.test" "$(benchpkg .)" && go build -o "$work/sluice-old" ./cmd/sluice)
go test -c -o "$work/new.test" "$(benchpkg .)" && go build -o "$work/sluice-new" ./cmd/sluice

inproc() {
  (cd "$work" && "./$1.test" -test.run '^$' -test.bench 'SendReceiveDelete$' -test.benchtime 300000x) |
    sed -n 's/.* \([0-9.]*\) ops\/s.*/\1/p' | head -n 1
}

e2e() {
  local port=19460 dir
  dir=$(mktemp -d "$work/data.XXXX")
  "$work/sluice-$1" serve --data-dir "$dir" --sqs-addr 127.0.0.1:$port --admin-addr 127.0.0.1:$((port + 1)) 2> /dev/null &
  pid=$!
  for _ in $(seq 100); do
    (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null && break
    sleep 0.1 # a process starting up: nothing to wait on but its port
  done
  "$work/sluice-new" bench --endpoint http://127.0.0.1:$port --duration 10s --producers 16 --consumers 32 --inflight 10 2> /dev/null |
    sed -n 's/^end-to-end rate *\([0-9]*\) msgs\/s.*/\1/p'
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  pid=
  rm -rf "$dir"
}

results=$work/results
for i in $(seq "$rounds"); do
  for kind in inproc e2e; do
    old=$($kind old)
    new=$($kind new)
    echo "round $i  $kind  old $old  new $new"
    echo "$kind $old $new" >> "$results"
  done
done
awk '{ n[$1]++; s[$1] += log($3 / $2) }
     END { for (k in n) printf "%s: geometric mean new/old %.3f over %d rounds\n", k, exp(s[k] / n[k]), n[k] }' "$results"
