package jcache

// A warning for the drop-in past the size its memory limit allows.
//
// A controller-runtime controller starts its workers only once every
// source's handler registration reports synced, and a registration
// reports synced (client-go's contract for HasSynced) only once the
// replay gave it every stored object as OnAdd. Each OnAdd is one request
// waiting in the controller's work queue, so the queue peaks at one
// request per object, whichever cache the manager has: the objects are
// on disk, the queue is not. No signal from the queue reaches the cache
// (the handler's queue is controller-runtime's, behind its EventHandler),
// so the replay cannot be paced soundly; jcache.Exact can, as its source
// holds the queue (ExactOptions.MaxPending). When the stored objects'
// share of the queue would pass half of the process's memory limit
// (GOMEMLIMIT, debug.SetMemoryLimit), the registration says so once,
// naming Exact.

import (
	"fmt"
	"math"
	"runtime/debug"
)

// QueueBytesPerObject is the heap controller-runtime's default work
// queue (its priority queue, with its metrics) holds per request waiting
// in it at a million requests, in bytes, request name included: the
// drop-in's peak grows by about this much per stored object at a start.
// bench's BenchmarkControllerQueueRetained (queued-B/obj) measures it,
// and client-go's workqueue (UsePriorityQueue=false) beside it;
// BENCHMARKS.md has the figures.
const QueueBytesPerObject = 333

// warnQueueSize logs queueWarning's message before a handler's replay.
func (r *registration) warnQueueSize() {
	st, err := r.inf.f.j.Stats()
	if err != nil {
		return
	}
	if msg := queueWarning(st.Objects, debug.SetMemoryLimit(-1)); msg != "" {
		r.inf.log.Error(nil, msg, "resource", r.inf.f.res.String())
	}
}

// queueWarning is the warning for a replay of objects stored objects in a
// process whose memory limit is limit bytes (math.MaxInt64: none), or ""
// when objects × QueueBytesPerObject is at most half of it.
func queueWarning(objects uint64, limit int64) string {
	if limit == math.MaxInt64 || limit <= 0 {
		return ""
	}
	need := int64(objects) * QueueBytesPerObject
	if need <= limit/2 {
		return ""
	}
	return fmt.Sprintf("the replay to this handler queues one request per stored object in the controller's work queue before its workers start: "+
		"%d objects × %d B = %d MiB, more than half of the memory limit (GOMEMLIMIT %d MiB), and the process may be OOM-killed at start; "+
		"past this size use jcache.Exact, whose source keeps at most ExactOptions.MaxPending requests queued, or raise the limit",
		objects, QueueBytesPerObject, need>>20, limit>>20)
}
