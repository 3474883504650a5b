# Flotilla's image from a Dockerfile: the same image `make image` builds
# (hack/image; docs/install.md#image), for builders that want a Dockerfile.
# No network and no base image: it copies the static binaries `make build`
# writes (bin/hub, bin/agent: hack/image's go build flags) and the files of
# hack/image/rootfs* that hack/image embeds, so the two cannot drift apart;
# TestDockerfile (hack/image) builds it with buildah and compares the two
# images file by file and their configs.
#
#   make build && docker build -t REF --build-arg VERSION=... --build-arg COMMIT=... \
#     --build-arg CREATED=... --build-arg SOURCE_DATE_EPOCH=... .
#   make image-dockerfile IMAGE=REF            # the same, with make image's values
#
# COPY --chmod needs BuildKit (Docker's default builder since 23.0),
# buildah or podman.
FROM scratch

# The labels hack/image sets (buildInfo.labels): pass what `make image`
# passes (--version, --commit) and CREATED, SOURCE_DATE_EPOCH as RFC 3339.
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG SOURCE=https://github.com/flotilla-io/flotilla
ARG CREATED=1970-01-01T00:00:00Z
# BuildKit's own: the image's created time (declared so that builders that
# do not use it, buildah, do not warn about it).
ARG SOURCE_DATE_EPOCH

# Owned by root (COPY's default), like every file of the image.
COPY --chmod=0755 bin/hub bin/agent /
COPY --chmod=0644 hack/image/rootfs/etc/passwd hack/image/rootfs/etc/group /etc/
# /tmp, empty, 1777: COPY --chmod sets the mode of what a directory holds,
# so this copies the directory that holds tmp/ (its .keep is in .dockerignore).
COPY --chmod=1777 hack/image/rootfs-tmp/ /

USER 65532:65532
WORKDIR /
ENTRYPOINT ["/hub"]
LABEL org.opencontainers.image.title="flotilla" \
      org.opencontainers.image.description="Flotilla multi-cluster failover: /hub (host cluster) and /agent (member clusters)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.created="${CREATED}"
