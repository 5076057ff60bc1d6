# syntax=docker/dockerfile:1
# The echelon image, for those who build with Docker (BuildKit):
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.3.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) -t echelon:0.3.0 .
#
# `make image` builds the same image without a container engine (hack/image):
# the binary alone at /echelon, built static with -trimpath, /tmp, user
# 65532:65532, the same entrypoint and labels. test/image checks that this file
# and hack/image agree.

# The Go toolchain is part of what makes the binary: with the version `make
# image` uses (`go version`), both builds put the same binary in the image.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOAMD64=v1 GOARM64=v8.0 GOFLAGS= \
    go build -trimpath -buildvcs=false -mod=readonly \
      -ldflags="-s -w -buildid= -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/echelon . \
 && mkdir -m 1777 /out/tmp

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build --chmod=0755 /out/echelon /echelon
COPY --from=build /out/tmp /tmp
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/echelon"]
LABEL org.opencontainers.image.title="echelon" \
      org.opencontainers.image.description="Echelon rolls out groups of StatefulSets, one StatefulSet at a time." \
      org.opencontainers.image.source="https://github.com/echelon-operator/echelon" \
      org.opencontainers.image.url="https://github.com/echelon-operator/echelon" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
