package main

// Freshness of the cache subjects (cache.go): how soon an operator's
// cache shows a change, measured in the first start's process after its
// reconciles and reads, on controller-runtime's cache and on jcache with
// its default options (fsync on).
//
//   - event to handler: the process creates, then updates, freshK
//     ConfigMaps at a steady pace (one every freshPace) through the
//     manager's client, and records the time from each API call's return
//     to a handler on the controller's informer seeing that
//     resourceVersion (an event seen before the call returned counts 0);
//   - own write to Get: freshK times, a Create through the manager's
//     client, then a Get of it through the same client, polled every
//     freshPoll until found, timed from the Create's return.
//
// The objects live in freshNS, carry the cache's label (so the cache
// holds them) and are deleted at the end, before the restart.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

const (
	freshK    = 500                    // objects created, updated, and written then read
	freshPace = 4 * time.Millisecond   // between two API calls of the event measure
	freshPoll = 100 * time.Microsecond // between two Gets of the own-write measure
	freshNS   = "cache-fresh"
)

// freshness is what the freshness measure found; times in seconds.
type freshness struct {
	K        int     `json:"k"`
	EventP50 float64 `json:"eventP50Seconds"`
	EventP99 float64 `json:"eventP99Seconds"`
	// Early counts events the handler saw before their API call returned.
	Early  int     `json:"early"`
	GetP50 float64 `json:"ownGetP50Seconds"`
	GetP99 float64 `json:"ownGetP99Seconds"`
}

// freshnessOf measures the freshness of mgr's cache (see the top of the
// file); kind names the objects, so subjects never share one.
func freshnessOf(ctx context.Context, mgr manager.Manager, kind string) (*freshness, error) {
	c := mgr.GetClient()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: freshNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]time.Time{} // name@resourceVersion → when the handler saw it
	changed := make(chan struct{})
	see := func(o any) {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Namespace != freshNS {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, ok := seen[cm.Name+"@"+cm.ResourceVersion]; !ok {
			seen[cm.Name+"@"+cm.ResourceVersion] = now
		}
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }})
	if err != nil {
		return nil, err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil, ctx.Err()
	}

	// Event to handler: creates, then updates, at a steady pace.
	type call struct {
		key      string
		returned time.Time
	}
	calls := make([]call, 0, 2*freshK)
	tick := time.NewTicker(freshPace)
	defer tick.Stop()
	objs := make([]*corev1.ConfigMap, freshK)
	for i := range 2 * freshK {
		<-tick.C
		var err error
		if i < freshK {
			objs[i] = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: freshNS, Name: fmt.Sprintf("event-%s-%d", kind, i), Labels: map[string]string{cacheLabel: "true"}},
				Data:       map[string]string{"payload": payload},
			}
			err = c.Create(ctx, objs[i])
		} else {
			o := objs[i-freshK]
			o.Data["v"] = "2"
			err = c.Update(ctx, o)
		}
		if err != nil {
			return nil, err
		}
		o := objs[i%freshK]
		calls = append(calls, call{key: o.Name + "@" + o.ResourceVersion, returned: time.Now()})
	}
	f := &freshness{K: freshK}
	lat := make([]time.Duration, 0, len(calls))
	deadline := time.After(time.Minute)
	for _, x := range calls {
		for {
			mu.Lock()
			at, ok := seen[x.key]
			ch := changed
			mu.Unlock()
			if ok {
				d := at.Sub(x.returned)
				if d < 0 {
					d, f.Early = 0, f.Early+1
				}
				lat = append(lat, d)
				break
			}
			select {
			case <-ch:
			case <-deadline:
				return nil, fmt.Errorf("freshness: the handler never saw %s (%d of %d seen)", x.key, len(lat), len(calls))
			}
		}
	}
	f.EventP50, f.EventP99 = percentiles(lat)

	// Own write to Get.
	gets := make([]time.Duration, 0, freshK)
	for i := range freshK {
		o := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: freshNS, Name: fmt.Sprintf("own-%s-%d", kind, i), Labels: map[string]string{cacheLabel: "true"}},
			Data:       map[string]string{"payload": payload},
		}
		if err := c.Create(ctx, o); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), &corev1.ConfigMap{})
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			if time.Since(t0) > time.Minute {
				return nil, fmt.Errorf("freshness: %s/%s not in the cache a minute after its Create", o.Namespace, o.Name)
			}
			time.Sleep(freshPoll)
		}
		gets = append(gets, time.Since(t0))
	}
	f.GetP50, f.GetP99 = percentiles(gets)
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(freshNS)); err != nil {
		return nil, err
	}
	return f, nil
}

// percentiles returns the p50 and p99 of d, in seconds; d is sorted.
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2].Seconds(), d[len(d)*99/100].Seconds()
}

// freshnessTable returns the freshness rows of the cache section.
func (r *results) freshnessTable() string {
	var b strings.Builder
	for _, x := range r.caches {
		if x.Err != "" || x.Reads.Fresh == nil {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "\nFreshness after the first start's reads (freshness.go): event to handler, from the return of a Create or Update through mgr.GetClient() (%d each, one every %v) to a handler on the controller's informer seeing that resourceVersion (seen before the return: 0; early counts them); own write to Get, from a Create's return until a Get through mgr.GetClient(), polled every %v, finds it (%d times). jcache with its default options: fsync on.\n",
				freshK, freshPace, freshPoll, freshK)
			b.WriteString("\n| N | subject | event to handler p50 ms | p99 ms | early | own write to Get p50 ms | p99 ms |\n|--:|---|--:|--:|--:|--:|--:|\n")
		}
		f := x.Reads.Fresh
		fmt.Fprintf(&b, "| %d | %s | %.3f | %.3f | %d | %.3f | %.3f |\n", x.N, x.Subject, 1e3*f.EventP50, 1e3*f.EventP99, f.Early, 1e3*f.GetP50, 1e3*f.GetP99)
	}
	return b.String()
}

// freshnessTargets are the freshness targets: jcache within 1.2× or
// 2 ms of crcache, at p50 and p99, for both measures; none for results
// that measured no freshness (taken before freshness.go).
func (r *results) freshnessTargets(ns []int) []target {
	if !slices.ContainsFunc(r.caches, func(x cacheRow) bool { return x.Reads.Fresh != nil }) {
		return nil
	}
	var ts []target
	within := func(j, c float64) bool { return j <= 1.2*c || j-c <= 0.002 }
	for _, n := range ns {
		t := newTarget("jcache (fsync on) event to handler and own write to Get, p50 and p99, within 1.2× or 2 ms of crcache's (N=%d)", n)
		j, ok1 := findCache(r.caches, "", n, subjJCache)
		c, ok2 := findCache(r.caches, "", n, subjCRCache)
		if ok1 && ok2 && j.Reads.Fresh != nil && c.Reads.Fresh != nil {
			a, b := j.Reads.Fresh, c.Reads.Fresh
			ok := within(a.EventP50, b.EventP50) && within(a.EventP99, b.EventP99) && within(a.GetP50, b.GetP50) && within(a.GetP99, b.GetP99)
			t.set(ok, fmt.Sprintf("event p50 %.3f / %.3f ms, p99 %.3f / %.3f ms; own write to Get p50 %.3f / %.3f ms, p99 %.3f / %.3f ms",
				1e3*a.EventP50, 1e3*b.EventP50, 1e3*a.EventP99, 1e3*b.EventP99, 1e3*a.GetP50, 1e3*b.GetP50, 1e3*a.GetP99, 1e3*b.GetP99))
		}
		ts = append(ts, t)
	}
	return ts
}
