#!/usr/bin/env bash
# The test command: setup, then formatting, vet, lint and every test against real
# redis-server, NATS and Chromium. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== gofmt" >&2
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
echo "== go vet" >&2
go vet ./...
echo "== golangci-lint" >&2
"$(go env GOPATH)/bin/golangci-lint" run ./...
echo "== go test -race" >&2
go test -race -count=1 -timeout 20m ./...
echo "== web app and SDK" >&2
scripts/test-web.sh
