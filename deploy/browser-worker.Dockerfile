# The browser worker image: the broker and Debian's Chromium. Publish it under an
# immutable tag (AGENTFY_BROWSER_IMAGE_TAG) before deploying the API that uses it.
FROM golang:1.26-bookworm AS build
LABEL agentfy.stage=build
WORKDIR /src
COPY go.mod go.sum deploy/build-deps.txt ./
# The modules, and their packages that the binaries link compiled into the build cache
# (deploy/build-deps.txt, checked by deploy/images_test.go): a layer that changes only
# with go.mod and that list, so a change of this repository's code compiles its own
# packages alone.
RUN go mod download && CGO_ENABLED=0 go build -trimpath $(cat build-deps.txt)
COPY . .
# The same stage, word for word, in every image of the stack: the layer cache then builds
# the binaries once for all four images.
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/agentfy-api ./cmd/agentfy ./cmd/agentfy-worker ./cmd/agentfy-broker ./cmd/agentfy-dev \
 && mkdir -p /out/run/agentfy/worker-pass /out/run/agentfy/broker-pass /out/run/agentfy/ipc /out/run/agentfy/secrets \
      /out/run/agentfy/jwt /out/run/agentfy/out/nats /out/run/agentfy/out/redis /out/run/agentfy/out/replica \
      /out/run/agentfy/out/operator /out/run/agentfy/out/debug /out/run/agentfy/out/audit /out/run/agentfy/out/system /out/run/agentfy/out/jwt

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-dejavu-core ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --uid 65532 broker \
 && mkdir -p /run/agentfy/ipc /run/agentfy/broker-pass \
 && chown -R broker:broker /run/agentfy
COPY --from=build /out/agentfy-broker /usr/local/bin/agentfy-broker
USER broker
ENV AGENTFY_CHROMIUM=/usr/bin/chromium
ENTRYPOINT ["/usr/local/bin/agentfy-broker"]
