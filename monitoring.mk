# monitoring.mk: checks the alert rules of deploy/monitoring with promtool.
# Included from the Makefile; `make test` runs `make monitoring`.
#
#   make promtool     build .cache/bin/promtool when missing or older than
#                     tools/promtool/go.mod
#   make monitoring   promtool check rules deploy/monitoring/*-rules.yaml
#
# promtool comes from the Go module proxy through the nested module
# tools/promtool (a `tool` directive for
# github.com/prometheus/prometheus/cmd/promtool), so Prometheus's
# dependencies stay out of the library's go.mod. The first build took 19
# minutes here (2 cores shared with other work, module downloads
# included); later builds are cached. The metric names
# the rules and the dashboard use are checked by a Go test
# (metrics/monitoring_test.go).

MONITORING_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PROMTOOL        := $(MONITORING_ROOT)/.cache/bin/promtool
PROMETHEUS_VERSION := v0.316.0

.PHONY: promtool monitoring
promtool: $(PROMTOOL)

$(PROMTOOL): $(MONITORING_ROOT)/tools/promtool/go.mod
	@mkdir -p $(dir $@)
	@echo "building promtool (prometheus $(PROMETHEUS_VERSION)) from the Go module proxy (first build takes ~20 minutes on 2 cores; later builds are cached)"
	cd $(MONITORING_ROOT)/tools/promtool && go build -o $@ github.com/prometheus/prometheus/cmd/promtool
	@touch $@

monitoring: $(PROMTOOL)
	$(PROMTOOL) check rules $(MONITORING_ROOT)/deploy/monitoring/*-rules.yaml
