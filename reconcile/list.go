package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/watchjournal/watchjournal/internal/loopmetrics"
	"github.com/watchjournal/watchjournal/journal"
)

// maxListRestarts is how many times in a row a list starts again after its
// continue token expired before the loop backs off.
const maxListRestarts = 3

// errRestart asks list to start again from the first page: after an
// expired continue token, or with lookups when pages broke key order, or
// with full pages when the server serves no metadata-only lists.
type errRestart struct{ unordered, fullPages bool }

// Error says the list must start again.
func (errRestart) Error() string { return "restart list" }

// list runs one complete list, a streaming one where the server serves it
// (listmode.go), and watches on.
func (l *Loop) list(ctx context.Context, s stateList) (state, error) {
	if err := l.detectShard(ctx); err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		return l.fail(s, err)
	}
	if !s.verify && l.streaming() {
		return l.streamList(ctx, s)
	}
	return l.pagedList(ctx, s)
}

// pagedList runs one complete paginated list, diffs it against the index
// and commits the difference, then watches from the list's resourceVersion.
func (l *Loop) pagedList(ctx context.Context, s stateList) (state, error) {
	for restarts := 0; ; restarts++ {
		start := l.opts.Clock.Now()
		rv, staged, first, last, err := l.listOnce(ctx, s)
		if ctx.Err() != nil {
			if je, ok := err.(journalError); ok && !errors.Is(je.err, journal.ErrNoSpace) {
				// A journal error as ctx ended is still Run's to return.
				return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
			}
			return s, nil
		}
		if r, ok := err.(errRestart); ok {
			if r.fullPages && !l.fullPages {
				l.log.Info("the apiserver serves no metadata-only lists: relisting with full pages")
				l.fullPages = true
				restarts--
				continue
			}
			if r.unordered && !s.unordered {
				l.log.Info("list pages not in key order: relisting with lookups")
				s.unordered = true
				restarts--
				continue
			}
			l.update(func(x *Status) { x.ListRestarts++ })
			if restarts+1 >= maxListRestarts {
				return l.fail(s, fmt.Errorf("%w: continue token expired %d times in a row", ErrList, restarts+1))
			}
			l.log.Info("continue token expired (410) mid-list: starting the list again from the first page")
			continue
		}
		if err != nil {
			if je, ok := err.(journalError); ok {
				if errors.Is(je.err, journal.ErrNoSpace) {
					// The staged list was dropped; try it all again later.
					return l.fail(s, fmt.Errorf("%w: %w", ErrJournal, je.err))
				}
				return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
			}
			return l.fail(s, fmt.Errorf("%w: %w", ErrList, err))
		}
		l.listed(s, start, rv, staged, first, last)
		return stateWatch{rv: rv, goneOrigin: journal.OriginRelist, fromList: true}, nil
	}
}

// listed records a complete list s that began at start and committed
// staged events at offsets first..last, at resourceVersion rv.
func (l *Loop) listed(s stateList, start time.Time, rv string, staged int, first, last uint64) {
	l.succeed()
	lost := l.divergences(s, staged, first, last)
	l.scheduleVerify()
	l.update(func(x *Status) {
		x.countList(s, x.ResourceVersion == "")
		x.Lists++
		x.ResourceVersion = rv
		x.Journaled.Add(s.origin, l.staging)
		x.Events += staged
		if s.verify {
			x.Verifies++
			x.Divergences += lost
			x.LastVerifyFirst, x.LastVerifyLast = first, last
		}
	})
	l.markSynced(syncedByList)
	if lost > 0 {
		l.log.Info("verify: the watch had lost events; the relist journaled the difference",
			"events", lost, "resourceVersion", rv)
	}
	l.log.Info("list complete", "resourceVersion", rv, "events", staged,
		"origin", string(s.origin), "took", time.Since(start))
}

// journalError marks an error of the journal (fatal) apart from the
// apiserver's (retried).
type journalError struct{ err error }

// Error returns the journal's error message.
func (e journalError) Error() string { return e.err.Error() }

// listOnce lists every page and stages the diff; it commits only when the
// list is complete. It returns the list's resourceVersion, the number of
// events committed and their offsets (0, 0 for none).
//
// It lists metadata only (PartialObjectMetadataList): most objects are
// unchanged after a 410, and their diff needs no more. A page with changes
// (every page of a first list) is fetched again in full, at the same
// snapshot (its continue token, or resourceVersionMatch=Exact for the first
// page), and streamed into the stage for the objects the events carry, so
// that memory follows neither the page's nor the objects' size. The next
// metadata page is requested while one is diffed.
func (l *Loop) listOnce(ctx context.Context, s stateList) (rv string, n int, first, last uint64, err error) {
	rel, err := l.w.BeginRelist()
	if err != nil {
		return "", 0, 0, 0, journalError{err}
	}
	committed := false
	defer func() {
		if !committed {
			_ = rel.Abort()
		}
	}()
	meta := !l.fullPages
	l.staging = loopmetrics.TypeCounts{}
	if err = l.readPending(); err != nil { // shard.go
		return "", 0, 0, 0, journalError{err}
	}
	l.update(func(x *Status) { x.listBegins() })
	if !s.verify {
		empty, err := l.indexEmpty()
		if err != nil {
			return "", 0, 0, 0, journalError{err}
		}
		if empty && l.inherit == nil {
			// Nothing to diff: one full read per page (listfull.go).
			if rv, err = l.listFull(ctx, rel, s.origin); err != nil {
				return "", 0, 0, 0, err
			}
			n, first, last, err = l.commitList(rel, rv)
			committed = err == nil
			return rv, n, first, last, err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		p   *page
		err error
	}
	fetch := func(cont string, limit int64) <-chan fetched {
		ch := make(chan fetched, 1)
		go func() { // ends with its request; ctx is cancelled on return
			req := listRequest{limit: limit, cont: cont, meta: meta}
			if cont == "" && s.exact {
				req.exactRV = s.applied // a verify, like with like (verify.go)
			}
			p, err := l.c.list(ctx, req, l.timeouts())
			ch <- fetched{p, err}
		}()
		return ch
	}

	pages := &pager{limit: l.listLimit()}
	cf := l.newConfirmer()
	defer cf.done()
	cont, lastKey := "", ""
	next := fetch("", pages.limit)
	for {
		f := <-next
		p, err := f.p, f.err
		if err != nil {
			if l.pageBroke(pages, err) {
				// The same page again, from its continue token (the first
				// page: nothing is staged yet).
				next = fetch(cont, pages.limit)
				continue
			}
			return "", 0, 0, 0, l.listError(err, cont)
		}
		pages.broke = 0
		if p.Continue != "" {
			next = fetch(p.Continue, pages.limit)
		}
		l.update(func(x *Status) { x.listPage(len(p.Items), p.Bytes) })
		// Only the shard's keys (shard.go); the page's own count still
		// decides how much of it fillAndStage reads.
		items := l.c.shard.filter(p.Items)
		var evs []journal.Event
		if !s.unordered {
			if !sortedAfter(lastKey, items) {
				return "", 0, 0, 0, errRestart{unordered: true}
			}
			evs, err = l.diffRange(lastKey, items)
		} else {
			evs, err = l.diffLookup(rel, items)
		}
		if err != nil {
			return "", 0, 0, 0, journalError{err}
		}
		if err := cf.reasons(ctx, evs, p.ResourceVersion); err != nil {
			return "", 0, 0, 0, err
		}
		if meta && needObjects(evs) && !l.c.metadataOnly {
			err = l.fillAndStage(ctx, rel, s.origin, evs, cont, p.ResourceVersion, len(p.Items), pages)
		} else {
			err = l.stage(rel, s.origin, evs)
		}
		if err != nil {
			return "", 0, 0, 0, err
		}
		if len(items) > 0 && !s.unordered {
			lastKey = items[len(items)-1].Key
		}
		rv, cont = p.ResourceVersion, p.Continue
		if cont == "" {
			break
		}
	}
	// Keys indexed but not listed: deleted while we were away.
	if err := l.tail(ctx, rel, s, lastKey, rv, cf); err != nil {
		return "", 0, 0, 0, err
	}
	n, first, last, err = l.commitList(rel, rv)
	committed = err == nil
	return rv, n, first, last, err
}

// commitList commits what rel staged, at the list's resourceVersion rv,
// and returns the number of events and their offsets (0, 0 for none).
func (l *Loop) commitList(rel *journal.Relist, rv string) (n int, first, last uint64, err error) {
	start := time.Now()
	first, last, err = rel.Commit(rv)
	l.committed(start, err)
	if err != nil {
		return 0, 0, 0, journalError{err}
	}
	return rel.Staged(), first, last, nil
}

// indexEmpty reports whether the index holds no key.
func (l *Loop) indexEmpty() (bool, error) {
	e, err := l.j.ScanIndex("", 1)
	return len(e) == 0, err
}

// listError classifies the error of a page requested with continue token
// cont.
func (l *Loop) listError(err error, cont string) error {
	switch {
	case l.c.metadataOnly && (errors.Is(err, errNoMetadataLists) || apierrors.IsNotAcceptable(err)):
		// Never full objects for a metadata-only journal: a 406 ends Run
		// (ErrRejected); anything else is retried.
		return err
	case errors.Is(err, errNoMetadataLists), apierrors.IsNotAcceptable(err):
		return errRestart{fullPages: true}
	case cont != "" && isGone(err):
		// The snapshot the token pointed at was compacted. The Status
		// carries a fresh token that would continue at a newer
		// resourceVersion: an inconsistent list. Never follow it; start
		// again.
		return errRestart{}
	}
	return err
}

// needObjects reports whether evs carry an ADDED or MODIFIED, which needs
// the object.
func needObjects(evs []journal.Event) bool {
	for _, e := range evs {
		if e.Type != journal.Deleted {
			return true
		}
	}
	return false
}

// fillBytes bounds the objects a page's events hold before they are
// staged: fillAndStage stages the events it has filled, in order, each time
// they pass it.
const fillBytes = 4 << 20

// fillAndStage fetches the page of n items requested with continue token
// cont (the first page when empty, at exactly resourceVersion rv) in full,
// sets the objects of the ADDED and MODIFIED events in evs as they stream
// in, and stages evs in order, holding about fillBytes of objects at most
// (one object more when one is larger): memory does not follow the page's
// size (SCENARIOS S12). The page is the same snapshot; an item that
// differs, or one that is missing, means the snapshot is gone: start again
// (errRestart; what was staged is dropped with the relist). The full page
// is read in requests of pg.limit objects, from cont on, each following the
// last one's continue token; a request whose body breaks is made again, and
// pg shrinks when it keeps breaking (pageBroke).
func (l *Loop) fillAndStage(ctx context.Context, rel *journal.Relist, origin journal.Origin, evs []journal.Event, cont, rv string, n int, pg *pager) error {
	req := listRequest{cont: cont}
	if cont == "" {
		req.exactRV = rv
	}
	need := make(map[string]int, len(evs))
	for i := range evs {
		if evs[i].Type != journal.Deleted {
			need[evs[i].Key] = i
		}
	}
	done, held := 0, 0 // evs[:done] are staged; held bytes of objects are not
	flush := func(all bool) error {
		end := done
		for end < len(evs) && (evs[end].Type == journal.Deleted || evs[end].Object != nil) {
			end++
		}
		if end == done || (!all && held < fillBytes) {
			return nil
		}
		if err := l.stage(rel, origin, evs[done:end]); err != nil {
			return err
		}
		for i := done; i < end; i++ {
			held -= len(evs[i].Object)
			evs[i].Object = nil
		}
		done = end
		return nil
	}
	// read counts the items of the page read so far: the first n items
	// from cont in this snapshot are the page's.
	read := 0
	for len(need) > 0 && read < n {
		req.limit = pg.limit
		from := read
		p, err := l.c.listEach(ctx, req, l.timeouts(), func(it Item) error {
			read++
			i, ok := need[it.Key]
			if !ok {
				return nil
			}
			if it.UID != evs[i].UID || it.ResourceVersion != evs[i].ResourceVersion {
				return errRestart{}
			}
			delete(need, it.Key)
			evs[i].Object = it.Object
			held += len(it.Object)
			return flush(false)
		})
		if p != nil {
			l.update(func(x *Status) { x.ListBytes += p.Bytes })
		}
		if err != nil {
			if l.pageBroke(pg, err) {
				read = from
				continue
			}
			if isGone(err) {
				return errRestart{}
			}
			return err
		}
		pg.broke = 0
		if p.Continue == "" {
			break
		}
		req = listRequest{cont: p.Continue}
	}
	if len(need) > 0 {
		return errRestart{}
	}
	return flush(true)
}

// pager is the page size of one list, in objects, and how many times in a
// row its current request broke mid-body.
type pager struct {
	limit int64
	broke int
}

// pageBroke reports whether the page request that failed with err is to be
// made again at once, at pg.limit: when its body broke (bodyError) once, at
// the same size; when it broke twice in a row, at half the size (at least
// one object), which the loop keeps for its later lists. A page of one
// object that keeps breaking, and any other error, go to the loop's backoff.
func (l *Loop) pageBroke(pg *pager, err error) bool {
	var be *bodyError
	if !errors.As(err, &be) {
		return false
	}
	if pg.broke++; pg.broke == 1 {
		l.log.Info("list page broke mid-body: requesting it again", "limit", pg.limit, "error", err)
		return true
	}
	if pg.limit <= 1 {
		return false
	}
	from := pg.limit
	pg.limit, pg.broke = max(1, pg.limit/2), 0
	l.pageSize = pg.limit
	l.log.Info("list pages keep breaking mid-body (too large for the link?): halving the page size",
		"from", from, "to", pg.limit, "error", err)
	return true
}

// listLimit returns the page size of the next list: Options.PageSize, or
// less once pages kept breaking (pageBroke).
func (l *Loop) listLimit() int64 {
	if l.pageSize > 0 {
		return l.pageSize
	}
	return l.opts.PageSize
}

// timeouts returns the timeouts of one list request.
func (l *Loop) timeouts() timeouts {
	return timeouts{response: l.opts.RequestTimeout, progress: l.opts.ProgressTimeout}
}

func (l *Loop) stage(rel *journal.Relist, origin journal.Origin, evs []journal.Event) error {
	evs = l.prepareStage(origin, evs)
	if err := rel.Stage(evs); err != nil {
		return journalError{err}
	}
	return nil
}

// prepareStage sets the origin and reasons of evs and counts them in the
// status, before they are staged; it returns evs, with the events a
// previous owner's index calls for (shard.go, inheritStage).
func (l *Loop) prepareStage(origin journal.Origin, evs []journal.Event) []journal.Event {
	evs = l.inheritStage(evs)
	for i := range evs {
		evs[i].Origin = origin
		if evs[i].Type == journal.Added && evs[i].Reason == "" && !l.pending.Empty() && l.pending.ContainsUID(evs[i].UID) && !l.inherit.covers(evs[i].UID) {
			evs[i].Reason = journal.ReasonMoved // entered by a range change (shard.go)
		}
		l.staging.Add(evs[i].Type)
	}
	return evs
}

// diffRange diffs a sorted page against the index entries in (after,
// page's last key], reading the index in chunks so that a range with many
// deleted keys still costs bounded memory.
func (l *Loop) diffRange(after string, items []Item) ([]journal.Event, error) {
	if len(items) == 0 {
		return nil, nil
	}
	through := items[len(items)-1].Key
	chunk := int(l.opts.PageSize)
	var out []journal.Event
	cursor, i := after, 0
	for {
		entries, err := l.j.ScanIndex(cursor, chunk)
		if err != nil {
			return nil, err
		}
		end := len(entries) < chunk
		for k, e := range entries {
			if e.Key > through {
				entries, end = entries[:k], true
				break
			}
		}
		// Listed items up to the chunk's last key (all that remain at the end).
		hi := len(items)
		if !end && len(entries) > 0 {
			lastKey := entries[len(entries)-1].Key
			hi = i
			for hi < len(items) && items[hi].Key <= lastKey {
				hi++
			}
		}
		out = append(out, Diff(entries, items[i:hi])...)
		i = hi
		if end {
			return out, nil
		}
		cursor = entries[len(entries)-1].Key
	}
}

// diffLookup diffs a page in any order by looking each key up, and marks
// the keys seen for the deletion pass.
func (l *Loop) diffLookup(rel *journal.Relist, items []Item) ([]journal.Event, error) {
	var out []journal.Event
	keys := make([]string, 0, len(items))
	for _, it := range items {
		cur, ok, err := l.j.Lookup(it.Key)
		if err != nil {
			return nil, err
		}
		var idx []journal.IndexEntry
		if ok {
			idx = []journal.IndexEntry{cur}
		}
		out = append(out, Diff(idx, []Item{it})...)
		keys = append(keys, it.Key)
	}
	return out, rel.MarkSeen(keys)
}

// tail stages DELETED for indexed keys the list did not contain: those after
// the last listed key (ordered), or those not seen (unordered), with the
// reason cf finds at the list's resourceVersion rv.
func (l *Loop) tail(ctx context.Context, rel *journal.Relist, s stateList, last, rv string, cf *confirmer) error {
	chunk := int(l.opts.PageSize)
	cursor := ""
	if !s.unordered {
		cursor = last
	}
	for {
		entries, err := l.j.ScanIndex(cursor, chunk)
		if err != nil {
			return journalError{err}
		}
		if len(entries) == 0 {
			return l.inheritTail(ctx, rel, s.origin, rv, cf) // shard.go
		}
		cursor = entries[len(entries)-1].Key
		gone := entries
		if s.unordered {
			if gone, err = rel.Unseen(entries); err != nil {
				return journalError{err}
			}
		}
		evs := Diff(gone, nil)
		if err := cf.reasons(ctx, evs, rv); err != nil {
			return err
		}
		if err := l.stage(rel, s.origin, evs); err != nil {
			return err
		}
		if len(entries) < chunk {
			return l.inheritTail(ctx, rel, s.origin, rv, cf) // shard.go
		}
	}
}
