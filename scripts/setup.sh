#!/usr/bin/env bash
# Idempotent setup of a fresh Debian machine: installs only what is missing.
#   redis-server and chromium (Debian packages, as root), the pinned golangci-lint, and
#   the Node packages of the web app and SDK (npm ci), and the Hydra and Jaeger test
#   binaries.
#   --runtime installs only what the development stack needs (redis-server, chromium, and
#   as root the system user agentfy-chromium, as which the broker runs Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
runtime_only=false
[ "${1:-}" = "--runtime" ] && runtime_only=true

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
[ -x /usr/lib/chromium/chromium ] || [ -x /usr/bin/chromium ] || need_apt+=(chromium)
$runtime_only || command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
# cgo, for the sqlite driver of the Hydra test binary.
$runtime_only || command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need_apt[*]}; run as root or: sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The unprivileged user a broker running as root starts Chromium as (the dev stack and
# the tests on a machine where they run as root): Chromium never runs as root.
if [ "$(id -u)" -eq 0 ] && ! id agentfy-chromium >/dev/null 2>&1; then
  echo "setup: adding the system user agentfy-chromium (the broker's Chromium runs as it)" >&2
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agentfy-chromium
fi

$runtime_only && exit 0

GOBIN="$(go env GOPATH)/bin"
LINT_VERSION=v2.15.0
if ! "$GOBIN/golangci-lint" version 2>/dev/null | grep -q "${LINT_VERSION#v}"; then
  echo "setup: installing golangci-lint $LINT_VERSION (go install, about a minute)" >&2
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$LINT_VERSION"
fi

# npm ci where node_modules is missing or differs from the lockfile (npm keeps a copy of
# the installed tree in node_modules/.package-lock.json, without the root entry).
for dir in web sdk; do
  [ -f "$dir/package-lock.json" ] || continue
  if ! node -e '
      const fs = require("fs"), { isDeepStrictEqual } = require("util");
      const dir = process.argv[1];
      try {
        const want = JSON.parse(fs.readFileSync(dir + "/package-lock.json", "utf8")).packages;
        const have = JSON.parse(fs.readFileSync(dir + "/node_modules/.package-lock.json", "utf8")).packages;
        delete want[""];
        process.exit(isDeepStrictEqual(want, have) ? 0 : 1);
      } catch { process.exit(1); }' "$dir"; then
    echo "setup: npm ci in $dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
go mod download

# The Ory Hydra binary the OpenID tests run, built into the user cache by
# internal/dev/servers.BuildHydra (through testenv.HydraBinary) when missing (CGO: 4-6
# min cold on two cores; a few seconds when it is there already). A failed build prints
# the compiler's output.
echo "setup: hydra binary for the OpenID tests (internal/tools/hydra)" >&2
go test -count=1 -timeout 20m -run '^TestHydraBinary$' ./internal/test/testenv >&2

# The Jaeger v2 binary the trace tests export to and read back from, built the same way
# by servers.BuildJaeger (through testenv.JaegerBinary) from internal/tools/jaeger
# (about 5 min cold on two idle cores, 35 on busy ones, 121 MB; a few seconds when it
# is there already).
echo "setup: jaeger binary for the trace tests (internal/tools/jaeger)" >&2
go test -count=1 -timeout 70m -run '^TestJaegerBinary$' ./internal/test/testenv >&2
