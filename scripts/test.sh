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
  beside_end # a run that failed early still waits for what runs beside it, which cleans up
  {
    printf '\n%-64s %7s %12s\n' stage seconds "busy cores"
    for i in "${!stage_names[@]}"; do
      printf '%-64s %7d %12s%s\n' "${stage_names[$i]}" "${stage_seconds[$i]}" "${stage_cores[$i]}" \
        "$([ $status -ne 0 ] && [ "${stage_names[$i]}" = "$failed" ] && echo "  (failed: exit $status)")"
    done
    for i in "${!beside_rows[@]}"; do
      echo "${beside_rows[$i]}"
    done
    printf '%-64s %7d\n' total "$SECONDS"
  } >&2
}
trap stage_table EXIT

# Stages that mostly wait run beside others, each group into a log printed whole once
# it ends (a failed group fails the run): `beside WHERE TITLE FUNCTION` starts FUNCTION in the
# background, whose steps are `step NAME COMMAND...` (timed; the first failure ends the
# group); `beside_wait N` waits for the Nth group, prints its log and its steps' rows
# ("(beside WHERE)") and says whether it passed; beside_end waits for them all.
beside_pids=() beside_wheres=() beside_dirs=() beside_status=() beside_rows=()
beside() { # beside WHERE TITLE FUNCTION
  local where=$1 title=$2 dir
  shift 2
  dir=$(mktemp -d)
  (
    status=0
    BESIDE_ROWS=$dir/rows "$@" >"$dir/log" 2>&1 || status=$?
    echo "$status" >"$dir/status"
  ) &
  beside_pids+=($!) beside_wheres+=("$where") beside_dirs+=("$dir") beside_status+=("")
  echo "== $title: started beside $where; its log comes when it ends" >&2
}
step() { # inside a group: step NAME COMMAND...
  local name=$1 start=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  printf '%s %s %s\n' "$((SECONDS - start))" "$status" "$name" >>"$BESIDE_ROWS"
  return "$status"
}
beside_wait() {
  local i=$1 dir seconds status name
  [ -n "${beside_pids[$i]:-}" ] && [ -z "${beside_status[$i]}" ] || return "${beside_status[$i]:-0}"
  dir=${beside_dirs[$i]}
  wait "${beside_pids[$i]}" || true
  echo "== the log of what ran beside ${beside_wheres[$i]}" >&2
  cat "$dir/log" >&2
  beside_status[i]=$(cat "$dir/status" 2>/dev/null || echo 1)
  while read -r seconds status name; do
    beside_rows+=("$(printf '%-64s %7d %12s%s' "$name" "$seconds" "" \
      "  (beside ${beside_wheres[$i]}$([ "$status" -ne 0 ] && echo "; failed: exit $status"))")")
  done <"$dir/rows" 2>/dev/null || true
  rm -rf "$dir"
  return "${beside_status[$i]}"
}
beside_end() {
  local i
  for i in "${!beside_pids[@]}"; do
    beside_wait "$i" || true
  done
}

stage "setup"
scripts/setup.sh
scripts/test-web.sh --deps # the Node packages, which the compose test's screenshot reads too
# The compose test (scripts/test-compose.sh: the compose commands of docs/operating.md
# for real, in Docker) runs beside every stage after the setup: most of its time is
# building images and waiting (health checks, a viewer polling through each fault).
compose_group() { step "the compose stack, for real (Docker)" scripts/test-compose.sh; }
beside "the stages after the setup" "the compose stack, for real (Docker)" compose_group

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
# Redis Cluster and Sentinel: end-to-end, route-table, grant and CLI tests on each.
# Three masters with a replica each, and a master, a replica and three sentinels, all
# with the deployment's ACL users (internal/dev/redisserver). The failover under load runs
# in the reliability suite, on both. One go test per topology: its four packages run
# side by side (no name below is a test of two of them but TestConsumeRoute, which e2e
# and api each have and both run).
on_topology='^('
on_topology+='TestAgentList|TestConsumeRoute|TestPollingDoesNotKeepASessionAlive|TestWorkerEndsItsSession|TestFrameOfTheOpenedPage|TestNoTabIsPageNull|TestNoSessionIsNotLive|TestRechecksAfterCapture|TestGateAcrossReplicas|TestUnavailable|TestServiceRoutes|TestAdminRoutes' # e2e
on_topology+='|TestViewRoutesRefuse|TestStatusRouteRefuses'                          # api (and TestConsumeRoute)
on_topology+='|TestGrants|TestAccess|TestAccessChanges|TestAdminListener'             # reliability
on_topology+='|TestOperatorCommands|TestToolCommandGoesThroughTheOwner'               # cmd/agentfy
on_topology+=')$'
# These stages mostly wait (0.4–0.7 of two cores each, one after another, in a run
# that had them so): they run one after another beside the reliability suite (0.6),
# which is as long as all of them.
waiting_group() {
  step "dashboard and alerts against a running stack (deploy/monitoring)" \
    go test -count=1 -timeout 10m ./deploy/monitoring || return
  local topology
  for topology in cluster sentinel; do
    step "on a Redis $topology: end-to-end, route-table, grant and CLI tests" \
      env AGENTFY_TEST_REDIS=$topology go test -count=1 -timeout 10m -run "$on_topology" ./e2e ./api ./reliability ./cmd/agentfy || return
  done
  step "web app and SDK" scripts/test-web.sh
}
beside "the reliability suite" "the dashboards, both Redis topologies and the web app, one after another" waiting_group
stage "reliability suite"
go test -count=1 -timeout 15m ./reliability
stage "waiting for the stages beside the reliability suite"
beside_wait 1
# Budgets are execution counts (about 10 s each on a 2-core machine), not durations: a
# duration -fuzztime races Go's fuzz coordinator at its deadline and fails a clean run
# with "context deadline exceeded" on a loaded machine (go.dev/issue/75804, fixed in
# Go 1.27; CI saw it on FuzzSealedFastPath). A count has no deadline to race.
stage "fuzzing, about 10 s per target"
for target in "FuzzOpen ./envelope 300000" "FuzzParse ./jsonrpc 100000" "FuzzConsumeBody ./api 20000" "FuzzParsePage ./wire 150000"; do
  set -- $target
  go test -run='^$' -fuzz="^$1\$" -fuzztime="$3x" -timeout 5m "$2"
done
stage "waiting for the compose stack"
beside_wait 0
