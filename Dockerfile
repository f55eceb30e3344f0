# syntax=docker/dockerfile:1
#
# keyheat's two commands, ingest and detect, in one small image:
#
#   docker build -t keyheat/keyheat:dev .
#   docker run --rm keyheat/keyheat:dev detect run --help
#
# The builder's Go version is go.mod's; deploy/compose_test.go fails when
# they differ.

FROM --platform=$BUILDPLATFORM golang:1.26.8 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries (no cgo), without local paths or symbol tables. The
# archive folder is made here because the final stage has no shell: a
# named volume mounted on it starts with its owner, the non-root user.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/bin/ ./cmd/ingest ./cmd/detect && \
    mkdir -p /out/keyheat/archive

# distroless static: CA certificates, tzdata and a non-root user, no
# package manager. The debug variant adds busybox under /busybox/ (about
# 1 MB), whose wget is what the healthchecks of docker-compose.yml call
# /readyz with: neither binary has a subcommand that does.
FROM gcr.io/distroless/static-debian13:debug-nonroot
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/keyheat/ /var/lib/keyheat/
USER 65532:65532
# The debug variant's entrypoint is a shell; the command names the binary.
ENTRYPOINT []
CMD ["detect", "--help"]
