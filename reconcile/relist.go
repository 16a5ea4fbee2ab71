package reconcile

// The relist consumer: what every list does with the batches of its lister
// (lister.go). It holds one journal.Relist. add diffs a batch against
// the index range it covers (Diff, diff.go): pages of etcd-backed resources
// come in key order, so the diff is a merge of two sorted streams and
// memory stays bounded by one page; once a list broke key order, key by
// key (diffLookup, with Relist.MarkSeen). It asks the server the reasons
// of its DELETEDs (reason.go) and stages the events (while the next batch
// is read, for a streaming list: stagepipe.go). commit turns the keys
// indexed but not listed into DELETEDs (tail) and commits at the list's
// resourceVersion; abort drops the stage. fresh (the first paginated list
// of an empty index): every item an ADDED, no tail. Which list runs
// (streaming or paginated): New's doc and listmode.go; a verify is always
// paginated, as it reads at exactly one resourceVersion. Only a complete
// list commits (doc.go).

import (
	"context"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// relist is one list's consumer. Not safe for concurrent use.
type relist struct {
	l   *Loop
	rel *journal.Relist
	cf  *confirmer
	// origin tags the events; unordered finds deletions by lookup.
	origin    journal.Origin
	unordered bool
	// fresh: the index was empty and no inheritance waits: every item is
	// an ADDED (listfull.go).
	fresh bool
	// async stages each batch on another goroutine while the next is read.
	async bool
	pipe  stagePipe
	// lastKey is the last key listed, in key order.
	lastKey   string
	committed bool
}

// beginRelist starts the consumer of one list s.
func (l *Loop) beginRelist(s stateList) (*relist, error) {
	rel, err := l.w.BeginRelist()
	if err != nil {
		return nil, journalError{err}
	}
	r := &relist{l: l, rel: rel, origin: s.origin, unordered: s.unordered}
	l.staging = TypeCounts{}
	if err := l.readPending(); err != nil { // shard.go
		r.abort()
		return nil, journalError{err}
	}
	l.update(func(x *Status) { x.listBegins() })
	r.cf = l.newConfirmer()
	return r, nil
}

// add diffs one batch against the index and stages the events.
func (r *relist) add(ctx context.Context, b batch) error {
	l := r.l
	var evs []journal.Event
	var err error
	switch {
	case r.fresh:
		evs = make([]journal.Event, len(b.items))
		for i, it := range b.items {
			evs[i] = event(journal.Added, it)
		}
	case !r.unordered:
		if !sortedAfter(r.lastKey, b.items) {
			return errUnordered
		}
		evs, err = l.diffRange(r.lastKey, b.items)
	default:
		if err := r.pipe.wait(); err != nil {
			return err
		}
		evs, err = l.diffLookup(r.rel, b.items)
	}
	if err != nil {
		return journalError{err}
	}
	if !r.fresh {
		if err := r.cf.reasons(ctx, evs, b.rv); err != nil {
			return err
		}
	}
	if b.stage != nil {
		err = b.stage(ctx, evs, r.stage)
	} else {
		err = r.stage(evs)
	}
	if err != nil {
		return err
	}
	if len(b.items) > 0 && !r.unordered {
		r.lastKey = b.items[len(b.items)-1].Key
	}
	return nil
}

// stage prepares evs (prepareStage) and stages them, on the pipe when
// async.
func (r *relist) stage(evs []journal.Event) error {
	evs = r.l.prepareStage(r.origin, evs)
	if r.async {
		return r.pipe.stage(r.rel, evs)
	}
	if err := r.rel.Stage(evs); err != nil {
		return journalError{err}
	}
	return nil
}

// commit ends a complete list at its resourceVersion rv: the tail, then
// the commit. It returns the number of events committed and their offsets
// (0, 0 for none).
func (r *relist) commit(ctx context.Context, rv string) (n int, first, last uint64, err error) {
	if err := r.pipe.wait(); err != nil {
		return 0, 0, 0, err
	}
	r.async = false // the tail reads the Relist (Unseen) between its stages
	if !r.fresh {
		// Keys indexed but not listed: deleted while we were away.
		if err := r.tail(ctx, rv); err != nil {
			return 0, 0, 0, err
		}
	}
	start := time.Now()
	first, last, err = r.rel.Commit(rv)
	r.l.committed(start, err)
	if err != nil {
		return 0, 0, 0, journalError{err}
	}
	r.committed = true
	return r.rel.Staged(), first, last, nil
}

// abort drops what was staged unless the relist committed.
func (r *relist) abort() {
	if r.cf != nil {
		r.cf.done()
	}
	if !r.committed {
		_ = r.pipe.wait()
		_ = r.rel.Abort()
	}
}

// journalError marks an error of the journal (fatal) apart from the
// apiserver's (retried).
type journalError struct{ err error }

// Error returns the journal's error message.
func (e journalError) Error() string { return e.err.Error() }

// indexEmpty reports whether the index holds no key.
func (l *Loop) indexEmpty() (bool, error) {
	e, err := l.j.ScanIndex("", 1)
	return len(e) == 0, err
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
		l.staging.add(evs[i].Type)
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
// reason the confirmer finds at the list's resourceVersion rv.
func (r *relist) tail(ctx context.Context, rv string) error {
	l := r.l
	chunk := int(l.opts.PageSize)
	cursor := ""
	if !r.unordered {
		cursor = r.lastKey
	}
	for {
		entries, err := l.j.ScanIndex(cursor, chunk)
		if err != nil {
			return journalError{err}
		}
		if len(entries) == 0 {
			return r.inheritTail(ctx, rv) // shard.go
		}
		cursor = entries[len(entries)-1].Key
		gone := entries
		if r.unordered {
			if gone, err = r.rel.Unseen(entries); err != nil {
				return journalError{err}
			}
		}
		evs := Diff(gone, nil)
		if err := r.cf.reasons(ctx, evs, rv); err != nil {
			return err
		}
		if err := r.stage(evs); err != nil {
			return err
		}
		if len(entries) < chunk {
			return r.inheritTail(ctx, rv) // shard.go
		}
	}
}
