package reconcile

// The paginated lister (limit/continue), one batch a page. A relist lists
// metadata only (PartialObjectMetadataList): most objects are unchanged
// after a 410, and their diff needs no more; a page with changes is read
// again in full at the same snapshot (fillAndStage). The next metadata
// page is requested while one is diffed; a page whose body breaks is
// requested again, smaller when it keeps breaking (pageBroke).

import (
	"context"
	"errors"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/watchjournal/watchjournal/journal"
)

// pageLister reads a list in pages, metadata only unless the loop learned
// that the server serves no metadata-only lists (Loop.fullPages). exactRV,
// when set, is the resourceVersion its first page reads at exactly (a
// verify, verify.go).
type pageLister struct {
	l       *Loop
	exactRV string
}

// each reads every page and hands each one over as a batch.
func (pl pageLister) each(ctx context.Context, fn func(batch) error) (string, error) {
	l := pl.l
	meta := !l.fullPages
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
			if cont == "" {
				req.exactRV = pl.exactRV
			}
			p, err := l.c.list(ctx, req, l.timeouts())
			ch <- fetched{p, err}
		}()
		return ch
	}

	pages := &pager{limit: l.pageSize}
	cont := ""
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
			return "", l.listError(err, cont)
		}
		pages.broke = 0
		if p.Continue != "" {
			next = fetch(p.Continue, pages.limit)
		}
		l.update(func(x *Status) { x.listPage(len(p.Items), p.Bytes) })
		// Only the shard's keys (shard.go); the page's own count still
		// decides how much of it fillAndStage reads.
		b := batch{items: l.c.shard.filter(p.Items), rv: p.ResourceVersion}
		if meta && !l.c.res.MetadataOnly {
			from, rv, n := cont, p.ResourceVersion, len(p.Items)
			b.stage = func(ctx context.Context, evs []journal.Event, stage func([]journal.Event) error) error {
				if !slices.ContainsFunc(evs, func(e journal.Event) bool { return e.Type != journal.Deleted }) {
					return stage(evs) // DELETEDs only: no object to read
				}
				return l.fillAndStage(ctx, stage, evs, from, rv, n, pages)
			}
		}
		if err := fn(b); err != nil {
			return "", err
		}
		if cont = p.Continue; cont == "" {
			return p.ResourceVersion, nil
		}
	}
}

// listError classifies the error of a page requested with continue token
// cont.
func (l *Loop) listError(err error, cont string) error {
	switch {
	case l.c.res.MetadataOnly && (errors.Is(err, errNoMetadataLists) || apierrors.IsNotAcceptable(err)):
		// Never full objects for a metadata-only journal: a 406 ends Run
		// (ErrRejected); anything else is retried.
		return err
	case errors.Is(err, errNoMetadataLists), apierrors.IsNotAcceptable(err):
		return errFullPages
	case cont != "" && isGone(err):
		// The snapshot the token pointed at was compacted. The Status
		// carries a fresh token that would continue at a newer
		// resourceVersion: an inconsistent list. Never follow it; start
		// again.
		return errSnapshotGone
	}
	return err
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
// (errSnapshotGone; what was staged is dropped with the relist). The full page
// is read in requests of pg.limit objects, from cont on, each following the
// last one's continue token; a request whose body breaks is made again, and
// pg shrinks when it keeps breaking (pageBroke).
func (l *Loop) fillAndStage(ctx context.Context, stage func([]journal.Event) error, evs []journal.Event, cont, rv string, n int, pg *pager) error {
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
		if err := stage(evs[done:end]); err != nil {
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
				return errSnapshotGone
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
				return errSnapshotGone
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
		return errSnapshotGone
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

// timeouts returns the timeouts of one list request.
func (l *Loop) timeouts() timeouts {
	return timeouts{response: l.opts.RequestTimeout, progress: l.opts.ProgressTimeout}
}
