# The browser worker image: the broker and Debian's Chromium. Publish it under an
# immutable tag (AGENTFY_BROWSER_IMAGE_TAG) before deploying the API that uses it.
FROM golang:1.26-bookworm AS build
LABEL agentfy.stage=build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/agentfy-broker ./cmd/agentfy-broker

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
