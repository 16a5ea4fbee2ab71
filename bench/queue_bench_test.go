package bench

// What a controller's workqueue keeps after its start-up's adds drained:
// a controller-runtime controller starts with one add per
// object of the cache, all queued before its first reconcile (it waits
// for the cache's sync), and the queue's maps keep the size they grew to
// (Go maps do not shrink). That heap follows N whichever cache the
// manager has; benchharness's crcache and jcache subjects include it.

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// BenchmarkControllerQueueRetained reports the live heap a controller's
// queue holds while N requests wait in it, added at once as a start-up
// adds them before the workers start (queued-B/obj: the drop-in's peak
// grows by this much per object), and what it keeps (retained-B, and per
// object) once they were all taken and done: controller-runtime's
// priority queue (the default since v0.23) and client-go's rate-limited
// workqueue (UsePriorityQueue=false), both with controller-runtime's
// metrics provider as a controller builds them. The request names are
// those of benchharness's cache subjects.
func BenchmarkControllerQueueRetained(b *testing.B) {
	queues := map[string]func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request]{
		"priorityqueue": func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return priorityqueue.New[reconcile.Request](name)
		},
		"workqueue": func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
				workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name})
		},
	}
	k := 0
	for _, kind := range []string{"priorityqueue", "workqueue"} {
		for _, n := range []int{50_000, 200_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/N=%d", kind, n), func(b *testing.B) {
				var nss [100]string
				for i := range nss {
					nss[i] = fmt.Sprintf("cache-%02d", i)
				}
				var queued, retained uint64
				for b.Loop() {
					k++
					base := liveHeap()
					q := queues[kind](fmt.Sprintf("bench-%d", k))
					// Each name its own string, as each request's is once
					// the handler made it from a decoded object.
					for i := range n {
						q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: nss[i%100], Name: fmt.Sprintf("cm-%07d", i)}})
					}
					for q.Len() < n { // the priority queue takes adds in through a buffer
						runtime.Gosched()
					}
					h := liveHeap()
					queued = h - min(base, h)
					for done := 0; done < n; done++ {
						r, shutdown := q.Get()
						if shutdown {
							b.Fatal("the queue shut down")
						}
						q.Done(r)
					}
					if l := q.Len(); l != 0 {
						b.Fatalf("%d requests left in the queue", l)
					}
					h = liveHeap()
					retained = h - min(base, h)
					q.ShutDown()
					runtime.KeepAlive(q)
				}
				b.ReportMetric(float64(queued)/float64(n), "queued-B/obj")
				b.ReportMetric(float64(retained), "retained-B")
				b.ReportMetric(float64(retained)/float64(n), "retained-B/obj")
			})
		}
	}
}
