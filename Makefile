# watchjournal: make demo (the main job), make test (every test, the real
# kube-apiserver ones included), make bench (benchmarks, not part of test).

include controlplane.mk

GO        ?= go
BIN       := $(CURDIR)/.cache/bin
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build test vet demo clean fuzz cluster

all: build

## build: the journalctl CLI into .cache/bin/journalctl, and the example
## operator (examples/operator) into .cache/bin/example-operator
build:
	$(GO) build -o $(BIN)/journalctl ./cmd/journalctl
	$(GO) build -o $(BIN)/example-operator ./examples/operator

## vet: go vet and gofmt on the main module
vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

## test: builds the local control plane if needed, then runs all tests;
## tests that need kube-apiserver fail (not skip) when it is missing.
test: controlplane vet fuzz
	WATCHJOURNAL_REQUIRE_CONTROLPLANE=1 $(GO) test $(TESTFLAGS) ./...

## fuzz: each fuzz target for a short fixed budget of executions (about
## 10 s each here). A count, not a duration: with -fuzztime 10s, Go's fuzz
## coordinator can fail with "context deadline exceeded" when the time runs
## out while a worker is still minimizing a new input.
FUZZ_DECODE ?= 200000x
FUZZ_DIFF ?= 50000x
fuzz:
	$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZ_DECODE)
	$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeIndex$$' -fuzztime $(FUZZ_DECODE)
	$(GO) test ./reconcile -run '^$$' -fuzz '^FuzzDiff$$' -fuzztime $(FUZZ_DIFF)

## demo: a local control plane, journalctl watching it through a 410 and a
## restart, and journalctl showing the result.
demo: controlplane build
	$(GO) run ./internal/demo -journalctl $(BIN)/journalctl

## cluster: a local control plane that keeps running until Ctrl-C, to try
## journalctl against; it prints the KUBECONFIG to export.
cluster: controlplane build
	$(GO) run ./internal/cluster

clean:
	rm -rf .cache

## bench: the in-process journal benchmarks (go test -bench, BENCH_TIME
## each), then bench/cmd/benchharness against a local control plane with
## BENCH_N ConfigMaps (comma-separated for several sizes, ascending);
## prints one table and writes BENCHMARKS.md. Not part of test. Set
## BENCH_PPROF=dir for the children's CPU and heap profiles.
BENCH_N    ?= 50000
BENCH_TIME ?= 1s
.PHONY: bench
bench: controlplane
	@mkdir -p $(CURDIR)/.cache/bench
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./bench/ > $(CURDIR)/.cache/bench/gobench.txt || { cat $(CURDIR)/.cache/bench/gobench.txt; exit 1; }
	@cat $(CURDIR)/.cache/bench/gobench.txt
	$(GO) build -buildvcs=auto -o $(BIN)/benchharness ./bench/cmd/benchharness
	BENCH_N=$(BENCH_N) BENCH_COMMAND="make bench BENCH_N=$(BENCH_N)" $(BIN)/benchharness -gobench $(CURDIR)/.cache/bench/gobench.txt -json $(CURDIR)/.cache/bench/results.json -out $(CURDIR)/BENCHMARKS.md
