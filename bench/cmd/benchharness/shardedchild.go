package main

// A sharded replica's process (sharded.go): the cache subjects' operator
// on jcache with ShardOptions at the library's defaults but for what it
// must name (Group, Resources, Owners) and the member's name; one
// controller For the ConfigMaps, no leader election, whose reconciler counts, per hash bucket, the distinct keys
// it reconciled while its cache held them.
//
// The invariant the reports rest on: a bucket's count never exceeds the
// bucket's objects (a key is counted once, by its index in the bitmap),
// so "every bucket of the settled range has its count equal to its
// objects" means every object of the range was reconciled here while
// held. The range is read from ShardStatus every 5 ms; a settled range
// with every replica live is the start's end, a settled range with one
// replica less the takeover's.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/shards"
)

// shardPoll is how often a replica reads its shard status.
const shardPoll = 5 * time.Millisecond

// bucketCounts counts, per hash bucket, the distinct objects reconciled
// while held; an object is its index among the n cache ConfigMaps and the
// cacheListN of cacheListNS (objectIndex).
type bucketCounts struct {
	n  int
	mu sync.Mutex
	// seen has one bit per object; counts one count per bucket.
	seen   []uint64
	counts []int
}

func newBucketCounts(n int) *bucketCounts {
	return &bucketCounts{n: n, seen: make([]uint64, (n+cacheListN+63)/64), counts: make([]int, hashrange.DefaultBuckets)}
}

// objectIndex returns the index of the cache ConfigMap ns/name: i for
// cacheObject(i, ""), n+i for cacheObject(i, cacheListNS); false for any
// other key.
func objectIndex(n int, ns, name string) (int, bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "cm-"))
	if err != nil || !strings.HasPrefix(name, "cm-") || i < 0 {
		return 0, false
	}
	switch {
	case ns == cacheListNS && i < cacheListN:
		return n + i, true
	case i < n && ns == cacheNS(i):
		return i, true
	}
	return 0, false
}

// add counts the object of index i in bucket b, once.
func (c *bucketCounts) add(i, b int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, bit := i/64, uint64(1)<<(i%64); c.seen[w]&bit == 0 {
		c.seen[w] |= bit
		c.counts[b]++
	}
}

// reset forgets every object counted.
func (c *bucketCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.seen)
	clear(c.counts)
}

// complete returns the objects of buckets, by totals, and whether every
// one of them was counted, with how many were.
func (c *bucketCounts) complete(buckets, totals []int) (want, have int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range buckets {
		want, have = want+totals[b], have+c.counts[b]
	}
	return want, have, have == want
}

// shardReconciler reads the ConfigMap it was given through the manager's
// client and counts it when the cache holds it.
type shardReconciler struct {
	c       client.Client
	cache   *jcache.Cache
	n       int
	counts  *bucketCounts
	first   atomic.Int64 // UnixNano of the first call
	notHeld atomic.Int64
}

func (r *shardReconciler) Reconcile(ctx context.Context, req ctrlreconcile.Request) (ctrlreconcile.Result, error) {
	r.first.CompareAndSwap(0, time.Now().UnixNano())
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		// NotFound: a key that moved away (the file of an Owners resource
		// holds the range only); no object of the bench is deleted.
		return ctrlreconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.cache.Holds(&cm) {
		r.notHeld.Add(1) // queued before its key moved away
		return ctrlreconcile.Result{}, nil
	}
	if i, ok := objectIndex(r.n, cm.Namespace, cm.Name); ok {
		r.counts.add(i, shardBucket(string(cm.UID)))
	}
	return ctrlreconcile.Result{}, nil
}

// rangeWatch follows a cache's held range, parsing its selector only when
// it changed.
type rangeWatch struct {
	cache    *jcache.Cache
	selector string
	buckets  []int
	partial  bool
}

// now returns the shard status, with the buckets of the held range.
func (w *rangeWatch) now() (jcache.ShardStatus, []int, error) {
	st := w.cache.ShardStatus()
	if st.Held != w.selector || w.buckets == nil && st.Held != "" {
		s, err := hashrange.ParseOrEmpty(st.Held)
		if err != nil {
			return st, nil, fmt.Errorf("held range %q: %w", st.Held, err)
		}
		w.selector = st.Held
		w.buckets, w.partial = bucketsOf(s)
	}
	if w.partial {
		return st, nil, fmt.Errorf("held range %q cuts a hash bucket", st.Held)
	}
	return st, w.buckets, nil
}

// waitRange polls the cache until the held range is settled with members
// live replicas and every object of its buckets that pass keep was
// counted; it returns when it saw that and those buckets. stopped ends
// the wait with the manager's error.
func (w *rangeWatch) waitRange(ctx context.Context, counts *bucketCounts, totals []int, members int, keep func(int) bool, stopped <-chan error) (time.Time, []int, int, error) {
	tick := time.NewTicker(shardPoll)
	defer tick.Stop()
	for {
		st, buckets, err := w.now()
		if err != nil {
			return time.Time{}, nil, 0, err
		}
		if st.Settled && len(st.Members) == members {
			var mine []int
			for _, b := range buckets {
				if keep(b) {
					mine = append(mine, b)
				}
			}
			if want, _, ok := counts.complete(mine, totals); ok {
				return time.Now(), mine, want, nil
			}
		}
		select {
		case <-ctx.Done():
			_, have, _ := counts.complete(buckets, totals)
			return time.Time{}, nil, 0, fmt.Errorf("%w: last status: members %v, settled %v, held %d buckets, %d objects of them reconciled (last error %v)",
				ctx.Err(), st.Members, st.Settled, len(buckets), have, st.LastError)
		case err := <-stopped:
			return time.Time{}, nil, 0, fmt.Errorf("manager stopped: %v", err)
		case <-tick.C:
		}
	}
}

// shardTotals reads envShardTotals.
func shardTotals() ([]int, error) {
	f := strings.Split(os.Getenv(envShardTotals), ",")
	if len(f) != hashrange.DefaultBuckets {
		return nil, fmt.Errorf("%s: %d counts; want %d", envShardTotals, len(f), hashrange.DefaultBuckets)
	}
	totals := make([]int, len(f))
	for i, s := range f {
		t, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", envShardTotals, err)
		}
		totals[i] = t
	}
	return totals, nil
}

// shardedChildMain runs one sharded replica: the manager until its range
// was reconciled, then the parent's commands (arm, exit) on stdin.
func shardedChildMain(kind string, n int, cfg *rest.Config, send func(report)) error {
	prof := profiler{dir: os.Getenv(envPprof), tag: os.Getenv(envTag)}
	ctrl.SetLogger(logr.New(errorSink{}))
	totals, err := shardTotals()
	if err != nil {
		return err
	}
	replicas, err := strconv.Atoi(os.Getenv(envShardReplicas))
	if err != nil {
		return fmt.Errorf("%s: %v", envShardReplicas, err)
	}
	base := steady()

	stopCPU := prof.cpu("cpu-start")
	cpu0 := cpuTime()
	newManager := time.Now()
	cms := schema.GroupResource{Resource: "configmaps"}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.Scheme,
		NewCache: jcache.NewFunc(jcache.Options{Dir: os.Getenv(envDir), Shard: &jcache.ShardOptions{
			Group: os.Getenv(envShardGroup), Member: os.Getenv(envShardMember),
			// The ConfigMaps are the controller's For resource, without an
			// owner: each hashes by its own UID, and each replica's file
			// journals only its range.
			Resources: []schema.GroupResource{cms}, Owners: []schema.GroupResource{cms},
		}}),
		Cache:                  crcache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{cacheLabel: "true"})},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	jc, ok := mgr.GetCache().(*jcache.Cache)
	if !ok {
		return fmt.Errorf("the manager's cache is a %T; want *jcache.Cache", mgr.GetCache())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The same field index as the unsharded operator (cache.go).
	err = mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, groupIndex, func(o client.Object) []string {
		if g, ok := o.GetLabels()[groupLabel]; ok {
			return []string{g}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rec := &shardReconciler{c: mgr.GetClient(), cache: jc, n: n, counts: newBucketCounts(n)}
	err = ctrl.NewControllerManagedBy(mgr).Named("bench-sharded").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}). // each replica reconciles its own range
		For(&corev1.ConfigMap{}).Complete(rec)
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()

	w := &rangeWatch{cache: jc}
	all := func(int) bool { return true }
	wctx, wcancel := context.WithTimeout(ctx, syncTimeout(n)+2*time.Minute)
	allAt, buckets, keys, err := w.waitRange(wctx, rec.counts, totals, replicas, all, stopped)
	wcancel()
	if err != nil {
		return fmt.Errorf("all of the range reconciled: %w", err)
	}
	cpu := cpuTime() - cpu0
	stopCPU()
	st := steady()
	prof.heap("heap-steady")
	_, have, _ := rec.counts.complete(buckets, totals)
	send(report{Event: "shard-synced", Shard: &shardReport{
		NewManagerUnixNano: newManager.UnixNano(), FirstReconcileUnixNano: rec.first.Load(), AllUnixNano: allAt.UnixNano(),
		CPU: cpu.Seconds(), Buckets: buckets, Keys: keys, Reconciles: int64(have), NotHeld: rec.notHeld.Load(),
		Members: replicas, Base: base, Steady: st,
	}})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var c shardCommand
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			return fmt.Errorf("bad command %q: %v", in.Text(), err)
		}
		switch c.Cmd {
		case "arm":
			// What this replica reconciled so far must not count for the
			// killed range's keys.
			rec.counts.reset()
			killed := make(map[int]bool, len(c.Buckets))
			for _, b := range c.Buckets {
				killed[b] = true
			}
			send(report{Event: "shard-armed"})
			wctx, wcancel := context.WithTimeout(ctx, 2*shards.DefaultLeaseDuration+syncTimeout(n)+2*time.Minute)
			at, taken, keys, err := w.waitRange(wctx, rec.counts, totals, replicas-1, func(b int) bool { return killed[b] }, stopped)
			wcancel()
			if err != nil {
				return fmt.Errorf("the killed range reconciled: %w", err)
			}
			_, have, _ := rec.counts.complete(taken, totals)
			send(report{Event: "shard-takeover", Shard: &shardReport{
				AllUnixNano: at.UnixNano(), Buckets: taken, Keys: keys, Reconciles: int64(have), NotHeld: rec.notHeld.Load(),
				Members: replicas - 1, Steady: steady(),
			}})
		case "exit":
			cancel()
			if err := awaitManagerStop(stopped); err != nil { // the manager stops the cache: it deletes its Lease and closes its files
				return err
			}
			send(report{Event: "bye"})
			return nil
		default:
			return fmt.Errorf("unknown command %q", c.Cmd)
		}
	}
	return in.Err()
}
