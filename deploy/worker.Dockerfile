# The ordinary worker container: the tool channel client. It has no browser and never
# sees a frame in clear; with the broker's socket in AGENTFY_IPC_DIR it relays views.
FROM golang:1.26-bookworm AS build
LABEL agentfy.stage=build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/agentfy-worker ./cmd/agentfy-worker \
 && mkdir -p /out/run/agentfy/ipc /out/run/agentfy/worker-pass

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentfy-worker /usr/local/bin/agentfy-worker
COPY --from=build --chown=65532:65532 /out/run /run
USER nonroot
ENTRYPOINT ["/usr/local/bin/agentfy-worker"]
