# tailgate — see README.md.
GO       ?= go
BIN      := bin/tailgate
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# go-nvml needs cgo; this quiets its deprecated-API warnings.
export CGO_CFLAGS ?= -Wno-deprecated-declarations

.PHONY: all build test unit fmt-check vet demo bench bench-peers fuzz clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/tailgate

# The README's test command: formatting, vet, every test with the race
# detector, then the end-to-end timing-accuracy tests and the tests held
# against the simulator's capacity alone without it (the detector slows
# client and simulator 5-10x, which they would measure).
# Packages run one at a time (-p 1): many tests time real streams, and two
# packages' simulators fighting over two cores made them flaky.
test: fmt-check vet
	$(GO) test -race -count=1 -p 1 -timeout 20m ./...
	$(GO) test -count=1 -timeout 10m -v -run 'Accuracy|Omission|TraceReplay' ./e2e/
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(GO) test -count=1 -timeout 10m -p 1 -run 'SLOMax|MetricTheater|CompareSeed|SweepCommand' ./capacity/ ./theater/ ./cmd/tailgate/

unit:
	$(GO) test -count=1 ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

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
	$(GO) test -run '^$$' -bench 'Stream' -benchmem -count 1 ./sim/

# tailgate beside wrk, hey and a no-parse stream reader on this machine, in
# one run: one table of ratios (installs wrk and hey when missing).
bench-peers: build
	./scripts/bench-peers.sh

# Short fuzzing of every parser (FUZZTIME each).
FUZZTIME ?= 10s
fuzz:
	@for spec in $$($(GO) test -list '^Fuzz' ./... 2>/dev/null | awk '/^ok/{pkg=$$2} /^Fuzz/{print pkg":"$$1}' ); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "fuzz $$pkg $$fn"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1 $$pkg || exit 1; \
	done

clean:
	rm -rf bin demo-out
