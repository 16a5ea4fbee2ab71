package main

// watch --metrics-addr: the journal's and the loop's Prometheus metrics
// (package metrics), with the Go runtime's and the process's, served on
// /metrics at a TCP address. Off unless the flag is set.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/watchjournal/watchjournal/metrics"
)

// serveMetrics serves the metrics of files' journals and loops on addr
// (host:port; port 0 picks one, logged) at /metrics until stop is called:
// each file's with its resource label (metrics.Register). An empty addr serves
// nothing. The address is bound before it returns: a port in use is its
// error.
func serveMetrics(addr string, files []watched, log *zap.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	var errs []error
	for _, w := range files {
		errs = append(errs, metrics.Register(reg, w.j, w.loop))
	}
	if err := errors.Join(
		errors.Join(errs...),
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(log)}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Shutdown
	log.Info("serving metrics", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
