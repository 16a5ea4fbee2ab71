package main

// A restarted subject (restart.go): a child started with BENCH_RESTART
// set runs the subject until synced (watchjournal: Loop.WaitForSync on the
// journal file the first process left; informers: HasSynced), reports
// "restarted" with a restartReport, and waits for "exit".

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// restartChild runs a restarted subject until synced, reports, and waits
// for exit.
func restartChild(kind string, n int, cfg *rest.Config, send func(report)) error {
	s := startSampler(50*time.Millisecond, nil) // stopped at sync; an error ends the process
	ns, dir := os.Getenv(envNS), os.Getenv(envDir)
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout(n))
	defer cancel()

	began := time.Now()
	sub, err := newSubject(kind, cfg, ns, dir, n)
	if err != nil {
		return err
	}
	defer sub.close()
	rr := restartReport{Gone: -1}
	// synced records when the subject synced, and what it took until then.
	synced := func() {
		rr.SyncedUnixNano = time.Now().UnixNano()
		rr.Bytes, rr.Requests = sub.counts().bytes.Load(), sub.counts().all.Load()
		rr.CPU = cpuTime().Seconds()
	}
	switch x := sub.(type) {
	case *wjSubject:
		head0, err := x.j.Head()
		if err != nil {
			return err
		}
		x.run()
		if err := x.loop.WaitForSync(ctx); err != nil {
			return fmt.Errorf("watchjournal: waiting for sync: %w (status %+v)", err, x.loop.Status())
		}
		synced()
		rr.Gone = x.loop.Status().Gone
		if err := checkJournal(x.j, head0, filepath.Join(dir, expectedFile), &rr); err != nil {
			return err
		}
		if st, err := x.j.Stats(); err == nil {
			rr.Objects = int(st.Objects)
		}
	case *informerSubject:
		x.start(x.inf.RunWithContext)
		select {
		case <-x.inf.HasSyncedChecker().Done():
		case <-ctx.Done():
			return fmt.Errorf("%s: not synced: %w", kind, ctx.Err())
		}
		synced()
		rr.Objects = len(x.inf.GetStore().ListKeys())
	default:
		return fmt.Errorf("subject %q has no restart", kind)
	}
	at := time.Unix(0, rr.SyncedUnixNano)
	rr.SubjectSeconds = at.Sub(began).Seconds()
	rr.PeakHeap, rr.PeakLive, rr.PeakRSS, _ = peaks(s.stop(), time.Time{}, at, 50*time.Millisecond)
	rr.HWM = procStatus().HWM
	reqs := sub.counts()
	rr.Lists, rr.Pages, rr.Watches, rr.WatchLists = reqs.lists.Load(), reqs.pages.Load(), reqs.watches.Load(), reqs.watchLists.Load()
	rr.Steady = steady()
	send(report{Event: "restarted", Restart: &rr})
	if awaitExit() {
		send(report{Event: "bye"})
	}
	return nil
}

// relistCheck compares what the journal gained since armRelist with the
// changes the parent made during the gap (the expected file in the
// journal's directory, written by changedRelist; absent: nothing changed),
// as checkJournal does, and says it in words. It runs after the relist's
// end was taken; its cost (reading the relist's events) counts in the
// relist's CPU time.
func (s *wjSubject) relistCheck() string {
	var rr restartReport
	if err := checkJournal(s.j, s.headBase, filepath.Join(filepath.Dir(s.j.Path()), expectedFile), &rr); err != nil {
		return "journal check: " + err.Error()
	}
	return rr.Check
}

// checkJournal compares the events j gained after head0 with the changes
// listed in the file at path ("TYPE key" lines): every changed key must
// have exactly one event, of its type, and no other key any.
func checkJournal(j *journal.Journal, head0 uint64, path string, rr *restartReport) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = nil, nil // nothing changed
	}
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if typ, key, ok := strings.Cut(line, " "); ok {
			want[key] = typ
		}
	}
	got := map[string][]string{}
	for from := head0 + 1; ; {
		evs, err := j.Read(from, 1000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			got[e.Key] = append(got[e.Key], string(e.Type))
			rr.Journaled++
		}
		from = evs[len(evs)-1].Offset + 1
	}
	rr.KeysExpected = len(want)
	var missing, extra, wrong []string
	for k, typ := range want {
		switch g := got[k]; {
		case len(g) == 0:
			missing = append(missing, k)
		case len(g) != 1 || g[0] != typ:
			wrong = append(wrong, fmt.Sprintf("%s %v (want %s)", k, g, typ))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%s %v", k, g))
		}
	}
	rr.KeysMissing, rr.KeysExtra, rr.KeysWrong = len(missing), len(extra), len(wrong)
	switch {
	case len(missing)+len(extra)+len(wrong) > 0:
	case len(want) == 0:
		rr.Check = "journal: no event, as nothing changed"
		return nil
	default:
		rr.Check = fmt.Sprintf("journal: exactly the %d changed keys, one event each", len(want))
		return nil
	}
	ex := func(xs []string) string {
		sort.Strings(xs)
		if len(xs) > 3 {
			xs = append(xs[:3], "…")
		}
		return strings.Join(xs, ", ")
	}
	rr.Check = fmt.Sprintf("journal: MISMATCH with the %d changed keys at sync: %d missing (%s), %d extra (%s), %d wrong (%s)",
		len(want), len(missing), ex(missing), len(extra), ex(extra), len(wrong), ex(wrong))
	return nil
}
