#!/usr/bin/env bash
# Installs, starts and stops the brokers `sluice bench --peers` compares
# Sluice with, on a fresh Debian machine (run as root):
#
#   scripts/peers.sh start          RabbitMQ (Debian's package) on 127.0.0.1:5672 and
#                                   nats-server (built from its Go module) with
#                                   JetStream, sync_interval always, on 127.0.0.1:4222
#   scripts/peers.sh start-cluster  builds ./cmd/sluice from this checkout and starts a
#                                   three-node Sluice cluster (the sluice-cluster peer):
#                                   SQS on 127.0.0.1:9424, 9434 and 9444 (admin on the
#                                   next port of each, routes on the one after)
#   scripts/peers.sh stop-cluster   stops the cluster (SIGTERM, waits) and removes its data
#   scripts/peers.sh stop           stops everything above that runs
#   scripts/peers.sh status         says which are up
#
# State (nats-server and sluice binaries, config, JetStream store, the
# cluster's data directories, logs, pids) lives in $SLUICE_PEERS_DIR
# (default /tmp/sluice-peers); `stop` and `stop-cluster` remove the stores.
set -euo pipefail

NATS_VERSION=${NATS_VERSION:-v2.15.2}
DIR=${SLUICE_PEERS_DIR:-/tmp/sluice-peers}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# Node i (1-3) of the cluster: SQS on CLUSTER_BASE+10i, admin on the next
# port, routes on the one after (the default of sluice bench --cluster-endpoints).
CLUSTER_BASE=9414
CLUSTER_NODES=(1 2 3)

listening() { # host port
  (exec 3<> "/dev/tcp/$1/$2") 2> /dev/null
}

wait_port() { # name port seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    if listening 127.0.0.1 "$2"; then
      echo "$1 listening on 127.0.0.1:$2"
      return 0
    fi
    sleep 0.1
  done
  echo "$1 did not listen on 127.0.0.1:$2 within $3 s" >&2
  return 1
}

start_rabbitmq() {
  if ! command -v rabbitmq-server > /dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The package's own start (invoke-rc.d) fails without an init system;
    # we start the server ourselves below.
    apt-get install -y -qq rabbitmq-server > /dev/null || true
    command -v rabbitmq-server > /dev/null
  fi
  if listening 127.0.0.1 5672; then
    echo "rabbitmq already listening on 127.0.0.1:5672"
    return 0
  fi
  mkdir -p "$DIR"
  # Debian's rabbitmq-server wrapper drops to the rabbitmq user itself.
  # RABBITMQ_NODE_IP_ADDRESS keeps it on loopback.
  RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 nohup rabbitmq-server > "$DIR/rabbitmq.log" 2>&1 &
  echo $! > "$DIR/rabbitmq.pid"
  wait_port rabbitmq 5672 120
  rabbitmqctl --quiet await_startup > /dev/null 2>&1 || true
  echo "rabbitmq $(rabbitmqctl --quiet version 2> /dev/null || echo '?')"
}

start_nats() {
  mkdir -p "$DIR/bin" "$DIR/jetstream"
  if [ ! -x "$DIR/bin/nats-server" ]; then
    GOBIN="$DIR/bin" go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
  fi
  if listening 127.0.0.1 4222; then
    echo "nats already listening on 127.0.0.1:4222"
    return 0
  fi
  cat > "$DIR/nats.conf" << EOF
listen: 127.0.0.1:4222
jetstream {
  store_dir: "$DIR/jetstream"
  # fsync every write before it is acknowledged (the default is every 2 minutes)
  sync_interval: always
}
EOF
  nohup "$DIR/bin/nats-server" -c "$DIR/nats.conf" > "$DIR/nats.log" 2>&1 &
  echo $! > "$DIR/nats.pid"
  wait_port nats 4222 30
  echo "nats-server $("$DIR/bin/nats-server" --version)"
}

stop_nats() {
  if [ -f "$DIR/nats.pid" ]; then
    local pid
    pid=$(cat "$DIR/nats.pid")
    if kill "$pid" 2> /dev/null; then
      while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done
      echo "nats stopped"
    fi
    rm -f "$DIR/nats.pid"
  fi
  rm -rf "$DIR/jetstream"
}

stop_rabbitmq() {
  if command -v rabbitmqctl > /dev/null && listening 127.0.0.1 5672; then
    rabbitmqctl --quiet stop > /dev/null 2>&1 && echo "rabbitmq stopped"
  fi
  if [ -f "$DIR/rabbitmq.pid" ]; then
    local pid
    pid=$(cat "$DIR/rabbitmq.pid")
    while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done
    rm -f "$DIR/rabbitmq.pid"
  fi
}

sqs_port() { echo $((CLUSTER_BASE + 10 * $1)); }

# healthy port: the admin server on 127.0.0.1:port answers /healthz with 200.
healthy() {
  (
    exec 3<> "/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$1" >&3
    IFS= read -r -t 5 line <&3 || exit 1
    [[ $line == "HTTP/1."?" 200"* ]]
  ) 2> /dev/null
}

# node_pid i: the pid of cluster node i started by this script, if it still
# runs (a pid file left by a node that died, or a pid reused by another
# process, gives nothing).
node_pid() {
  local f="$DIR/cluster-n$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [[ $(ps -o args= -p "$pid" 2> /dev/null) == "$DIR/bin/sluice serve"* ]] || return 1
  echo "$pid"
}

start_cluster() {
  local i p port routes=() running=0
  for i in "${CLUSTER_NODES[@]}"; do
    if node_pid "$i" > /dev/null; then running=$((running + 1)); fi
    routes+=("127.0.0.1:$(($(sqs_port "$i") + 2))")
  done
  local peer_routes
  peer_routes=$(IFS=,; echo "${routes[*]}")
  if [ "$running" -eq "${#CLUSTER_NODES[@]}" ]; then
    echo "sluice-cluster already running"
    return 0
  elif [ "$running" -gt 0 ]; then
    echo "sluice-cluster: $running of ${#CLUSTER_NODES[@]} nodes run; stop-cluster first" >&2
    return 1
  fi
  for i in "${CLUSTER_NODES[@]}"; do
    p=$(sqs_port "$i")
    for port in "$p" $((p + 1)) $((p + 2)); do
      if listening 127.0.0.1 "$port"; then
        echo "sluice-cluster: 127.0.0.1:$port is in use by another process" >&2
        return 1
      fi
    done
  done
  mkdir -p "$DIR/bin" "$DIR/cluster"
  (cd "$REPO" && go build -o "$DIR/bin/sluice" ./cmd/sluice)
  for i in "${CLUSTER_NODES[@]}"; do
    p=$(sqs_port "$i")
    nohup "$DIR/bin/sluice" serve --cluster bench --node "n$i" --peers "$peer_routes" \
      --cluster-addr "127.0.0.1:$((p + 2))" --sqs-addr "127.0.0.1:$p" --admin-addr "127.0.0.1:$((p + 1))" \
      --data-dir "$DIR/cluster/n$i" > "$DIR/cluster-n$i.log" 2>&1 &
    echo $! > "$DIR/cluster-n$i.pid"
  done
  # A new cluster answers once every node is up and JetStream has elected
  # its leaders; each node's admin port answers /healthz once it serves.
  local t endpoints=()
  for i in "${CLUSTER_NODES[@]}"; do
    p=$(sqs_port "$i")
    for ((t = 0; t < 1200; t++)); do
      healthy $((p + 1)) && break
      if ! node_pid "$i" > /dev/null; then
        echo "sluice-cluster: node n$i exited (see $DIR/cluster-n$i.log)" >&2
        stop_cluster
        return 1
      fi
      sleep 0.1
    done
    if ! healthy $((p + 1)); then
      echo "sluice-cluster: node n$i did not answer /healthz on 127.0.0.1:$((p + 1)) within 120 s (see $DIR/cluster-n$i.log)" >&2
      stop_cluster
      return 1
    fi
    endpoints+=("http://127.0.0.1:$p")
  done
  echo "sluice-cluster up: --cluster-endpoints $(IFS=,; echo "${endpoints[*]}")"
}

stop_cluster() {
  local i pid pids=() t
  for i in "${CLUSTER_NODES[@]}"; do
    if pid=$(node_pid "$i"); then
      kill -TERM "$pid" 2> /dev/null && pids+=("$pid")
    fi
  done
  for pid in "${pids[@]}"; do
    for ((t = 0; t < 300; t++)); do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2> /dev/null; then
      echo "sluice-cluster: pid $pid still runs 30 s after SIGTERM; killing it" >&2
      kill -KILL "$pid" 2> /dev/null || true
    fi
  done
  [ "${#pids[@]}" -eq 0 ] || echo "sluice-cluster stopped"
  for i in "${CLUSTER_NODES[@]}"; do rm -f "$DIR/cluster-n$i.pid"; done
  rm -rf "$DIR/cluster"
}

status_cluster() {
  local i p up=() down=()
  for i in "${CLUSTER_NODES[@]}"; do
    p=$(sqs_port "$i")
    if healthy $((p + 1)) && listening 127.0.0.1 "$p"; then up+=("n$i"); else down+=("n$i"); fi
  done
  if [ "${#down[@]}" -eq 0 ]; then
    echo "sluice-cluster up"
  elif [ "${#up[@]}" -eq 0 ]; then
    echo "sluice-cluster down"
  else
    echo "sluice-cluster partly up: ${up[*]} up, ${down[*]} down"
  fi
}

case "${1:-}" in
  start)
    start_rabbitmq
    start_nats
    ;;
  start-cluster)
    start_cluster
    ;;
  stop-cluster)
    stop_cluster
    ;;
  stop)
    stop_cluster
    stop_nats
    stop_rabbitmq
    ;;
  status)
    for p in rabbitmq:5672 nats:4222; do
      if listening 127.0.0.1 "${p#*:}"; then echo "${p%%:*} up"; else echo "${p%%:*} down"; fi
    done
    status_cluster
    ;;
  *)
    echo "usage: $0 start|start-cluster|stop-cluster|stop|status" >&2
    exit 2
    ;;
esac
