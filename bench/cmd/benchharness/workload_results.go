package main

// The workloads' section of the results file (workload.go): per workload
// the subjects' table, the restart with nothing changed, watchjournal's
// disk cost, and the workload targets on them.

import (
	"fmt"
	"slices"
	"strings"
)

// The workloads section's markers: a run without the ConfigMaps replaces
// what is between them (inclusive) and nothing else but the cache section.
const (
	workloadsBegin = "<!-- workloads: begin (benchharness writes this section; a run without the configmaps workload rewrites only it) -->"
	workloadsEnd   = "<!-- workloads: end -->"
)

// workloadTitles describe each workload in the section.
var workloadTitles = map[string]string{
	wlPods:    "Pods of 4–8 KiB, status updates as the churn",
	wlCRs:     "a custom resource (widgets.bench.watchjournal.io), JSON only",
	wlSecrets: "Secrets across 100 namespaces, sealed in watchjournal's file",
}

func (wr workloadResult) servedAt(n int) (served, bool) {
	for _, s := range wr.Served {
		if s.N == n && s.Objects > 0 {
			return s, true
		}
	}
	return served{}, false
}

// diskTable returns watchjournal's disk cost per N of one workload.
func (r *results) diskTable(wr workloadResult) string {
	var b strings.Builder
	b.WriteString("| N | objects as served MiB | B an object | file MiB after the churn | file ÷ served | allocated MiB | allocated ÷ served | retained events MiB | events | written B / event | commits | commits/s | events / commit |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.wlRows {
		if x.Workload != wr.Name || x.Subject != subjWatchjournal || x.Err != "" || x.Disk == nil {
			continue
		}
		d := x.Disk
		sv, ok := wr.servedAt(x.N) // not measured: zero, so "–"
		servedMiB, ratioText, allocRatio := mb(uint64(sv.Bytes)), ratio(float64(d.FileSize), float64(sv.Bytes)), ratio(float64(d.Allocated), float64(sv.Bytes))
		perObject := dash(ok, "%.0f", float64(sv.Bytes)/float64(sv.Objects))
		perEvent := dash(d.Events > 0, "%.0f", float64(d.WriteBytes)/float64(d.Events))
		perSecond := dash(d.BurstSeconds > 0, "%.0f", float64(d.Commits)/d.BurstSeconds)
		perCommit := dash(d.Commits > 0, "%.1f", float64(d.Events)/float64(d.Commits))
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %d | %s | %d | %s | %s |\n", x.N, servedMiB, perObject,
			mb(uint64(d.FileSize)), ratioText, mb(uint64(d.Allocated)), allocRatio, mb(d.JournalBytes), d.Events, perEvent, d.Commits, perSecond, perCommit)
	}
	return b.String()
}

// wlRestartTable returns the restarts with nothing changed of one
// workload's subjects.
func (r *results) wlRestartTable(w string) string {
	var b strings.Builder
	b.WriteString("| N | subject | restart s | restart CPU s | received KiB | peak heap MiB | 410s |\n|--:|---|--:|--:|--:|--:|--:|\n")
	for _, x := range r.wlRows {
		if x.Workload != w || x.Err != "" {
			continue
		}
		if x.RestartSame == nil {
			if x.RestartErr != "" {
				fmt.Fprintf(&b, "| %d | %s | error: %s |||||\n", x.N, x.Subject, cell(x.RestartErr))
			}
			continue
		}
		s := x.RestartSame
		fmt.Fprintf(&b, "| %d | %s | %.2f | %.2f | %s | %s | %s |\n", x.N, x.Subject, s.Seconds, s.CPU, kib(s.Bytes), mb(s.PeakHeap), dash(s.Gone >= 0, "%d", s.Gone))
	}
	return b.String()
}

// wlCacheTable returns the cache subjects' rows of one workload.
func (r *results) wlCacheTable(wr workloadResult) string {
	var b strings.Builder
	b.WriteString("| N | subject | heap MiB | RSS MiB | first reconcile s | all reconciled s | start CPU s | restart: first reconcile s | restart: all reconciled s | restart heap MiB | Get p50 µs | Get p99 µs | List by index p50 ms | disk MiB | disk ÷ served |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.wlCaches {
		if x.Workload != wr.Name {
			continue
		}
		if x.Err != "" {
			fmt.Fprintf(&b, "| %d | %s | error: %s |||||||||||||\n", x.N, x.Subject, cell(x.Err))
			continue
		}
		disk, dr := mb(uint64(x.Restart.DiskBytes)), "–"
		if sv, ok := wr.servedAt(x.N); ok && x.Restart.DiskBytes > 0 {
			dr = ratio(float64(x.Restart.DiskBytes), float64(sv.Bytes))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.1f | %.1f | %.2f | %s | %s |\n", x.N, x.Subject,
			mb(x.First.Steady.HeapInuse), mb(x.First.Steady.RSS), x.First.FirstReconcileSeconds, x.First.AllSeconds, x.First.CPU,
			x.Restart.FirstReconcileSeconds, x.Restart.AllSeconds, mb(x.Restart.Steady.HeapInuse),
			1e6*x.Reads.GetP50, 1e6*x.Reads.GetP99, 1e3*x.Reads.IndexP50, disk, dr)
	}
	return b.String()
}

// workloadTargets evaluates the workload targets on the workloads' rows.
func (r *results) workloadTargets() []target {
	var ts []target
	for _, wr := range r.workloads {
		w := wr.Name
		for _, n := range r.o.ns {
			wj, ok1 := findRow(r.wlRows, w, n, subjWatchjournal)
			inf, ok2 := findRow(r.wlRows, w, n, subjInformer)
			t := newTarget("%s: steady file size ≤ 1.5× the objects' served bytes (N=%d)", w, n)
			if sv, ok := wr.servedAt(n); ok1 && ok && wj.Disk != nil {
				x := float64(wj.Disk.FileSize) / float64(sv.Bytes)
				t.set(x <= 1.5, fmt.Sprintf("%s / %s MiB = %.2f× (after a burst of %d updates, default retention; allocated %s MiB = %s; the retained events %s MiB)",
					mb(uint64(wj.Disk.FileSize)), mb(uint64(sv.Bytes)), x, wj.Disk.Events, mb(uint64(wj.Disk.Allocated)),
					ratio(float64(wj.Disk.Allocated), float64(sv.Bytes)), mb(wj.Disk.JournalBytes)))
			}
			ts = append(ts, t)
			t = newTarget("%s: initial sync ≤ 0.8× the informer's time and ≤ 1.0× its CPU (N=%d)", w, n)
			if ok1 && ok2 {
				a, c := wj.Synced.SyncSeconds/inf.Synced.SyncSeconds, wj.Synced.SyncCPU/inf.Synced.SyncCPU
				t.set(a <= 0.8 && c <= 1.0, fmt.Sprintf("%.2f / %.2f s = %.2f×; CPU %.2f / %.2f s = %.2f×", wj.Synced.SyncSeconds, inf.Synced.SyncSeconds, a,
					wj.Synced.SyncCPU, inf.Synced.SyncCPU, c))
			}
			ts = append(ts, t)
			t = newTarget("%s: steady heap ≤ 5%% of the informer's (N=%d)", w, n)
			if ok1 && ok2 {
				x := float64(wj.Synced.Steady.HeapInuse) / float64(inf.Synced.Steady.HeapInuse)
				t.set(x <= 0.05, fmt.Sprintf("%s / %s MiB = %.1f%%", mb(wj.Synced.Steady.HeapInuse), mb(inf.Synced.Steady.HeapInuse), 100*x))
			}
			ts = append(ts, t)
			t = newTarget("%s: relist peak live heap within 1.1× of the bare watch-list's own, each over its steady live heap (N=%d)", w, n)
			if l, ok := findRow(r.wlRows, w, n, subjWatchList); ok1 && ok && wj.Relisted.PeakLive > 0 && l.Relisted.PeakLive > 0 && wj.Synced.Steady.HeapLive > 0 && l.Synced.Steady.HeapLive > 0 {
				a := float64(wj.Relisted.PeakLive) / float64(wj.Synced.Steady.HeapLive)
				c := float64(l.Relisted.PeakLive) / float64(l.Synced.Steady.HeapLive)
				t.set(a <= 1.1*c, fmt.Sprintf("watchjournal %s / %s MiB = %.2f×; bare watch-list %s / %s MiB = %.2f×; %.2f×",
					mb(wj.Relisted.PeakLive), mb(wj.Synced.Steady.HeapLive), a, mb(l.Relisted.PeakLive), mb(l.Synced.Steady.HeapLive), c, a/c))
			}
			ts = append(ts, t)
			j, ok1 := findCache(r.wlCaches, w, n, subjJCache)
			c, ok2 := findCache(r.wlCaches, w, n, subjCRCache)
			if !ok1 && !ok2 {
				continue
			}
			t = newTarget("%s: jcache's files ≤ 1.5× the objects' served bytes (N=%d)", w, n)
			if sv, ok := wr.servedAt(n); ok1 && ok && j.Restart.DiskBytes > 0 {
				x := float64(j.Restart.DiskBytes) / float64(sv.Bytes)
				t.set(x <= 1.5, fmt.Sprintf("%s / %s MiB = %.2f× (after the restart; no churn)", mb(uint64(j.Restart.DiskBytes)), mb(uint64(sv.Bytes)), x))
			}
			ts = append(ts, t)
			t = newTarget("%s: jcache Get p50 ≤ 2× crcache's, List through the index of %d ≤ 3× (N=%d)", w, cacheGroupSize, n)
			if ok1 && ok2 && c.Reads.GetP50 > 0 && c.Reads.IndexP50 > 0 {
				g, l := j.Reads.GetP50/c.Reads.GetP50, j.Reads.IndexP50/c.Reads.IndexP50
				t.set(g <= 2 && l <= 3, fmt.Sprintf("Get %.1f / %.1f µs = %.2f×; List by index %.2f / %.2f ms = %.2f×", 1e6*j.Reads.GetP50, 1e6*c.Reads.GetP50, g,
					1e3*j.Reads.IndexP50, 1e3*c.Reads.IndexP50, l))
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// workloadSection returns the workloads' section of the results file,
// markers included; "" when none ran.
func (r *results) workloadSection() string {
	if len(r.wlRows) == 0 && len(r.wlCaches) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(workloadsBegin + "\n\n")
	b.WriteString("## Real shapes: Pods, a custom resource, Secrets\n\n")
	b.WriteString(r.writtenBy())
	b.WriteString("Each workload's objects are labelled " + workloadLabel + "=<workload>, and every subject watches with that label selector. " +
		"The subjects and their measures are those of the ConfigMaps' table above (sync, burst, forced relists through a 410 Gone, a restart with nothing changed), " +
		"with the burst being the workload's churn. After a workload its objects are deleted (in etcd, by key prefix) and etcd compacted and defragmented.\n")
	for _, wr := range r.workloads {
		fmt.Fprintf(&b, "\n### %s: %s\n\n", wr.Name, workloadTitles[wr.Name])
		for _, sv := range wr.Served {
			if sv.Objects > 0 {
				fmt.Fprintf(&b, "N=%d: %d objects, %.0f bytes an object of JSON as served (%d to %d; after the bursts). ", sv.N, sv.Objects, float64(sv.Bytes)/float64(sv.Objects), sv.Min, sv.Max)
			}
		}
		b.WriteString(r.creationsText(wr.Creations) + "\n\n")
		b.WriteString(rowsTable(slices.DeleteFunc(slices.Clone(r.wlRows), func(x row) bool { return x.Workload != wr.Name })))
		b.WriteString("\nRestart with nothing changed (a new process; watchjournal reopens its file):\n\n")
		b.WriteString(r.wlRestartTable(wr.Name))
		b.WriteString("\nwatchjournal's disk cost over the burst:\n\n")
		b.WriteString(r.diskTable(wr))
		if slices.ContainsFunc(r.wlCaches, func(x cacheRow) bool { return x.Workload == wr.Name }) {
			b.WriteString("\nThe operator process (the cache subjects, as in the cache section) on this workload's objects:\n\n")
			b.WriteString(r.wlCacheTable(wr))
		}
	}
	b.WriteString(`
- **Pods**: two containers (env, ports, resources, a mount), a volume, annotations, a nodeName (nothing schedules them and no kubelet runs: the apiserver only stores them); the churn is a merge patch of the status subresource (phase, conditions, containerStatuses), as a kubelet writes. **crs**: a CRD with a structural schema (x-kubernetes-preserve-unknown-fields in spec and status) and the status subresource; the churn patches status (observedGeneration, conditions); the informer is a dynamic informer (unstructured), JSON on the wire for every subject. **secrets**: watched across all namespaces; watchjournal opens its file with a keyring (journal.Options.Keyring, reconcile.Options.SecretPayloads): every object stored sealed (AES-256-GCM); the churn patches data.
- **Subjects**: watchjournal, informer (typed for Pods and Secrets, client-go's defaults; dynamic for the custom resource) and bare-watch-list (the streaming list read and thrown away: the reference for the relist's peak heap), as in the ConfigMaps' table; crcache and jcache, the operator process of the cache section with For(the workload's type) (unstructured for the custom resource; jcache with jcache.Options{KeyFiles, SecretPayloads} for the Secrets), selecting the workload's label, a field index on its group label (` + groupLabel + `, 100 objects a value), reads as there but without the List of a namespace; **disk** is the cache directory after the restart, against the objects' served bytes.
- **disk cost**: **file** is journal.Stats().FileSize once the burst was seen (default retention); **allocated** its allocated blocks (st_blocks × 512: bbolt grows the file by doubling it, up to 1 GiB steps, sparse until written, so at small N the file size is mostly room not yet used); **served** the sum of the objects' JSON as served (a paginated list's items), after the subjects' bursts; **written B / event** the child's /proc/self/io write_bytes over the burst ÷ the burst's updates; **commits** the loop's journal commits over the burst (reconcile.Status.CommitLatency.Count; bbolt fsyncs twice a commit: the pages, then the meta page), **commits/s** over the burst's time (first write to the last seen).
`)
	b.WriteString(targetsTable("target (each workload and N)", r.workloadTargets()))
	b.WriteString("\n" + workloadsEnd + "\n")
	return b.String()
}
