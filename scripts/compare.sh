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
# by this checkout's `sluice bench`, msgs/s, with the server's CPU time
# per message through: user and system time over the bench divided by the
# messages sent, received and deleted). It ends with the geometric mean of
# the new/old ratios of each (for CPU per message, below 1 is better).
#
#   scripts/compare.sh --floor [ROUNDS]
#
# takes scripts/floor for the old side instead of a revision: a server
# that answers the bench's requests with no queue work (net/http, the body
# read, one canned answer), so the end-to-end rounds show how far this
# checkout's request path is above the floor any server on net/http pays
# on this machine (no in-process rounds). With RATE set, the end-to-end
# bench sends at RATE msgs/s instead of as fast as it can: the CPU a
# message of two servers is compared at one load (an unsaturated server
# spends more a message, on wake-ups and on fsyncs fewer messages share).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/compare.sh BASE_REV|--floor [ROUNDS]}
rounds=${2:-5}
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null
  git worktree remove --force "$work/old" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$base" = --floor ]; then
  echo "building scripts/floor and this checkout ($(git rev-parse --short HEAD))"
  go build -o "$work/floor" ./scripts/floor && go build -o "$work/sluice-new" ./cmd/sluice
else
  echo "building $base and this checkout ($(git rev-parse --short HEAD))"
  git worktree add -q --detach "$work/old" "$base"
  # The in-process benchmarks' package: the module root before the server
  # moved to internal/broker, internal/broker since.
  benchpkg() { if [ -f "$1/internal/broker/broker_benchmark_test.go" ]; then echo ./internal/broker; else echo .; fi; }
  (cd "$work/old" && go test -c -o "$work/old.test" "$(benchpkg .)" && go build -o "$work/sluice-old" ./cmd/sluice)
  go test -c -o "$work/new.test" "$(benchpkg .)" && go build -o "$work/sluice-new" ./cmd/sluice
fi

# cpu_ticks is a process's user and system CPU time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

inproc() {
  (cd "$work" && "./$1.test" -test.run '^$' -test.bench 'SendReceiveDelete$' -test.benchtime 300000x) |
    sed -n 's/.* \([0-9.]*\) ops\/s.*/\1/p' | head -n 1
}

e2e() {
  local port=19460 dir
  dir=$(mktemp -d "$work/data.XXXX")
  if (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; then
    echo "compare.sh: port $port is taken (a server left running?): the bench would measure it" >&2
    return 1
  fi
  if [ "$1" = old ] && [ "$base" = --floor ]; then
    "$work/floor" 127.0.0.1:$port 2> /dev/null &
  else
    "$work/sluice-$1" serve --data-dir "$dir" --sqs-addr 127.0.0.1:$port --admin-addr 127.0.0.1:$((port + 1)) 2> /dev/null &
  fi
  pid=$!
  for _ in $(seq 100); do
    (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null && break
    sleep 0.1 # a process starting up: nothing to wait on but its port
  done
  local before after out
  before=$(cpu_ticks "$pid")
  out=$("$work/sluice-new" bench --endpoint http://127.0.0.1:$port --duration 10s --producers 16 --consumers 32 --inflight 10 ${RATE:+--rate "$RATE"} 2> /dev/null)
  after=$(cpu_ticks "$pid")
  # msgs/s, then the server's CPU per message through (sent, received and
  # deleted): its user and system time over the bench, in microseconds.
  echo "$out" | awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
    /^end-to-end rate/ { rate = $3 }
    /: sent [0-9]+, received [0-9]+ in/ { for (i = 1; i <= NF; i++) if ($i == "received") got = $(i + 1) + 0 }
    END { printf "%s %.2f\n", rate, (got > 0 ? ticks / hz * 1e6 / got : 0) }'
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  pid=
  rm -rf "$dir"
}

results=$work/results
label=old
[ "$base" = --floor ] && label=floor
for i in $(seq "$rounds"); do
  if [ "$base" != --floor ]; then
    old=$(inproc old)
    new=$(inproc new)
    echo "round $i  inproc  old $old  new $new"
    echo "inproc $old $new" >> "$results"
  fi
  read -r old oldcpu <<< "$(e2e old)"
  read -r new newcpu <<< "$(e2e new)"
  if [ -z "$old" ] || [ -z "$new" ] || [ "$oldcpu" = 0.00 ] || [ "$newcpu" = 0.00 ]; then
    echo "compare.sh: round $i's end-to-end measurement failed" >&2
    exit 1
  fi
  echo "round $i  e2e     $label $old  new $new   server CPU per message: $label $oldcpu µs  new $newcpu µs"
  echo "e2e $old $new" >> "$results"
  echo "cpu-per-message $oldcpu $newcpu" >> "$results"
done
awk -v label="$label" '{ n[$1]++; s[$1] += log($3 / $2) }
     END { for (k in n) printf "%s: geometric mean new/%s %.3f over %d rounds\n", k, label, exp(s[k] / n[k]), n[k] }' "$results"
