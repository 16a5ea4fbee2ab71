# watchjournal: make demo (the main job), make test (every test, the real
# kube-apiserver ones included), make bench (benchmarks, not part of test).

include controlplane.mk

GO        ?= go
BIN       := $(CURDIR)/.cache/bin
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build test vet demo clean

all: build

## build: the journalctl CLI into .cache/bin/journalctl
build:
	$(GO) build -o $(BIN)/journalctl ./cmd/journalctl

## vet: go vet and gofmt on the main module
vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

## test: builds the local control plane if needed, then runs all tests;
## tests that need kube-apiserver fail (not skip) when it is missing.
test: controlplane vet
	WATCHJOURNAL_REQUIRE_CONTROLPLANE=1 $(GO) test $(TESTFLAGS) ./...

## demo: a local control plane, journalctl watching it through a 410 and a
## restart, and journalctl showing the result.
demo: controlplane build
	$(GO) run ./internal/demo -journalctl $(BIN)/journalctl

clean:
	rm -rf .cache
