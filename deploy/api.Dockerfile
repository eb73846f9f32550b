# The API replica and the operator CLI.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/agentfy-api ./cmd/agentfy-api \
 && CGO_ENABLED=0 go build -trimpath -o /out/agentfy ./cmd/agentfy \
 && mkdir -p /out/run/agentfy/worker-pass /out/run/agentfy/broker-pass

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentfy-api /out/agentfy /usr/local/bin/
COPY testdata/directory.json /testdata/directory.json
# Mount points owned by the runtime user: new volumes take their ownership, so the
# session job can write the passes as nonroot.
COPY --from=build --chown=65532:65532 /out/run /run
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/agentfy-api"]
