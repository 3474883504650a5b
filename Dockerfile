# Multi-stage build of both Flotilla binaries into one small, non-root image.
#   docker build -t flotilla:dev .
# The hub runs as `/hub`, the agent as `/agent` (see manifests/).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w -X github.com/flotilla-io/flotilla/pkg/version.Version=${VERSION} -X github.com/flotilla-io/flotilla/pkg/version.GitCommit=${COMMIT}" -o /out/hub ./hub && \
    go build -trimpath -ldflags "-s -w -X github.com/flotilla-io/flotilla/pkg/version.Version=${VERSION} -X github.com/flotilla-io/flotilla/pkg/version.GitCommit=${COMMIT}" -o /out/agent ./agent

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hub /out/agent /
USER 65532:65532
ENTRYPOINT ["/hub"]
