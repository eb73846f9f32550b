#!/usr/bin/env bash
# The base images the compose stack names (Dockerfiles and services): pulled where a
# registry answers, and otherwise — on machines that reach no container registry, like
# this project's CI — made locally as stand-ins under the same names, from Debian's
# packages (debootstrap) and this machine's Go toolchain. An image that exists already
# is left alone (but a stand-in older than its revision, agentfy.standin.rev), so on a
# user's machine the real images are used and no stand-in is ever built. Stand-ins
# carry the label agentfy.standin=1.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "compose-images: $*" >&2; }
have() { docker image inspect "$1" >/dev/null 2>&1; }
pull() { timeout 120 docker pull -q "$1" >/dev/null 2>&1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The host's CA bundle: outbound HTTPS may pass a TLS-inspecting proxy whose root only
# the host trusts (the Go module proxy from inside a build needs it).
ca=/etc/ssl/certs/ca-certificates.crt
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}

standin_debian() {
  local name=debian:bookworm-slim
  have "$name" && return
  pull "$name" && return
  say "making $name from debootstrap (minbase, $mirror)"
  command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  local root="$work/rootfs"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || { mkdir -p "$root/etc/ssl/certs"; cp "$ca" "$root/etc/ssl/certs/"; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change 'CMD ["bash"]' --change 'LABEL agentfy.standin=1' - "$name" >/dev/null
  rm -rf "$root"
}

standin_golang() {
  local name=golang:1.26-bookworm
  have "$name" && return
  pull "$name" && return
  say "making $name from debian:bookworm-slim and this machine's Go ($(go version | cut -d' ' -f3))"
  local ctx="$work/golang"
  mkdir -p "$ctx"
  tar -C "$(go env GOROOT)" -czf "$ctx/go.tgz" --exclude='./pkg/obj' --exclude='./.git' .
  cp "$ca" "$ctx/ca-certificates.crt"
  cat >"$ctx/Dockerfile" <<'EOF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ADD go.tgz /usr/local/go
ENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL agentfy.standin=1
WORKDIR /go
EOF
  docker build -q -t "$name" "$ctx" >/dev/null
}

standin_distroless() {
  local name=gcr.io/distroless/static-debian12:nonroot
  have "$name" && return
  pull "$name" && return
  say "making $name (passwd with nonroot 65532, CA bundle, /tmp)"
  local root="$work/distroless"
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
  cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
  chown 65532:65532 "$root/home/nonroot"
  tar -C "$root" -c . | docker import --change 'USER 65532' --change 'LABEL agentfy.standin=1' - "$name" >/dev/null
}

standin_nats() {
  local name=nats:2.10.22-alpine
  have "$name" && return
  pull "$name" && return
  say "making $name from debian:bookworm-slim and nats-server built from the module cache"
  local ctx="$work/nats"
  mkdir -p "$ctx"
  CGO_ENABLED=0 go build -trimpath -o "$ctx/nats-server" github.com/nats-io/nats-server/v2
  cat >"$ctx/Dockerfile" <<'EOF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends wget && rm -rf /var/lib/apt/lists/*
COPY nats-server /usr/local/bin/nats-server
EXPOSE 4222 8222
LABEL agentfy.standin=1
ENTRYPOINT ["nats-server"]
EOF
  docker build -q -t "$name" "$ctx" >/dev/null
}

# label IMAGE KEY: the image's label KEY, empty when it has none.
label() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }

standin_redis() {
  local name=redis:7.4-alpine
  # Revision 2 has the real image's redis user and a /data of its own: the compose file
  # runs Redis as that user (user: redis, no Linux capability). An older stand-in is remade.
  if have "$name"; then
    [ "$(label "$name" agentfy.standin)" = 1 ] || return 0
    [ "$(label "$name" agentfy.standin.rev)" = 2 ] && return
    say "remaking the stand-in $name (revision 2: Redis as the redis user, /data its own)"
    docker image rm "$name" >/dev/null 2>&1 || true
  elif pull "$name"; then
    return
  fi
  say "making $name from debian:bookworm-slim and Debian's redis-server"
  local ctx="$work/redis"
  mkdir -p "$ctx"
  cat >"$ctx/Dockerfile" <<'EOF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/* \
 && mkdir /data && chown redis:redis /data
WORKDIR /data
EXPOSE 6379
LABEL agentfy.standin=1 agentfy.standin.rev=2
CMD ["redis-server", "--protected-mode", "no"]
EOF
  docker build -q -t "$name" "$ctx" >/dev/null
}

standin_jaeger() {
  local name=jaegertracing/jaeger:2.12.0
  have "$name" && return
  pull "$name" && return
  say "making $name from the distroless stand-in and Jaeger v1.75.0/v2.12.0 built from source (internal/tools/jaeger)"
  local ctx="$work/jaeger"
  mkdir -p "$ctx"
  # The tests' own build (servers.BuildJaeger, static): built once, cached, a copy here.
  cp "$(go run ./internal/dev/toolbin jaeger)" "$ctx/jaeger-linux"
  # The release image's layout, user and entrypoint. Its UI is Jaeger's placeholder page:
  # the UI's assets are built apart (jaeger-ui, Node) and embedded only in releases; the
  # query API (/api/traces) is whole.
  cat >"$ctx/Dockerfile" <<'EOF'
FROM gcr.io/distroless/static-debian12:nonroot
COPY jaeger-linux /cmd/jaeger/jaeger-linux
ENV JAEGER_LISTEN_HOST=0.0.0.0
EXPOSE 4317 4318 16686
LABEL agentfy.standin=1
USER 10001
ENTRYPOINT ["/cmd/jaeger/jaeger-linux"]
EOF
  docker build -q -t "$name" "$ctx" >/dev/null
}

standin_debian
standin_golang
standin_distroless
standin_nats
standin_redis
standin_jaeger
say "base images ready"
