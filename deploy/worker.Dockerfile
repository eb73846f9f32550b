# The ordinary worker container: the tool channel client. It has no browser and never
# sees a frame in clear; with the broker's socket in AGENTFY_IPC_DIR it relays views.
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

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentfy-worker /usr/local/bin/agentfy-worker
COPY --from=build --chown=65532:65532 /out/run /run
USER nonroot
ENTRYPOINT ["/usr/local/bin/agentfy-worker"]
