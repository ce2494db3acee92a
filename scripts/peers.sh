#!/usr/bin/env bash
# Installs, starts and stops the brokers `sluice bench --peers` compares
# Sluice with, on a fresh Debian machine (run as root):
#
#   scripts/peers.sh start    RabbitMQ (Debian's package) on 127.0.0.1:5672 and
#                             nats-server (built from its Go module) with
#                             JetStream, sync_interval always, on 127.0.0.1:4222
#   scripts/peers.sh stop     stops both
#   scripts/peers.sh status   says which are listening
#
# State (nats-server binary, config, JetStream store, logs, pid) lives in
# $SLUICE_PEERS_DIR (default /tmp/sluice-peers); `stop` removes the store.
set -euo pipefail

NATS_VERSION=${NATS_VERSION:-v2.15.2}
DIR=${SLUICE_PEERS_DIR:-/tmp/sluice-peers}

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

case "${1:-}" in
  start)
    start_rabbitmq
    start_nats
    ;;
  stop)
    stop_nats
    stop_rabbitmq
    ;;
  status)
    for p in rabbitmq:5672 nats:4222; do
      if listening 127.0.0.1 "${p#*:}"; then echo "${p%%:*} up"; else echo "${p%%:*} down"; fi
    done
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
