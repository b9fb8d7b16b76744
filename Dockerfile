# tailgate's image: one static binary on distroless, running as non-root.
#   make image                       (docker build; the tag is internal/version's Version)
#   docker run --rm ghcr.io/tailgate-llm/tailgate:0.1.0 version
# The build stage fetches modules through the Go module proxy (GOPROXY,
# proxy.golang.org by default). CGO_ENABLED=0: the binary is static, so the
# final stage needs no libc; the NVML sampler (cgo) falls back to "no GPU
# telemetry" in this build; build with cgo on a GPU host for NVML.
# The revision goes in with -ldflags (tailgate version, tailgate_build_info):
# the build context has no .git (see .dockerignore).

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG REVISION=unknown
RUN go build -ldflags "-s -w -X github.com/tailgate-llm/tailgate/internal/version.revision=${REVISION}" -o /out/tailgate ./cmd/tailgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tailgate /usr/local/bin/tailgate
# distroless's nonroot user, numeric so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/tailgate"]
