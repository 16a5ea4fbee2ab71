package main

// The restarts' part of the results: the table of the relist with 1% changed
// and of the restarts (restart.go, journalctl.go), and its targets.

import (
	"fmt"
	"slices"
	"strings"
)

func kib(b int64) string { return dash(b != 0, "%.0f", float64(b)/1024) }

// restartTable returns the relists with 1% changed and the restarts as one
// Markdown table.
func (r *results) restartTable() string {
	var b strings.Builder
	b.WriteString("| N | subject | changed | relist 1% s | relist 1% CPU s | relist 1% peak live MiB | relist 1% seen | restart s | restart KiB received | restart requests | restart CPU s | restart peak heap MiB | restart peak RSS MiB | restart 1% s | restart 1% KiB received | restart 1% peak heap MiB | journal at sync |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|---|--:|--:|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, x := range r.rows {
		if x.Err != "" {
			continue // in the main table
		}
		rel, relCPU, relLive, relSeen := "–", "–", "–", "–"
		switch {
		case x.ChangedRelist != nil:
			c := *x.ChangedRelist
			rel, relCPU, relLive = secs(c.RelistSeconds), secs(c.RelistCPU), mb(c.PeakLive)
			relSeen = relistSeen(row{Relists: []report{c}, Relisted: c})
		case x.ChangedRelistErr != "":
			relSeen = "error: " + cell(x.ChangedRelistErr)
		}
		same, sameKiB, sameReqs, sameCPU, sameHeap, sameRSS := "–", "–", "–", "–", "–", "–"
		if s := x.RestartSame; s != nil {
			same, sameKiB, sameCPU, sameHeap, sameRSS = inProcess(s), kib(s.Bytes), secs(s.CPU), mb(s.PeakHeap), mb(s.PeakRSS)
			if s.Requests > 0 {
				sameReqs = fmt.Sprintf("%d (lists %d, watch-lists %d, watches %d)", s.Requests, s.Lists, s.WatchLists, s.Watches)
			}
			if c := x.RestartChanged; c != nil && x.Subject == subjWatchjournal {
				sameReqs += fmt.Sprintf("; 410s %d, with 1%% changed %d", s.Gone, c.Gone)
			}
		}
		chg, chgKiB, chgHeap, check := "–", "–", "–", "–"
		if c := x.RestartChanged; c != nil {
			chg, chgKiB, chgHeap = inProcess(c), kib(c.Bytes), mb(c.PeakHeap)
			if c.Check != "" {
				check = c.Check
			}
		}
		if x.RestartErr != "" {
			check = "error: " + cell(x.RestartErr)
		}
		changed := dash(x.Changed > 0, "%d", x.Changed)
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.N, x.Subject, changed, rel, relCPU, relLive, relSeen, same, sameKiB, sameReqs, sameCPU, sameHeap, sameRSS, chg, chgKiB, chgHeap, check)
	}
	return b.String()
}

// inProcess formats a restart's time from exec, and from the subject's
// start within the process in parentheses when known.
func inProcess(x *restartResult) string {
	if x.SubjectSeconds == 0 {
		return secs(x.Seconds)
	}
	return fmt.Sprintf("%s (%s)", secs(x.Seconds), secs(x.SubjectSeconds))
}

// restartSection is the results file's section on the relist with 1%
// changed and the restarts.
func (r *results) restartSection() string {
	var b strings.Builder
	b.WriteString("\n### Relist with 1% changed, restarts, journalctl\n\n")
	b.WriteString(r.restartTable())
	b.WriteString(`
- **changed**: objects changed in each gap: 1% of N (at least 1), one in 20 of them deleted and as many created (named after a neighbour, so they fall between existing keys), the rest modified (a merge patch). The count stays N.
- **relist 1%**: one more forced relist after those above (-relists), the same way (cut proxy, compaction, apiserver restart), with the changes made while the proxy was cut: time from the list request that relisted until the subject holds every object again (an informer's Replace delivered N notifications: updates, adds and same-version updates), CPU from arming, and the relist's peak live heap; **seen** as in the table above, and for watchjournal whether the events its journal gained during the relist are one per changed key, of the change's type (after the relists with nothing changed: none). The bare subjects list again after the same restart: the server's cost.
- **restart**: the subject's process exits (watchjournal closes its journal), and a new process of the same subject starts through the same proxy, nothing changed meanwhile: from the parent's exec until synced (in parentheses: from the subject's creation in the started process, so without the process's start-up) — watchjournal: Loop.WaitForSync returns (HasSynced; the same journal file, resumed from its stored resourceVersion, which the watch cache still serves: no compaction since); informers: HasSynced after the new process listed everything, as an informer does on every start. **KiB received**: response body bytes the process read from the apiserver until then, discovery included (a rest.Config WrapTransport); **requests**: all of them, with the first list pages, streaming lists (sendInitialEvents) and watches among them, and for watchjournal the 410s its loop met until synced in both restarts (0: its stored resourceVersion was served); **CPU**: the process's user + system time until synced; **peak heap / RSS**: the largest HeapInuse / VmRSS sampled every 50 ms from the process's start until synced.
- **restart 1%**: the same after 1% of the objects changed while no process ran (this gap undoes the previous gap's deletes and creates, and modifies other objects). **journal at sync**: watchjournal's check that the events it journaled from the reopen until synced are exactly one per changed key, of the change's type.
- **journalctl**: ` + "`journalctl watch configmaps --db FILE -n bench --kubeconfig K --metrics-addr ADDR`" + `, the CLI with its own defaults (client rate limit, page size, timeouts), built by make bench, talking to the apiserver directly. In the table above, its sync s is from exec until its /metrics says watchjournal_synced 1 with N objects in the index (polled every 50 ms), its sync CPU is the process's, its heap is go_memstats_heap_inuse_bytes and its RSS VmRSS (anon: RssAnon) 3 s after the sync, without a forced GC; then SIGTERM and a restart with nothing changed, timed the same way (its bytes are not counted).
`)
	return b.String()
}

// restartTargets are the restart targets on this run's numbers, for every N.
func (r *results) restartTargets() []target {
	var ts []target
	for _, n := range r.o.ns {
		wj, okW := r.find(n, subjWatchjournal)
		inf, okI := r.find(n, subjInformer)
		list, okL := r.find(n, subjList)
		if !okW {
			continue
		}
		if okI {
			ts = append(ts, ratioTarget(fmt.Sprintf("initial sync ≤ 1.0× the informer's sync (N=%d)", n),
				wj.Synced.SyncSeconds, inf.Synced.SyncSeconds, "s", 1.0))
			ts = append(ts, ratioTarget(fmt.Sprintf("relist after a 410, nothing changed, ≤ 1.0× the informer's relist (N=%d, medians)", n),
				wj.Relisted.RelistSeconds, inf.Relisted.RelistSeconds, "s", 1.0))
		}
		wjRel := 0.0
		if wj.ChangedRelist != nil {
			wjRel = wj.ChangedRelist.RelistSeconds
		}
		if okI && inf.ChangedRelist != nil {
			ts = append(ts, ratioTarget(fmt.Sprintf("relist after a 410 with %d objects (1%%) changed ≤ 1.0× the informer's relist (N=%d)", wj.Changed, n),
				wjRel, inf.ChangedRelist.RelistSeconds, "s", 1.0))
		}
		if okL && list.ChangedRelist != nil {
			ts = append(ts, ratioTarget(fmt.Sprintf("relist after a 410 with %d objects (1%%) changed ≤ 0.7× the bare paginated full list (N=%d)", wj.Changed, n),
				wjRel, list.ChangedRelist.RelistSeconds, "s", 0.7))
		}
		if okI && inf.RestartSame != nil {
			var s float64
			var bytes int64
			if wj.RestartSame != nil {
				s, bytes = wj.RestartSame.Seconds, wj.RestartSame.Bytes
			}
			ts = append(ts, ratioTarget(fmt.Sprintf("restart with nothing changed: time to synced ≤ 0.1× the informer's (N=%d)", n),
				s, inf.RestartSame.Seconds, "s", 0.1))
			t := newTarget("restart with nothing changed: bytes received ≤ 1%% of the informer's (N=%d)", n)
			if bytes > 0 && inf.RestartSame.Bytes > 0 {
				f := float64(bytes) / float64(inf.RestartSame.Bytes)
				t.set(f <= 0.01, fmt.Sprintf("%s / %s KiB = %.2f%%", kib(bytes), kib(inf.RestartSame.Bytes), 100*f))
			}
			ts = append(ts, t)
		}
		if okI && inf.RestartChanged != nil {
			var s float64
			if wj.RestartChanged != nil {
				s = wj.RestartChanged.Seconds
			}
			t := ratioTarget(fmt.Sprintf("restart with %d objects (1%%) changed, stored resourceVersion still served: time to synced ≤ 0.3× the informer's (N=%d)", wj.Changed, n),
				s, inf.RestartChanged.Seconds, "s", 0.3)
			if wj.RestartChanged != nil && wj.RestartChanged.Gone > 0 {
				t.measured += fmt.Sprintf(" (but the loop met %d 410s: the stored resourceVersion was not served)", wj.RestartChanged.Gone)
			}
			ts = append(ts, t)
		}
		t := newTarget("relists: the journal gained one event per changed key, none when nothing changed (N=%d)", n)
		if c := wj.ChangedRelist; c != nil && len(wj.Relists) > 0 {
			same := wj.Relists[len(wj.Relists)-1].Note
			t.set(strings.HasPrefix(same, "journal: no event") && strings.HasPrefix(c.Note, "journal: exactly"),
				"nothing changed (last relist): "+same+"; 1% changed: "+c.Note)
		}
		ts = append(ts, t)
		t = newTarget("restarts: the journal gained exactly the changed keys by the time it synced, none when nothing changed (N=%d)", n)
		if s, c := wj.RestartSame, wj.RestartChanged; s != nil && c != nil {
			t.set(s.KeysMissing+s.KeysExtra+s.KeysWrong == 0 && s.KeysExpected == 0 && c.KeysMissing+c.KeysExtra+c.KeysWrong == 0 && c.KeysExpected > 0,
				"nothing changed: "+s.Check+"; 1% changed: "+c.Check)
		}
		ts = append(ts, t)
	}
	if slices.Contains(r.o.ns, 200_000) {
		t := newTarget("RSS at N=200000 under the metadata informer's")
		wj, ok1 := r.find(200_000, subjWatchjournal)
		md, ok2 := r.find(200_000, subjMetadata)
		if ok1 && ok2 && wj.Synced.Steady.RSS > 0 && md.Synced.Steady.RSS > 0 {
			measured := fmt.Sprintf("watchjournal %s / %s MiB (anon %s MiB)", mb(wj.Synced.Steady.RSS), mb(md.Synced.Steady.RSS), mb(wj.Synced.Steady.RSSAnon))
			ok := wj.Synced.Steady.RSS < md.Synced.Steady.RSS
			if cli, ok3 := r.find(200_000, subjJournalctl); ok3 && cli.Synced.Steady.RSS > 0 {
				measured += fmt.Sprintf("; journalctl watch %s MiB", mb(cli.Synced.Steady.RSS))
				ok = ok && cli.Synced.Steady.RSS < md.Synced.Steady.RSS
			}
			t.set(ok, measured)
		}
		ts = append(ts, t)
	}
	if slices.Contains(r.o.ns, 1_000_000) {
		t := newTarget("at 1,000,000 objects: sync and relist complete, steady heap within 1.25× of the heap at N=20000")
		big, ok1 := r.find(1_000_000, subjWatchjournal)
		small, ok2 := r.find(20_000, subjWatchjournal)
		switch {
		case !ok1:
			if x, found := first(r.rows, func(x row) bool { return x.N == 1_000_000 && x.Subject == subjWatchjournal }); found {
				t.set(false, "error: "+cell(x.Err))
			}
		case !ok2:
			t.measured = fmt.Sprintf("synced in %.1f s, relisted in %.1f s; no N=20000 in this run", big.Synced.SyncSeconds, big.Relisted.RelistSeconds)
		default:
			f := float64(big.Synced.Steady.HeapInuse) / float64(small.Synced.Steady.HeapInuse)
			t.set(len(big.Relists) > 0 && big.Relisted.RelistSeconds > 0 && f <= 1.25, fmt.Sprintf("synced in %.1f s, relisted in %.1f s (median of %d); heap %s / %s MiB = %.2f×",
				big.Synced.SyncSeconds, big.Relisted.RelistSeconds, len(big.Relists), mb(big.Synced.Steady.HeapInuse), mb(small.Synced.Steady.HeapInuse), f))
		}
		ts = append(ts, t)
	}
	return ts
}
