# monitoring.mk: checks the alert rules of deploy/monitoring.
# Included from the Makefile; `make test` runs `make monitoring`.
#
#   make rulecheck    build .cache/bin/rulecheck when missing or older than
#                     tools/rulecheck
#   make monitoring   rulecheck deploy/monitoring/*-rules.yaml
#
# rulecheck (tools/rulecheck, a nested module so that Prometheus's
# dependencies stay out of the library's go.mod) is `promtool check rules`
# reduced to what it checks: Prometheus's own rule parser (model/rulefmt:
# YAML, PromQL, templates, names) and promtool's duplicate-rule lint, made
# fatal. It builds from the Go module proxy without the rest of promtool
# (service discovery, TSDB). The metric names the rules and the dashboard
# use are checked by a Go test (metrics/monitoring_test.go).

MONITORING_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
RULECHECK       := $(MONITORING_ROOT)/.cache/bin/rulecheck

.PHONY: rulecheck monitoring
rulecheck: $(RULECHECK)

$(RULECHECK): $(MONITORING_ROOT)/tools/rulecheck/go.mod $(MONITORING_ROOT)/tools/rulecheck/main.go
	@mkdir -p $(dir $@)
	cd $(MONITORING_ROOT)/tools/rulecheck && go build -o $@ .

MONITORING = $(RULECHECK) $(MONITORING_ROOT)/deploy/monitoring/*-rules.yaml
monitoring: $(RULECHECK)
	$(MONITORING)
