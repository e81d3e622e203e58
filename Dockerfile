# tallyd's container image: static binaries on an empty base, run as a non-root user, the
# data in the /data volume (docs/operations.md, "Container image").
#
#   docker build -t tallyd .        (or podman build)
#   make image                      (the same image from bin/, without a daemon: an OCI
#                                    archive in out/image/tallyd.oci.tar)
#
# `make image` reads this file's final stage for the image's settings, so keep that stage to
# COPY and the settings (exec-form JSON lists; no RUN, the image has no shell).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /rootfs/usr/local/bin/tallyd . && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /rootfs/usr/local/bin/tallyctl ./cmd/tallyctl && \
    install -D -m 0644 deploy/image/passwd /rootfs/etc/passwd && \
    install -D -m 0644 deploy/image/group /rootfs/etc/group && \
    install -d -m 0700 -o 65532 -g 65532 /rootfs/data && \
    install -d -m 1777 /rootfs/tmp

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
WORKDIR /data
# 11215 counter, 11216 semaphore, 7531 PoolCounter, 5658 slock (and Redis text), 9715
# metrics with /healthz and /readyz, 7000 the cluster's peer port (members only).
EXPOSE 11215 11216 7531 5658 9715 7000
VOLUME ["/data"]
ENV TALLYD_METRICS_ADDR=127.0.0.1:9715
LABEL org.opencontainers.image.title=tallyd \
      org.opencontainers.image.source=https://github.com/tallyd/tallyd \
      org.opencontainers.image.documentation=https://github.com/tallyd/tallyd/blob/main/docs/operations.md
STOPSIGNAL SIGTERM
# tallyctl health asks the metrics port's /readyz: 0 when this member can acknowledge writes.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["/usr/local/bin/tallyctl", "health"]
ENTRYPOINT ["/usr/local/bin/tallyd"]
# Every listener on every address, clients from loopback and the private networks containers
# and pods use (protected mode would take loopback only); narrow --allow to your own.
CMD ["--bind", "0.0.0.0", "--allow", "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7", "--data-dir", "/data", "--metrics-addr", "0.0.0.0:9715", "--semaphore-port", "11216"]
