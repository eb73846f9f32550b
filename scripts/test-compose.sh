#!/usr/bin/env bash
# The compose test: runs the compose commands of docs/operating.md ("Containers") for real
# and checks the stack as a user and an operator would. Part of the test command
# (scripts/test.sh).
#   1. installs docker.io and docker-compose (apt-get, as root) when missing, and starts
#      dockerd when none runs (and stops only what it started);
#   2. base images: pulled, or stand-ins where no registry answers (compose-images.sh);
#   3. the documented commands: up --build, then a member's token and a partner's key
#      minted through the stack;
#   4. from the host through the published ports: both routes return a live frame that
#      decodes as a JPEG (deploy/composecheck), the member's view is one trace in Jaeger
#      (the replicas', the worker's and the broker's spans in one tree, read from its
#      query API on the published port), and the web app's window shows a frame in
#      Chromium (a screenshot in .artifacts/compose-web-app.png);
#      then the containers' privileges (docker inspect: no Linux capability, no-new-privileges,
#      read-only roots, the browser's seccomp profile) and, from /proc inside the
#      browser's, Chromium's sandbox: every renderer under its own seccomp filter in
#      user and PID namespaces of its own, no --no-sandbox, no uid 0 (deploy/compose_test.go);
#   5. from a throw-away container on the worker's network, TCP to Redis and NATS fails;
#      from one on the replicas' network it succeeds (the control); from one on the
#      telemetry network, Jaeger's query port is shut and its span receiver open;
#   6. each replica stopped in turn (the worker's first, then the other): frames again
#      through the one left within 30 s — the worker moves, the broker redeems through it;
#   7. faults while a viewer polls (deploy/composecheck -fault): NATS restarted, Redis
#      restarted, the broker and the worker crashed (their process SIGKILLed): never
#      {"live":false}, a 404 or a 401, and live again on their own (health checks,
#      restart:) within 90 s, each printing its bound; the restarted broker's Chromium
#      sandboxed again;
#   8. down -v leaves no container, network or volume of the project.
# Containers talk only on the networks this test made.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "compose-test: $*" >&2; }
started=$(date +%s)
tmp=$(mktemp -d)

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}"; exit 1
  fi
  say "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

dockerd_pid=""
if ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: $tmp/dockerd.log)"
  dockerd >"$tmp/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 "$tmp/dockerd.log" >&2; exit 1; }
fi

# Compose v2 where it is installed, else Debian's v1: the same commands either way.
if docker compose version >/dev/null 2>&1; then compose() { docker compose "$@"; }; else compose() { docker-compose "$@"; }; fi
export COMPOSE_PROJECT_NAME=agentfy-test
project=$COMPOSE_PROJECT_NAME

cleanup() {
  status=$?
  if [ $status -ne 0 ]; then
    say "failed; the services' last log lines:"
    compose logs --tail=30 >&2 2>&1 || true
  fi
  compose --profile cli down -v --remove-orphans >/dev/null 2>&1 || compose down -v --remove-orphans >/dev/null 2>&1 || true
  # The build stages' images, which only take room.
  docker image prune -f --filter label=agentfy.stage=build >/dev/null 2>&1 || true
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  exit $status
}
trap cleanup EXIT

scripts/compose-images.sh

# The build stage every image shares (deploy/*.Dockerfile, word for word), built first
# and tagged: the cleanup's prune removes only untagged build images, so the next run
# finds this one's layers (the modules downloaded, the binaries built) and rebuilds
# nothing when go.mod, go.sum and the sources did not change. One stage is kept, the
# latest: the one a changed source replaces is untagged, and pruned. Should this fail,
# `up --build` below builds the stage as ever.
docker build -q --target build -t agentfy/build-stage:latest -f deploy/api.Dockerfile . >/dev/null \
  || say "the shared build stage was not built ahead (up --build builds it)"

# --- The documented commands (docs/operating.md, "Containers"), `compose` being `docker compose` ---
export AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1
compose up -d --build
TOKEN=$(compose run --rm cli token -user u-alice)
ORG_KEY=$(compose run --rm cli orgkey -org org-acme -env production)
# ---
TOKEN=${TOKEN%$'\r'} ORG_KEY=${ORG_KEY%$'\r'} # a terminal's line ends, if run from one

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$(compose ps -q "$1")"; }
for svc in api-a api-b worker; do
  for _ in $(seq 1 90); do [ "$(health "$svc")" = healthy ] && break; sleep 1; done
  [ "$(health "$svc")" = healthy ] || { say "$svc is $(health "$svc")"; exit 1; }
done
say "up and healthy after $(( $(date +%s) - started )) s"

say "both routes, from the host; the member's view as one trace in Jaeger"
go run ./deploy/composecheck -url http://127.0.0.1:8080 -token "$TOKEN" -key "$ORG_KEY" -wait 120s \
  -jaeger http://127.0.0.1:16686

say "privileges: every container as the compose file says; Chromium's renderers in its sandbox"
# deploy/compose_test.go: docker inspect of every container of the project (no
# Linux capability, no-new-privileges, read-only root, the browser's seccomp profile), and
# /proc inside the browser's (no --no-sandbox, no uid 0, every renderer under a seccomp
# filter of Chromium's own in user and PID namespaces of its own).
AGENTFY_COMPOSE_PROJECT=$project go test -v -count=1 -run '^TestRunningStack' ./deploy

say "the web app, as a person sees it"
mkdir -p .artifacts
(cd web && [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error)
node web/scripts/screenshot.mjs "http://127.0.0.1:8080/#/agents/agent-scout/worker?token=$TOKEN" .artifacts/compose-web-app.png

say "networks: the worker's cannot reach Redis or NATS; the replicas' can"
ip_of() { docker inspect -f "{{(index .NetworkSettings.Networks \"${project}_${2:-backend}\").IPAddress}}" "$(compose ps -q "$1")"; }
redis_ip=$(ip_of redis)
nats_ip=$(ip_of nats)
probe() { # probe NETWORK HOST PORT: exit 0 when a TCP connection opens within 3 s
  docker run --rm --network "$1" --entrypoint bash "agentfy/browser-worker:$AGENTFY_BROWSER_IMAGE_TAG" \
    -c "timeout 3 bash -c '</dev/tcp/$2/$3'" >/dev/null 2>&1
}
for target in "$redis_ip 6379" "$nats_ip 4222"; do
  set -- $target
  if probe "${project}_edge" "$1" "$2"; then say "the worker's network reaches $1:$2"; exit 1; fi
  probe "${project}_backend" "$1" "$2" || { say "control: the replicas' network does not reach $1:$2"; exit 1; }
done
say "networks: the parts send spans to Jaeger but cannot read a trace back"
jaeger_ip=$(ip_of jaeger telemetry)
if probe "${project}_telemetry" "$jaeger_ip" 16686; then say "the telemetry network reaches Jaeger's query port"; exit 1; fi
probe "${project}_telemetry" "$jaeger_ip" 4318 || { say "control: the telemetry network does not reach Jaeger's receiver"; exit 1; }

say "failover: stop api-b, which holds the worker's socket; then api-a, with api-b back"
compose logs worker | grep -q '"api":"http://api-b:8080".*"tool channel open"' || { say "the worker is not on api-b"; exit 1; }
compose stop api-b >/dev/null
go run ./deploy/composecheck -url http://127.0.0.1:8080 -token "$TOKEN" -key "$ORG_KEY" -wait 30s
compose start api-b >/dev/null
for _ in $(seq 1 60); do [ "$(health api-b)" = healthy ] && break; sleep 1; done
compose stop api-a >/dev/null
go run ./deploy/composecheck -url http://127.0.0.1:8081 -token "$TOKEN" -key "$ORG_KEY" -wait 30s
compose start api-a >/dev/null
for _ in $(seq 1 60); do [ "$(health api-a)" = healthy ] && break; sleep 1; done

say "faults while a viewer polls: never live:false, frames again on their own"
if docker compose version >/dev/null 2>&1; then compose_cmd="docker compose"; else compose_cmd="docker-compose"; fi
# A crash is a SIGKILL of the container's process from outside, as the OOM killer's: the
# restart policy brings the container back. (`compose kill` is a manual stop, which the
# restart policy ignores by design.)
crash() { echo "kill -9 \$(docker inspect -f '{{.State.Pid}}' $(compose ps -q "$1"))"; }
# The broker's crash last: its new Chromium has no tab until the agent opens one, and the
# faults before it wait for a frame.
for fault in "$compose_cmd restart nats" "$compose_cmd restart redis" "$(crash worker)" "$(crash browser)"; do
  go run ./deploy/composecheck -url http://127.0.0.1:8080 -token "$TOKEN" -key "$ORG_KEY" -wait 90s \
    -fault "$fault >/dev/null 2>&1"
done

say "the restarted broker's Chromium in its sandbox too"
AGENTFY_COMPOSE_PROJECT=$project go test -v -count=1 -run '^TestRunningStackChromiumSandbox$' ./deploy

say "down -v"
compose --profile cli down -v --remove-orphans >/dev/null
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project"; docker network ls -q --filter "label=com.docker.compose.project=$project"; docker volume ls -q --filter "label=com.docker.compose.project=$project")
[ -z "$left" ] || { say "left behind: $left"; exit 1; }
say "passed in $(( $(date +%s) - started )) s"
echo "compose: 1 passed, 0 failed"
