package main

// The sharded subject's section of the results file (sharded.go): one
// table of the replicas beside the unsharded jcache row at the same N,
// the reported rows comparing them, and what each column measures. A run
// of only the cache subjects rewrites this section (between its markers)
// and keeps the rest of the file.

import (
	"fmt"
	"strings"
)

// The sharded section's markers.
const (
	shardedBegin = "<!-- sharded cache: begin (benchharness writes this section; a run of only the cache subjects rewrites only it) -->"
	shardedEnd   = "<!-- sharded cache: end -->"
)

// shardedTable returns the replicas of each sharded row, after the jcache
// row at the same N when the run has one.
func (r *results) shardedTable() string {
	var b strings.Builder
	b.WriteString("| N | subject | replica | keys | buckets | load | heap MiB | RSS MiB | anon RSS MiB | first reconcile s (in process) | all of its range reconciled s | start CPU s | not held | after the kill: keys taken | after the kill: all reconciled s | after the kill: heap MiB | after the kill: RSS MiB | disk MiB |\n")
	b.WriteString("|--:|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.sharded {
		if j, ok := findCache(r.caches, "", x.N, subjJCache); ok {
			fmt.Fprintf(&b, "| %d | %s | one process | %d | all | %s | %s | %s | %s | %s | %.2f | %.2f | – | – | – | – | – | %s |\n",
				j.N, j.Subject, j.Objects, j.Load, mb(j.First.Steady.HeapInuse), mb(j.First.Steady.RSS), mb(j.First.Steady.RSSAnon),
				firstReconcile(j.First), j.First.AllSeconds, j.First.CPU, mb(uint64(j.Restart.DiskBytes)))
		}
		if x.Err != "" {
			fmt.Fprintf(&b, "| %d | %s | error: %s ||||||||||||||||\n", x.N, x.Subject, cell(x.Err))
			continue
		}
		for _, s := range x.Replicas {
			taken, took, heap, rss := "killed (SIGKILL)", "–", "–", "–"
			if !s.Killed {
				taken, took, heap, rss = fmt.Sprint(s.Taken), secs(s.TakenSeconds), mb(s.After.HeapInuse), mb(s.After.RSS)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %s | %s | %s | %s | %.2f (%.2f) | %.2f | %.2f | %d | %s | %s | %s | %s | %s |\n",
				x.N, x.Subject, s.Member, s.Keys, len(s.Buckets), x.Load, mb(s.Steady.HeapInuse), mb(s.Steady.RSS), mb(s.Steady.RSSAnon),
				s.FirstReconcileSeconds, s.InProcessSeconds, s.AllSeconds, s.CPU, s.NotHeld, taken, took, heap, rss, mb(uint64(s.DiskBytes)))
		}
	}
	return b.String()
}

// shardedReported returns the rows that compare the replicas with the
// unsharded jcache at each N: reported, with no target.
func (r *results) shardedReported() []target {
	var ts []target
	for _, x := range r.sharded {
		if x.Err != "" {
			continue
		}
		j, ok := findCache(r.caches, "", x.N, subjJCache)
		per := func(pick func(shardStart) string) string {
			var parts []string
			for _, s := range x.Replicas {
				parts = append(parts, pick(s))
			}
			return strings.Join(parts, " / ")
		}
		largest := func(pick func(shardStart) uint64) (top, sum uint64) {
			for _, s := range x.Replicas {
				top, sum = max(top, pick(s)), sum+pick(s)
			}
			return top, sum
		}
		slowest := func(pick func(shardStart) float64) (top float64) {
			for _, s := range x.Replicas {
				top = max(top, pick(s))
			}
			return top
		}
		reported := func(name, measured string) {
			ts = append(ts, target{name: name, measured: measured, state: "reported"})
		}
		for _, m := range []struct {
			what string
			pick func(memory) uint64
		}{
			{"heap", func(m memory) uint64 { return m.HeapInuse }},
			{"RSS", func(m memory) uint64 { return m.RSS }},
		} {
			top, sum := largest(func(s shardStart) uint64 { return m.pick(s.Steady) })
			measured := per(func(s shardStart) string { return mb(m.pick(s.Steady)) }) + " MiB"
			if ref := m.pick(j.First.Steady); ok && ref > 0 {
				measured += fmt.Sprintf("; jcache %s MiB: the largest replica %.0f%% of it, the %d together %s", mb(ref),
					100*float64(top)/float64(ref), len(x.Replicas), ratio(float64(sum), float64(ref)))
			}
			reported(fmt.Sprintf("%d sharded replicas: %s per replica once all of its range was reconciled, against jcache's one process (N=%d)", len(x.Replicas), m.what, x.N), measured)
		}
		all := slowest(func(s shardStart) float64 { return s.AllSeconds })
		first := slowest(func(s shardStart) float64 { return s.FirstReconcileSeconds })
		measured := fmt.Sprintf("all of its range: %s s; first reconcile: %s s", per(func(s shardStart) string { return secs(s.AllSeconds) }),
			per(func(s shardStart) string { return secs(s.FirstReconcileSeconds) }))
		if ok && j.First.AllSeconds > 0 {
			measured += fmt.Sprintf("; jcache: every object %.2f s, first reconcile %.2f s; the slowest replica %s and %s of it", j.First.AllSeconds, j.First.FirstReconcileSeconds,
				ratio(all, j.First.AllSeconds), ratio(first, j.First.FirstReconcileSeconds))
		}
		reported(fmt.Sprintf("%d sharded replicas started together: exec to all of its range reconciled, per replica, against jcache's exec to every object reconciled (N=%d)", len(x.Replicas), x.N), measured)
		var killed shardStart
		var took []string
		for _, s := range x.Replicas {
			if s.Killed {
				killed = s
			} else {
				took = append(took, fmt.Sprintf("%s took %d in %.2f s", s.Member, s.Taken, s.TakenSeconds))
			}
		}
		reported(fmt.Sprintf("a replica killed (SIGKILL): from the kill until every key of its range was reconciled by a survivor, LeaseDuration %.0f s and RenewInterval %.0f s, the library's defaults (N=%d)",
			x.LeaseDuration, x.RenewInterval, x.N),
			fmt.Sprintf("%.2f s for the %d keys of %s (%s)", x.TakeoverSeconds, killed.Keys, killed.Member, strings.Join(took, ", ")))
	}
	return ts
}

// shardedSection returns the sharded subject's section of the results
// file, markers included; "" when it did not run.
func (r *results) shardedSection() string {
	if len(r.sharded) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(shardedBegin + "\n\n")
	fmt.Fprintf(&b, "## jcache sharded: %d replicas against one unsharded process\n\n", shardReplicas)
	b.WriteString(r.writtenBy())
	fmt.Fprintf(&b, "The cache section's ConfigMaps (N in %d namespaces plus %d in %s, selected by %s=true), reconciled by %d replicas of one shard group instead of one process; the jcache row is the cache section's first start at the same N.\n\n",
		cacheNamespaces, cacheListN, cacheListNS, cacheLabel, shardReplicas)
	b.WriteString(r.shardedTable())
	b.WriteString(`
- **The replicas**: the cache section's operator process (ctrl.NewManager with the same DefaultLabelSelector and group field index, one controller For(&corev1.ConfigMap{}) whose reconciler Gets the object through mgr.GetClient()), ` + fmt.Sprint(shardReplicas) + ` processes started one after the other, each with its own directory, on jcache.NewFunc(jcache.Options{Dir, Shard: &jcache.ShardOptions{Group, Member: replica-<i>, Resources: configmaps, Owners: configmaps}}), every other ShardOptions field at the library's default (Namespace "default", LeaseDuration 15 s, RenewInterval LeaseDuration/3), and the controller with NeedLeaderElection false. The ConfigMaps have no owner, so each hashes by its own UID into one of 256 equal buckets of the hash space, which rendezvous hashing splits among the live replicas. The control plane serves no shardSelector (feature gate ShardedListAndWatch off), so each replica's loop lists and watches all the ConfigMaps and its file journals only its range.
- **keys / buckets**: the objects and buckets of the replica's settled range. **heap / RSS / anon RSS**: as in the cache section (after runtime.GC and debug.FreeOSMemory), once all of its range was reconciled. **first reconcile s**: from the parent's exec of the process to the reconciler's first call (in parentheses: from ctrl.NewManager). **all of its range reconciled**: from exec until the group had all its replicas live, the replica's range was settled (Cache.ShardStatus().Settled) and every object of the range had been reconciled by this replica while it held it (Cache.Holds), counted per bucket, each key once, against the objects of each bucket the parent counted from a metadata list before the start; polled every 5 ms. So a start includes the group's convergence: a replica that saw fewer members at first held more and reconciled keys it then gave away (they count for none), and a replica whose share another still published grew into it only once that one had shrunk, at its next renewal. **start CPU**: the process's CPU time until then. **not held**: reconciles of an object the replica held no longer (queued before its key moved away). **disk**: the replica's directory after its process ended.
- **after the kill**: the survivors forget what they reconciled, then the parent kills replica-0 with SIGKILL; its Lease is left to expire, as after a crash. Each survivor waits until the group has one replica less, its range is settled, and every object of the killed range it took was reconciled by it: **keys taken**, and **all reconciled s** from the kill; **heap / RSS** then. The takeover (below) is the slowest survivor's: the Lease's expiry as the survivors judge it (LeaseDuration after a survivor last saw it renewed, so it may come before LeaseDuration has passed since the kill), their next renewal, each survivor's file listing the part it enters (Owners), then the reconciles. The parent checks that the settled ranges held each bucket once and that the survivors took exactly the killed range's buckets; a failed check is the row's error.
`)
	b.WriteString(targetsTable("reported (the sharded replicas against jcache)", r.shardedReported()))
	b.WriteString("\n" + shardedEnd + "\n")
	return b.String()
}
