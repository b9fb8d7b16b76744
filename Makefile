# tailgate — see README.md.
GO       ?= go
BIN      := bin/tailgate
# The version has one home, internal/version (CHANGELOG.md names it too);
# the image's tag reads it from there.
VERSION  := $(shell sed -n 's/^const Version = "\(.*\)"/\1/p' internal/version/version.go)
# The revision goes in by -ldflags: builds here run with GOFLAGS=-buildvcs=false,
# so the toolchain's vcs.revision stamp is absent (tailgate_build_info{revision}).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/tailgate-llm/tailgate/internal/version.revision=$(REVISION)
# go-nvml needs cgo; this quiets its deprecated-API warnings.
export CGO_CFLAGS ?= -Wno-deprecated-declarations

BENCH_STEPS ?= plain,streamed,ttft,lag,memory,grpc

.PHONY: all build image test test-short test-timing unit fmt-check vet lint demo bench bench-peers scale-65k fuzz clean proto proto-check proto-plugins ollama

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/tailgate

# The container image (Dockerfile: static binary on distroless, non-root).
# deploy/kubernetes's TestDockerfile checks the file, and builds it where
# a docker daemon answers.
IMAGE ?= ghcr.io/tailgate-llm/tailgate:$(VERSION)
image:
	docker build --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# The README's test command: formatting, vet, every test with the race
# detector, then the end-to-end timing-accuracy tests, the tests against a
# real Ollama (e2e/ollama: skipped without `make ollama`, required in CI),
# the waiting stream's stack budget (without the race detector, whose
# frames are larger) and the timing tests (test-timing).
# The race pass runs two packages at a time (-p 2). The tests that time
# real streams live in the timing files, which test-timing runs one package
# at a time without the race detector: two packages' simulators fighting
# over two cores made them flaky.
test: fmt-check vet lint
	$(GO) test -race -count=1 -p 2 -timeout 20m ./...
	$(GO) test -count=1 -timeout 10m -v -run 'Accuracy|Omission|TraceReplay' ./e2e/
	$(GO) test -count=1 -run 'StackBudget' ./loadgen/openai/
	$(GO) test -count=1 -timeout 15m -v ./e2e/ollama/
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) test-timing

# The inner loop: every package's tests without the race detector, in
# parallel, with -short skipping the end-to-end packages, the load runs of
# whole commands and promtool. `make test` stays the gate. Without cgo every
# test binary links internally (cgo's external link of each binary was the
# loop's largest cost); the NVML path it leaves out is tested by `make
# test`, and vet runs there too.
test-short:
	CGO_ENABLED=0 $(GO) test -short -count=1 -vet=off ./...

# Tests held against the simulator's model or its clock, in files tagged
# `//go:build timing && !race`: without the race detector, which slows
# client and simulator 5-10x and which they would measure. Each package
# runs only the tests of its tagged files (the rest ran in the race pass).
test-timing:
	@rc=0; for pkg in $$(grep -rl --include='*_test.go' '^//go:build timing' . | xargs -n1 dirname | sort -u); do \
		tests=$$(grep -l '^//go:build timing' $$pkg/*_test.go | xargs sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' | paste -sd'|'); \
		echo "test-timing $$pkg: $$tests"; \
		$(GO) vet -tags timing $$pkg && \
		$(GO) test -tags timing -count=1 -timeout 15m -run "^($$tests)$$" $$pkg || rc=1; \
	done; exit $$rc

# Ollama from the Go module proxy, for e2e/ollama (cached: once per
# machine; see scripts/ollama.sh).
ollama:
	./scripts/ollama.sh build

unit:
	$(GO) test -count=1 ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Static checks beyond vet, by golangci-lint at a pinned version fetched
# through the module proxy (go run pkg@version keeps it out of go.mod); the
# linters and their settings are .golangci.yml's: errorlint -errorf,
# staticcheck's own defaults, revive's exported-doc and stutter rules,
# misspell, unparam, depguard, unused and ineffassign. go.mod and go.sum must
# be as go mod tidy leaves them.
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint:
	$(GO) mod tidy -diff
	$(GO) run $(GOLANGCI_LINT) run ./...

# The README's first command: start the simulator, replay a prompt mix
# against it, run an acceptance validate, print the reports.
demo: build
	./scripts/demo.sh $(BIN)

# Engine capacity and schedule lag against the simulator at zero delay
# (same process; TAILGATE_BENCH_TARGET=URL points them at a separate
# `tailgate sim`), then the stream parser and the simulator on their own.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 20m ./bench/
	$(GO) test -run '^$$' -bench 'ParseStream|DoHTTP|DecodeEvent' -benchmem -count 1 ./loadgen/openai/
	$(GO) test -run '^$$' -bench 'DecodeStream' -benchmem -count 1 ./loadgen/kserve/
	$(GO) test -run '^$$' -bench 'Stream' -benchmem -count 1 ./sim/
	$(GO) test -run '^$$' -bench 'WaitingSessions|DependentLag' -benchtime 1x -count 1 ./loadgen/

# tailgate beside wrk, hey and a no-parse stream reader on this machine, in
# one run: one table of ratios (docs/performance.md). Installs nothing:
# without wrk or hey it says what to install; BENCH_STEPS picks the steps.
bench-peers: build
	BENCH_STEPS=$(BENCH_STEPS) ./scripts/bench-peers.sh

# 65,536 concurrent streams as four shards of 16,384, each its own client
# and simulator process, merged (docs/performance.md).
scale-65k: build
	./scripts/scale-65k.sh

# Short fuzzing of every parser (FUZZTIME each).
FUZZTIME ?= 10s
fuzz:
	@for spec in $$($(GO) test -list '^Fuzz' ./... 2>/dev/null | awk '/^ok/{pkg=$$2} /^Fuzz/{print pkg":"$$1}' ); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "fuzz $$pkg $$fn"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1 $$pkg || exit 1; \
	done

# Generated Go for the KServe v2 gRPC protocol (loadgen/kserve/inferencepb).
# The code is committed, so a build needs no protoc; `make proto` rebuilds
# it with protoc (Debian: protobuf-compiler) and these plugin versions,
# installed from the Go module proxy into bin/. `make proto-check` (CI)
# fails when the committed code is not what they generate; only the
# protoc version comment may differ.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1
PROTO_DIR   := loadgen/kserve/inferencepb
PROTO_FILES := $(PROTO_DIR)/inference.proto
PLUGIN_BIN  := $(CURDIR)/bin/protoc-plugins

proto-plugins:
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	GOBIN=$(PLUGIN_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(PLUGIN_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# protoc-gen-go-grpc keeps only what the file needs: the client and server.
proto: proto-plugins
	PATH=$(PLUGIN_BIN):$$PATH protoc -I $(PROTO_DIR) \
		--go_out=paths=source_relative:$(PROTO_DIR) \
		--go-grpc_out=paths=source_relative:$(PROTO_DIR) $(PROTO_FILES)

proto-check: proto-plugins
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	PATH=$(PLUGIN_BIN):$$PATH protoc -I $(PROTO_DIR) \
		--go_out=paths=source_relative:$$tmp --go-grpc_out=paths=source_relative:$$tmp $(PROTO_FILES) || exit 1; \
	for f in $$tmp/*.go; do \
		g=$(PROTO_DIR)/$$(basename $$f); \
		if ! diff -u -I '^// *protoc  *v' -I '^// - protoc  *v' $$g $$f; then \
			echo "$$g is stale: run make proto and commit the result"; exit 1; fi; \
	done; \
	n=$$(ls $(PROTO_DIR)/*.pb.go | wc -l); m=$$(ls $$tmp/*.go | wc -l); \
	if [ $$n != $$m ]; then echo "$(PROTO_DIR): $$n generated files committed, protoc makes $$m"; exit 1; fi; \
	echo "proto-check: generated code is current"

clean:
	rm -rf bin demo-out
