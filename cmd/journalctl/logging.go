package main

// watch logs through zap on stderr. The library takes a logr.Logger
// (reconcile.Options.Logger, journal.Options.Logger,
// compactor.Options.Logger); watch gives it zapr over the same zap core, so
// logr's V(n) is zap's level -n: --log-level debug or -v 1 shows V(1), -v N
// shows V(N). client-go logs through klog, whose logger is the process's:
// it is set once (klog.SetLogger) to a sink that forwards to the running
// watch's logger, named "client-go".

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// newLogger returns a console logger to w, in the production encoder's
// fields with ISO 8601 times and durations as Go writes them ("3.346ms",
// "1m30s"), not float seconds. It logs at level, or at -verbosity when
// that is lower (logr's V(n) is zap's level -n): the more verbose wins.
func newLogger(w io.Writer, level string, verbosity int) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if verbosity < 0 || verbosity > 127 {
		return nil, fmt.Errorf("-v %d: want 0 to 127", verbosity)
	}
	lvl = min(lvl, zapcore.Level(-verbosity))
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}

// klogTo is where klog's lines go: the running watch's logger, or nowhere
// (nil) when no watch runs.
var klogTo atomic.Pointer[logr.Logger]

// installKlog makes klog write to klogTo, once per process, before any
// command runs: klog's logger may not change while client-go logs. With a
// logger set, klog writes nothing to os.Stderr itself.
var installKlog = sync.OnceFunc(func() { klog.SetLogger(logr.New(klogSink{})) })

// routeKlog sends klog's lines to log, with klog's verbosity at v (klog
// checks it before it calls the logger), until the returned function runs.
func routeKlog(log logr.Logger, v int) (restore func()) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(v))
	klogTo.Store(&log)
	return func() {
		_ = fs.Set("v", "0")
		klogTo.Store(nil)
	}
}

// klogSink is the logr.LogSink behind klog. client-go's errors are logged
// at V(1) with the key "error": watch logs the failures that matter
// itself, once each (discovery's, the loop's), where client-go reports
// each again on every retry (discovery's twice).
type klogSink struct {
	names  []string
	values []any
}

func (s klogSink) logger() logr.Logger {
	var l logr.Logger // discards
	if p := klogTo.Load(); p != nil {
		l = *p
	}
	for _, n := range s.names {
		l = l.WithName(n)
	}
	return l.WithValues(s.values...)
}

func (klogSink) Init(logr.RuntimeInfo)                   {}
func (s klogSink) Enabled(level int) bool                { return s.logger().V(level).Enabled() }
func (s klogSink) Info(level int, msg string, kv ...any) { s.logger().V(level).Info(msg, kv...) }
func (s klogSink) Error(err error, msg string, kv ...any) {
	s.logger().V(1).Info(msg, append(kv, "error", err)...)
}
func (s klogSink) WithValues(kv ...any) logr.LogSink {
	s.values = append(append([]any(nil), s.values...), kv...)
	return s
}
func (s klogSink) WithName(name string) logr.LogSink {
	s.names = append(append([]string(nil), s.names...), name)
	return s
}
