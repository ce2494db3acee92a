#!/usr/bin/env bash
# Runs every test: formatting, vet, and `go test -race` over the module,
# which includes the real-client tests (awscli, boto3, the JS SDK) against
# a real server, and the dashboard in headless Chromium. Installs the JS SDK from the lock file if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d test/clients/node/node_modules ] && command -v npm > /dev/null; then
  (cd test/clients/node && npm ci --no-audit --no-fund --loglevel=error)
fi
unformatted=$(gofmt -l $(git ls-files '*.go' 2> /dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on: $unformatted"
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 30m ./...
