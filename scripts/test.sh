#!/usr/bin/env bash
# The test command: setup, then formatting, vet, lint and every test against real
# redis-server, NATS and Chromium. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every test, every time: a -short in GOFLAGS would let the tests that need Chromium,
# Hydra, Jaeger or Docker skip, and a skipped test would pass here.
case " ${GOFLAGS:-} " in
  *" -short "* | *" -short="* | *" -test.short"*)
    echo "scripts/test.sh runs every test: remove -short from GOFLAGS (go test -short ./... is the fast loop)" >&2
    exit 2 ;;
esac

# Per-stage wall times, printed at the end of every run, a failed one too (the EXIT
# trap): stage NAME ends the running stage and starts NAME. Beside each, the cores the
# whole machine kept busy meanwhile (from /proc/stat, where there is one): a stage far
# below the machine's cores is waiting, not computing.
stage_names=() stage_seconds=() stage_cores=() stage_name="" stage_start=$SECONDS stage_cpu=""
cpu_ticks() { # busy and idle jiffies of all cores so far
  local _cpu user nice system idle iowait irq softirq steal _rest
  [ -r /proc/stat ] && read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat || return 0
  echo "$((user + nice + system + irq + softirq + steal)) $((idle + iowait))"
}
stage() {
  local now busy idle busy0 idle0
  now=$(cpu_ticks)
  if [ -n "$stage_name" ]; then
    stage_names+=("$stage_name") stage_seconds+=($((SECONDS - stage_start)))
    read -r busy idle <<<"$now" || true
    read -r busy0 idle0 <<<"$stage_cpu" || true
    if [ -n "$now" ] && [ -n "$stage_cpu" ] && [ $((busy - busy0 + idle - idle0)) -gt 0 ]; then
      stage_cores+=("$(awk -v b=$((busy - busy0)) -v t=$((busy - busy0 + idle - idle0)) -v n="$(nproc)" 'BEGIN { printf "%.1f of %d", n * b / t, n }')")
    else
      stage_cores+=("-")
    fi
  fi
  stage_name=$1 stage_start=$SECONDS stage_cpu=$now
  [ -z "$1" ] || echo "== $1" >&2
}
stage_table() {
  local status=$? failed=$stage_name i
  stage ""
  compose_end # a run that failed early still waits for the compose test, which cleans up
  {
    printf '\n%-64s %7s %12s\n' stage seconds "busy cores"
    for i in "${!stage_names[@]}"; do
      printf '%-64s %7d %12s%s\n' "${stage_names[$i]}" "${stage_seconds[$i]}" "${stage_cores[$i]}" \
        "$([ $status -ne 0 ] && [ "${stage_names[$i]}" = "$failed" ] && echo "  (failed: exit $status)")"
    done
    if [ -n "$compose_status" ]; then
      printf '%-64s %7s%s\n' "the compose stack (beside the stages above)" "$compose_seconds" \
        "$([ "$compose_status" -ne 0 ] && echo "  (failed: exit $compose_status)")"
    fi
    printf '%-64s %7d\n' total "$SECONDS"
  } >&2
}
trap stage_table EXIT

# The compose test (scripts/test-compose.sh: the compose commands of docs/operating.md
# for real, in Docker) runs beside every stage after the setup, into a log printed whole
# once it ends: most of its time is building images and waiting (health checks, a
# viewer polling through each fault), which the other stages fill. compose_end waits
# for it and prints its log.
compose_pid="" compose_log="" compose_seconds="" compose_status=""
compose_start() {
  compose_log=$(mktemp -d)
  (
    start=$SECONDS status=0
    scripts/test-compose.sh >"$compose_log/log" 2>&1 || status=$?
    echo "$((SECONDS - start)) $status" >"$compose_log/result"
  ) &
  compose_pid=$!
  echo "== the compose stack, for real (Docker): started beside the stages below; its log comes at the end" >&2
}
compose_end() {
  [ -n "$compose_pid" ] && [ -z "$compose_status" ] || return 0
  wait "$compose_pid" || true
  echo "== the compose stack, for real (Docker): its log" >&2
  cat "$compose_log/log" >&2
  read -r compose_seconds compose_status <"$compose_log/result" || { compose_seconds="?" compose_status=1; }
  rm -rf "$compose_log"
}

stage "setup"
scripts/setup.sh
scripts/test-web.sh --deps # the Node packages, which the compose test's screenshot reads too
compose_start

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
stage "go mod tidy -diff"
# go.mod and go.sum say exactly what the code imports (direct requirements are not
# marked indirect, nothing is missing or left over).
go mod tidy -diff
stage "go vet"
go vet ./...
stage "golangci-lint"
"$(go env GOPATH)/bin/golangci-lint" run ./...
stage "go test -race"
# The reliability suite runs on its own below: its load test keeps about 5,000
# goroutines alive, near the race detector's limit, and it measures memory.
# deploy/monitoring runs without the race detector below: it has no concurrency of its
# own, and the race build of the Prometheus module it links costs about 10 min cold.
# The race detector watches this repository's code, and the standard library's image
# packages run without it (image/...=-race=false): they have no concurrency of their
# own, and decoding every frame a pixel test judges under it was most of the broker's
# time (its tests 358 → 152 s alone).
go test -race -gcflags='image/...=-race=false' -count=1 -timeout 20m $(go list ./... | grep -v -e /reliability -e /deploy/monitoring)
stage "dashboard and alerts against a running stack (deploy/monitoring)"
go test -count=1 -timeout 10m ./deploy/monitoring
stage "reliability suite"
go test -count=1 -timeout 15m ./reliability
# Redis Cluster and Sentinel: end-to-end, route-table, grant and CLI tests on each.
# Three masters with a replica each, and a master, a replica and three sentinels, all
# with the deployment's ACL users (internal/dev/redisserver). The failover under load runs
# in the reliability suite above, on both. One go test per topology: its four packages
# run side by side (no name below is a test of two of them but TestConsumeRoute, which
# e2e and api each have and both run).
on_topology='^('
on_topology+='TestAgentList|TestConsumeRoute|TestPollingDoesNotKeepASessionAlive|TestWorkerEndsItsSession|TestFrameOfTheOpenedPage|TestNoTabIsPageNull|TestNoSessionIsNotLive|TestRechecksAfterCapture|TestGateAcrossReplicas|TestUnavailable|TestServiceRoutes|TestAdminRoutes' # e2e
on_topology+='|TestViewRoutesRefuse|TestStatusRouteRefuses'                          # api (and TestConsumeRoute)
on_topology+='|TestGrants|TestAccess|TestAccessChanges|TestAdminListener'             # reliability
on_topology+='|TestOperatorCommands|TestToolCommandGoesThroughTheOwner'               # cmd/agentfy
on_topology+=')$'
for topology in cluster sentinel; do
  stage "on a Redis $topology: end-to-end, route-table, grant and CLI tests"
  AGENTFY_TEST_REDIS=$topology go test -count=1 -timeout 10m -run "$on_topology" ./e2e ./api ./reliability ./cmd/agentfy
done
# Budgets are execution counts (about 10 s each on a 2-core machine), not durations: a
# duration -fuzztime races Go's fuzz coordinator at its deadline and fails a clean run
# with "context deadline exceeded" on a loaded machine (go.dev/issue/75804, fixed in
# Go 1.27; CI saw it on FuzzSealedFastPath). A count has no deadline to race.
stage "fuzzing, about 10 s per target"
for target in "FuzzOpen ./envelope 300000" "FuzzParse ./jsonrpc 100000" "FuzzConsumeBody ./api 20000" "FuzzParsePage ./wire 150000"; do
  set -- $target
  go test -run='^$' -fuzz="^$1\$" -fuzztime="$3x" -timeout 5m "$2"
done
stage "web app and SDK"
scripts/test-web.sh
stage "waiting for the compose stack"
compose_end
[ "$compose_status" = 0 ]
