package reconcile

import "context"

// fullLister reads the first paginated list of an empty index (relist.go):
// nothing to diff, so no metadata page first; every
// page is read once, in full, from the first page on, and its objects are
// handed over as they stream in, in batches of at most fillBytes (one
// object more when one is larger) or PageSize objects, each an ADDED to
// the relist consumer (relist.fresh). A page whose body breaks is
// requested again from its continue token (halved when it keeps breaking,
// pageBroke), and the objects of it already handed over are skipped: a
// continue token names one snapshot, which lists the same objects in the
// same order. An expired continue token is errSnapshotGone, as for
// pageLister.
type fullLister struct{ l *Loop }

// each reads the pages and hands their objects over in batches.
func (fl fullLister) each(ctx context.Context, fn func(batch) error) (string, error) {
	l := fl.l
	pg := &pager{limit: l.pageSize}
	b := &batcher{fn: fn, max: int(l.opts.PageSize)}
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
			return b.add(it)
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
			return p.ResourceVersion, b.flush()
		}
		cont = p.Continue
	}
}
