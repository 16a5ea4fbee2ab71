// Package promtool pins Prometheus's promtool (cmd/promtool of
// github.com/prometheus/prometheus) as a tool of this nested module, so that
// `make test` can run `promtool check rules` on deploy/monitoring without
// Prometheus entering the library's go.mod. Built by monitoring.mk with
// `go build github.com/prometheus/prometheus/cmd/promtool` into .cache/bin.
package promtool
