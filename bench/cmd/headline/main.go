// Command headline runs one operator process, unchanged but for its cache,
// over many ConfigMaps inside a real memory limit, as a pod runs it: a
// cgroup memory limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes)
// and GOMEMLIMIT at 90% of it. `make headline` runs it; BENCHMARKS.md's
// "headline" section and docs/headline.svg are what it writes.
//
// The operator (child.go) is a controller-runtime manager with one
// controller built by the builder, For ConfigMaps, whose reconciler reads
// the object it was given through mgr.GetClient(). Its cases, each a
// process of its own in a fresh cgroup, in this order:
//
//	crcache          controller-runtime's cache (cache.New)
//	crcache-nolimit  the same without a limit: its peak
//	jcache           the one-line drop-in (jcache.NewFunc), first start
//	jcache-restart   the same, restarted on its files, nothing changed
//	jcache-nolimit   the drop-in's first start without a limit: its peak
//	exact            jcache.Exact (WatchesRawSource of ExactController.Kind)
//	exact-restart    the same, restarted, nothing changed
//
// For each it reports whether the kernel killed it (and when), its peak
// resident set, the time from exec to every object reconciled (to ready,
// for a restart that has nothing to reconcile), and the disk used.
//
// The parent (this process) starts a control plane on loopback
// (internal/testing/controlplane, the apiserver's watch cache on, as a cluster
// runs), creates the objects once, samples each child's VmRSS every
// 100 ms, and writes the results: -out (BENCHMARKS.md, its marked
// section), -svg (the plot) and -json.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment of a child (the same binary, re-executed).
const (
	envChild = "HEADLINE_CHILD" // the case
	envDir   = "HEADLINE_DIR"   // the cache's directory
	envN     = "HEADLINE_N"     // objects
	envPprof = "HEADLINE_PPROF" // a directory: heap profiles every 10 s
	envKind  = "HEADLINE_KIND"  // configmaps or secrets
)

// The cases, in the order they run.
const (
	caseCR         = "crcache"
	caseCRNoLimit  = "crcache-nolimit"
	caseDropIn     = "jcache"
	caseDropInRe   = "jcache-restart"
	caseDropInNoL  = "jcache-nolimit"
	caseExact      = "exact"
	caseExactRe    = "exact-restart"
	defaultCases   = caseCR + "," + caseCRNoLimit + "," + caseDropIn + "," + caseDropInRe + "," + caseDropInNoL + "," + caseExact + "," + caseExactRe
	defaultLimit   = 256 << 20
	defaultObjects = 1_000_000
)

type options struct {
	n         int
	limit     int64
	cases     []string
	dir       string
	out, svg  string
	svgLink   string // the plot's path as the results file links it
	json      string
	workers   int
	timeout   time.Duration
	command   string
	keepCP    bool
	objectLen int
	kind      string // configmaps or secrets
}

func main() {
	if c := os.Getenv(envChild); c != "" {
		if err := childMain(c); err != nil {
			fmt.Fprintf(os.Stderr, "headline child %s: %v\n", c, err)
			os.Exit(1)
		}
		return
	}
	var o options
	var cases, limit, from string
	flag.IntVar(&o.n, "n", defaultObjects, "ConfigMaps to create and reconcile")
	flag.StringVar(&limit, "limit", "256Mi", "the memory limit of each operator process (Ki, Mi, Gi suffixes)")
	flag.StringVar(&cases, "cases", defaultCases, "cases to run, comma-separated, of "+defaultCases)
	flag.StringVar(&o.dir, "dir", ".cache/headline", "working directory (control plane, caches)")
	flag.StringVar(&o.out, "out", "", "results file to write its headline section into (BENCHMARKS.md); empty: none")
	flag.StringVar(&o.svg, "svg", "", "the plot to write (SVG); empty: none")
	flag.StringVar(&o.json, "json", "", "the raw results to write (JSON); empty: none")
	flag.IntVar(&o.workers, "workers", 64, "parallel writers creating the objects")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "the longest one case may run")
	flag.IntVar(&o.objectLen, "size", 1024, "bytes of data in each object")
	flag.StringVar(&o.kind, "kind", kindConfigMaps, "the objects: "+kindConfigMaps+" or "+kindSecrets+" (Secrets: jcache keeps them sealed, with a key file as a mounted Secret gives it)")
	flag.StringVar(&o.command, "command", cmp.Or(os.Getenv("HEADLINE_COMMAND"), "make headline"), "the command recorded as the way to reproduce the results")
	flag.StringVar(&from, "from", "", "rewrite -out, -svg from this -json file of an earlier run, and run nothing")
	flag.Parse()
	if o.svg != "" && o.out != "" {
		abs, _ := filepath.Abs(o.svg)
		base, _ := filepath.Abs(filepath.Dir(o.out))
		if rel, err := filepath.Rel(base, abs); err == nil {
			o.svgLink = filepath.ToSlash(rel)
		}
	}
	if o.kind != kindConfigMaps && o.kind != kindSecrets {
		fatal(fmt.Errorf("-kind %q: want %s or %s", o.kind, kindConfigMaps, kindSecrets))
	}
	var err error
	if o.limit, err = parseBytes(limit); err != nil {
		fatal(err)
	}
	if from != "" {
		b, err := os.ReadFile(from)
		if err != nil {
			fatal(err)
		}
		var res results
		if err := json.Unmarshal(b, &res); err != nil {
			fatal(err)
		}
		o.json = ""
		if err := write(o, &res); err != nil {
			fatal(err)
		}
		return
	}
	o.cases = strings.FieldsFunc(cases, func(r rune) bool { return r == ',' }) // none: only create the objects
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "headline: %v\n", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s headline: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// parseBytes parses "256Mi", "1Gi", "512Ki" or a plain number of bytes.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad byte count %q", s)
	}
	return v * mult, nil
}
