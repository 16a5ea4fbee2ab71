# watchjournal: make demo (the main job), make test (every test, the real
# kube-apiserver ones included), make bench (benchmarks, not part of test).

include controlplane.mk
include monitoring.mk

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
define VET
$(GO) vet ./...
@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
endef
vet:
	$(VET)

## test: builds the local control plane if needed, then runs every check
## once, in three lanes at a time (make -j3, each lane's output printed
## whole when it ends): test-plain (vet and gofmt, the fuzz targets, the
## packages outside RACE_PKGS, and the tests RACE_SKIP leaves out of the
## race run, without -race); race (RACE_PKGS under the race detector); and
## test-conformance (controller-runtime's cache conformance suite against
## jcache, then rulecheck, promtool's rule checks, on deploy/monitoring:
## monitoring.mk). The lanes share the machine's cores: most tests wait on
## a kube-apiserver more than they compute. Tests that need kube-apiserver
## fail (not skip) when it is missing; tests that need root (a
## size-limited tmpfs, a memory cgroup) fail when they cannot run, unless
## REQUIRE_PRIVILEGED=0 (then they skip and say so with -v). CI runs it as
## root, so a green run means every test ran.
REQUIRE_PRIVILEGED ?= 1
# GOTEST is go test that, when it fails, ends its output with what failed
# (the tests, the packages, and the tests running at a timeout).
GOTEST = GO=$(GO) ./scripts/gotest.sh
TESTENV := WATCHJOURNAL_REQUIRE_CONTROLPLANE=1 WATCHJOURNAL_REQUIRE_PRIVILEGED=$(REQUIRE_PRIVILEGED)
.PHONY: test test-plain test-conformance
# After the lanes, the summaries of failed go test runs (scripts/gotest.sh)
# again, so that the end of the output says what failed in any lane.
TEST_SUMMARY := $(CURDIR)/.cache/test-summary
test: controlplane
	@rm -rf $(TEST_SUMMARY)
	@GOTEST_SUMMARY=$(TEST_SUMMARY) $(MAKE) --no-print-directory -j3 --output-sync=target test-plain race test-conformance; \
	status=$$?; cat $(TEST_SUMMARY)/* 2>/dev/null; exit $$status

test-plain: controlplane
	$(VET)
	$(FUZZ)
	$(TESTENV) $(GOTEST) $(TESTFLAGS) $(PLAIN_PKGS)
	$(TESTENV) $(GOTEST) $(TESTFLAGS) -run '$(RACE_SKIP)' $(RACE_SKIP_PKGS)

test-conformance: controlplane $(RULECHECK)
	$(CONFORMANCE)
	$(MONITORING)

## race: the tests of RACE_PKGS under the race detector (part of test,
## which runs the other packages without it). RACE_SKIP names tests left
## out of it, with the reason beside it; test runs them without -race.
RACE_PKGS ?= ./journal/... ./cmd/... ./internal/... ./reconcile/... ./jcache/...
# TestLoop_LargeObjectsUnderMemoryLimit (S12, 270 MiB in pages of 500 large
# objects) is left out of the race run: slowed down by -race its first page
# outlives RequestTimeout, which bounds a whole page, and the list restarts
# at page one forever (a heavily loaded machine can do the same without
# -race). Remove it from RACE_SKIP once a page's timeout bounds progress,
# not the whole body.
RACE_SKIP ?= ^TestLoop_LargeObjectsUnderMemoryLimit$$
RACE_SKIP_PKGS ?= ./reconcile/
# PLAIN_PKGS: the module's packages the race run does not test.
PLAIN_PKGS = $(filter-out $(shell $(GO) list $(RACE_PKGS)),$(shell $(GO) list ./...))
RACEFLAGS ?= -count=1 -timeout 45m
.PHONY: race
race: controlplane
	$(TESTENV) $(GOTEST) -race $(RACEFLAGS) $(if $(RACE_SKIP),-skip '$(RACE_SKIP)') $(RACE_PKGS)

## conformance: controller-runtime v0.25.2's cache conformance suite (272
## specs, the crcache harness copied into tools/crcache, CRCACHE_RUN) against
## jcache.New on the local control plane; fails on a failed spec not listed
## in jcache/CONFORMANCE-expected-failures.txt, and on a listed spec that
## passes now. Ends with the harness's summary line.
CRCACHE_RUN ?= $(CURDIR)/tools/crcache/run.sh
.PHONY: conformance
CONFORMANCE = CRCACHE_RUN=$(CRCACHE_RUN) KUBEBUILDER_ASSETS=$(BIN) ./scripts/conformance.sh
conformance: controlplane
	$(CONFORMANCE)

## fuzz: each fuzz target for a short fixed budget of executions. A count,
## not a duration: with -fuzztime 10s, Go's fuzz coordinator can fail
## with "context deadline exceeded" when the time runs out while a worker
## is still minimizing a new input.
FUZZ_DECODE ?= 200000x
FUZZ_DIFF ?= 50000x
define FUZZ
$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZ_DECODE)
$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeEventChecksum$$' -fuzztime $(FUZZ_DIFF)
$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeIndex$$' -fuzztime $(FUZZ_DECODE)
$(GO) test ./reconcile -run '^$$' -fuzz '^FuzzDiff$$' -fuzztime $(FUZZ_DIFF)
$(GO) test ./reconcile -run '^$$' -fuzz '^FuzzProtoFrame$$' -fuzztime $(FUZZ_DIFF)
endef
fuzz:
	$(FUZZ)

## demo: a local control plane, journalctl watching it through a 410 and a
## restart, and journalctl showing the result.
demo: controlplane build
	$(GO) run ./internal/testing/demo -journalctl $(BIN)/journalctl

## cluster: a local control plane that keeps running until Ctrl-C, to try
## journalctl against; it prints the KUBECONFIG to export.
cluster: controlplane build
	$(GO) run ./internal/testing/cluster

clean:
	rm -rf .cache

## bench: the in-process journal benchmarks (go test -bench, BENCH_TIME
## each), then bench/cmd/benchharness against a local control plane with
## BENCH_N ConfigMaps (comma-separated for several sizes, ascending);
## prints its tables and writes BENCHMARKS.md. Each subject: sync, burst,
## forced relists, a relist with 1% changed, restarts with nothing and 1%
## changed; journalctl watch (built here) as a user runs it; crcache and
## jcache, an operator process on controller-runtime's cache and on
## jcache (start-up, heap, reads). Not part of test.
## BENCH_SUBJECTS=crcache,jcache runs only those (and rewrites only their
## section of BENCHMARKS.md). BENCH_WORKLOADS (default all:
## configmaps,pods,crs,secrets) picks the workloads: Pods with status
## churn, a custom resource, sealed Secrets in 100 namespaces, each run by
## watchjournal, informer, bare-watch-list, crcache and jcache with
## watchjournal's disk cost; without configmaps only their section is
## rewritten. Set BENCH_PPROF=dir for the children's CPU and heap profiles
## (BENCH_TRACE=1 adds an execution trace beside each CPU profile).
## The 1,000,000-object run is a last size, by hand, e.g.
## BENCH_N=20000,50000,200000,1000000: it creates the 800,000 more
## objects, and the full informer's resident set grows with N
## (BENCHMARKS.md has the figures).
## headline: one operator process over HEADLINE_N ConfigMaps of 1 KiB
## inside a memory limit of HEADLINE_LIMIT (a cgroup; GOMEMLIMIT at 90%),
## as a pod runs it: controller-runtime's cache, then jcache's drop-in
## (first start, restart), then jcache.Exact (first start, restart).
## Writes BENCHMARKS.md's headline section and docs/headline.svg. Needs
## root (the cgroup). The first run creates HEADLINE_N objects;
## .cache/headline keeps them for the next run.
## headline-secrets: the same over HEADLINE_SECRETS Secrets of 100 KiB,
## sealed on disk (docs/headline-secrets.svg).
HEADLINE_N       ?= 1000000
HEADLINE_SECRETS ?= 30000
HEADLINE_LIMIT   ?= 256Mi
HEADLINE_FLAGS    = -limit $(HEADLINE_LIMIT) -out $(CURDIR)/BENCHMARKS.md
.PHONY: headline headline-secrets
headline: controlplane
	$(GO) build -buildvcs=auto -o $(BIN)/headline ./bench/cmd/headline
	$(BIN)/headline $(HEADLINE_FLAGS) -kind configmaps -n $(HEADLINE_N) -size 1024 -dir $(CURDIR)/.cache/headline \
		-svg $(CURDIR)/docs/headline.svg -json $(CURDIR)/.cache/headline/results.json \
		-command "make headline$(if $(filter-out 1000000,$(HEADLINE_N)), HEADLINE_N=$(HEADLINE_N))$(if $(filter-out 256Mi,$(HEADLINE_LIMIT)), HEADLINE_LIMIT=$(HEADLINE_LIMIT))"
headline-secrets: controlplane
	$(GO) build -buildvcs=auto -o $(BIN)/headline ./bench/cmd/headline
	$(BIN)/headline $(HEADLINE_FLAGS) -kind secrets -n $(HEADLINE_SECRETS) -size 102400 -dir $(CURDIR)/.cache/headline-secrets \
		-svg $(CURDIR)/docs/headline-secrets.svg -json $(CURDIR)/.cache/headline-secrets/results.json \
		-command "make headline-secrets$(if $(filter-out 30000,$(HEADLINE_SECRETS)), HEADLINE_SECRETS=$(HEADLINE_SECRETS))$(if $(filter-out 256Mi,$(HEADLINE_LIMIT)), HEADLINE_LIMIT=$(HEADLINE_LIMIT))"

BENCH_N    ?= 50000
BENCH_TIME ?= 1s
.PHONY: bench
bench: controlplane
	@mkdir -p $(CURDIR)/.cache/bench
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./bench/ > $(CURDIR)/.cache/bench/gobench.txt || { cat $(CURDIR)/.cache/bench/gobench.txt; exit 1; }
	@cat $(CURDIR)/.cache/bench/gobench.txt
	$(GO) build -buildvcs=auto -o $(BIN)/benchharness ./bench/cmd/benchharness
	$(GO) build -o $(BIN)/journalctl ./cmd/journalctl
	BENCH_N=$(BENCH_N) BENCH_SUBJECTS=$(BENCH_SUBJECTS) BENCH_WORKLOADS=$(BENCH_WORKLOADS) BENCH_COMMAND="make bench BENCH_N=$(BENCH_N)$(if $(BENCH_SUBJECTS), BENCH_SUBJECTS=$(BENCH_SUBJECTS))$(if $(BENCH_WORKLOADS), BENCH_WORKLOADS=$(BENCH_WORKLOADS))" $(BIN)/benchharness -gobench $(CURDIR)/.cache/bench/gobench.txt -json $(CURDIR)/.cache/bench/results.json -out $(CURDIR)/BENCHMARKS.md
