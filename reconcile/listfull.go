package reconcile

// The first list of an empty index. There is nothing to diff: every
// listed object is an ADDED. A metadata page first (what a relist reads,
// list.go) would be pure cost, as every page would then be read again in
// full; so each page is read once, in full, and its objects are staged as
// they stream in, in batches of at most fillBytes of objects (one object
// more when one is larger) or PageSize objects: memory follows neither
// the page's size nor the list's.

import (
	"context"

	"github.com/watchjournal/watchjournal/journal"
)

// listFull reads every page of a list in full, once each, from the first
// page on, and stages each object as an ADDED with origin. It returns the
// list's resourceVersion. A page whose body breaks is requested again from
// its continue token (halved when it keeps breaking, pageBroke), and the
// objects of it already staged are skipped: a continue token names one
// snapshot, which lists the same objects in the same order. An expired
// continue token is an errRestart, as in listOnce.
func (l *Loop) listFull(ctx context.Context, rel *journal.Relist, origin journal.Origin) (string, error) {
	pg := &pager{limit: l.listLimit()}
	var batch []journal.Event
	held := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := l.stage(rel, origin, batch)
		clear(batch)
		batch, held = batch[:0], 0
		return err
	}
	// skip counts the objects of the page from cont that are staged or
	// batched already: a request that broke handed them over.
	cont, skip := "", 0
	for {
		read, n := 0, 0
		p, err := l.c.listEach(ctx, listRequest{limit: pg.limit, cont: cont}, l.timeouts(), func(it Item) error {
			if read++; read <= skip {
				return nil
			}
			n++
			if !l.c.shard.in(it.UID) {
				return nil // another shard's key (shard.go)
			}
			batch = append(batch, event(journal.Added, it))
			held += len(it.Object)
			if held >= fillBytes || len(batch) >= int(l.opts.PageSize) {
				return flush()
			}
			return nil
		})
		if err != nil {
			if l.pageBroke(pg, err) {
				skip = max(skip, read)
				continue
			}
			return "", l.listError(err, cont)
		}
		pg.broke = 0
		l.update(func(x *Status) { x.listPage(n, p.Bytes) })
		skip = max(skip-read, 0)
		if p.Continue == "" {
			return p.ResourceVersion, flush()
		}
		cont = p.Continue
	}
}
