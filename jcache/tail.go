package jcache

// The tail: the watch's events between their staging and their commit.
//
// A watch batch is one bbolt write transaction, and its commit fsyncs.
// The feed's loop hands each batch's events to the tail once it has
// planned them, before their commit and while the batch before may
// still be committing (reconcile.Options.Staged, reconcile/pipeline.go),
// and the tail lets them go when the commit returns. In between, handlers are given them (handler.go), with the
// object before each MODIFIED taken when the batch is staged, and reads
// see them over the disk (indexer.go, diskindex.go): fsync is never on
// the path from the watch to an in-process handler or read, as with an
// informer, whose store is changed before its handlers are called.
//
// Invariant: the tail holds the events of the batches in flight, in
// offset order, starting right after the file's committed head: the one
// committing and those planned since. Per key, its latest event
// (an object, or deleted) is newer than anything the file holds for
// the key as long as the file's head is below the event's offset; a
// read that saw the file at head h uses only the tail's events above h,
// so a batch that committed between the read's look at the tail and
// its read transaction is never applied twice, nor a later file state
// covered by an older tail.
//
// Bound: the commit that runs and the batches planned meanwhile, which
// wait for it merged into one of at most reconcile.Options.BatchLimit
// events (1000 by default) before the loop waits; their frames' objects
// stay within the watch's byte budget (8 MiB, or one object larger than
// that), which a frame holds until its batch has committed; plus, per
// MODIFIED, the object before it.
//
// Offsets. A handler's position (registration.pos), which retention
// holds and the record of the handlers last current is made of
// (retention.go, catchup.go), counts committed events only; what a
// handler was given from the tail is tracked apart (registration.tpos)
// and becomes its position when the commit is read back from the file,
// so a committed record never claims more than the file holds. A batch
// whose commit fails is aborted: the tail drops it and counts the abort;
// a handler that was given any of it gives the events at those offsets
// again from the file (the server sends the batch again on the resumed
// watch), so it may see a change twice, never miss one.
//
// A relist's events (after a 410) are not staged: they are seen when the
// relist commits. jcache.Exact's sources deliver from the file after the
// commit: their guarantee is about durable commits (exact.go).

import (
	"slices"
	"strings"
	"sync"

	"github.com/watchjournal/watchjournal/journal"
)

// tail is a feed's uncommitted batches.
type tail struct {
	mu      sync.Mutex
	evs     []journal.Event // the batches in flight, in offset order
	olds    [][]byte        // per event of evs, its key's object before it, where a handler needs it
	latest  map[string]int  // key → index in evs of its latest event
	aborts  uint64          // batches dropped without a commit
	changed chan struct{}   // closed and replaced when the tail changes

	// read returns the file's object of a key (nil when absent), for the
	// old object of an event whose key no batch in flight holds. Set
	// when the feed opens, before its loop runs.
	read func(key string) ([]byte, error)
}

// stage holds evs, a batch planned after those the tail holds, and
// returns the function that lets it go once its commit returned err
// (reconcile.Options.Staged). Called from the loop's goroutine, outside
// any transaction.
func (t *tail) stage(evs []journal.Event) func(error) {
	if len(evs) == 0 {
		return func(error) {}
	}
	// The object before each MODIFIED, and before each DELETED that
	// carries none: an earlier event of the batch, the tail's, else the
	// file's (no batch in flight changes that key, so the file is
	// current for it).
	olds := make([][]byte, len(evs))
	var fromFile []int
	t.mu.Lock()
	last := map[string]int{}
	for i, e := range evs {
		needs := e.Type == journal.Modified || e.Type == journal.Deleted && e.Object == nil
		if k, ok := last[e.Key]; ok {
			olds[i] = objectOf(evs[k])
		} else if k, ok := t.latest[e.Key]; ok {
			olds[i] = objectOf(t.evs[k])
		} else if needs {
			fromFile = append(fromFile, i)
		}
		last[e.Key] = i
	}
	t.mu.Unlock()
	for _, i := range fromFile {
		if t.read != nil {
			olds[i], _ = t.read(evs[i].Key) // a failed read: a metadata-only old object, as when the file holds none
		}
	}
	t.mu.Lock()
	t.evs = slices.Concat(t.evs, evs)
	t.olds = slices.Concat(t.olds, olds)
	t.changedLocked()
	t.mu.Unlock()
	lo, hi := evs[0].Offset, evs[len(evs)-1].Offset
	return func(err error) { t.settle(lo, hi, err) }
}

// objectOf returns the object a key has after e: e's, or none after a
// DELETED.
func objectOf(e journal.Event) []byte {
	if e.Type == journal.Deleted {
		return nil
	}
	return e.Object
}

// settle lets the batch of offsets lo..hi go: committed (err nil), or
// aborted, and with it every batch planned after it.
func (t *tail) settle(lo, hi uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := 0
	if err == nil {
		for i < len(t.evs) && t.evs[i].Offset <= hi {
			i++
		}
		t.evs, t.olds = t.evs[i:], t.olds[i:]
	} else {
		for i < len(t.evs) && t.evs[i].Offset < lo {
			i++
		}
		t.evs, t.olds = t.evs[:i:i], t.olds[:i:i]
		t.aborts++
	}
	t.changedLocked()
}

// changedLocked rebuilds latest and wakes the waiters.
func (t *tail) changedLocked() {
	t.latest = make(map[string]int, len(t.evs))
	for i, e := range t.evs {
		t.latest[e.Key] = i
	}
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// wait returns a channel closed at the tail's next change.
func (t *tail) wait() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// abortCount returns how many batches were dropped without a commit.
func (t *tail) abortCount() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.aborts
}

// after returns the tail's events after offset pos, with the object
// before each (see olds), when the first of them is pos+1 (none when
// the tail is empty or starts later: the file has events the caller has
// not read yet), and the abort count they belong to.
func (t *tail) after(pos uint64) ([]journal.Event, [][]byte, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.evs) == 0 || pos < t.evs[0].Offset-1 || pos >= t.evs[len(t.evs)-1].Offset {
		return nil, nil, t.aborts
	}
	i := int(pos + 1 - t.evs[0].Offset)
	return t.evs[i:], t.olds[i:], t.aborts
}

// tailEntry is the tail's latest state of a key: its object, or deleted,
// at offset.
type tailEntry struct {
	key     string
	obj     []byte
	deleted bool
	offset  uint64
}

// overlay is the tail's per-key state as a read applies it over the file.
type overlay []tailEntry

// overlay returns the latest state of each key of the tail that starts
// with prefix, in key order.
func (t *tail) overlay(prefix string) overlay {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.evs) == 0 {
		return nil
	}
	var o overlay
	for k, i := range t.latest {
		if strings.HasPrefix(k, prefix) {
			o = append(o, entryOf(t.evs[i]))
		}
	}
	slices.SortFunc(o, func(a, b tailEntry) int { return strings.Compare(a.key, b.key) })
	return o
}

// entry returns the tail's latest state of key.
func (t *tail) entry(key string) (tailEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.latest[key]
	if !ok {
		return tailEntry{}, false
	}
	return entryOf(t.evs[i]), true
}

func entryOf(e journal.Event) tailEntry {
	return tailEntry{key: e.Key, obj: e.Object, deleted: e.Type == journal.Deleted, offset: e.Offset}
}

// above returns the entries newer than a read of the file at head: those
// of a batch that had not committed when the read began.
func (o overlay) above(head uint64) overlay {
	if len(o) == 0 {
		return nil
	}
	var out overlay
	for _, e := range o {
		if e.offset > head {
			out = append(out, e)
		}
	}
	return out
}

// merge walks keys in order over the file's and the overlay's: file is
// called with each key of the file's walk (in key order), and merge
// calls emit for the overlay's keys before it and, for a key both hold,
// the overlay's state instead of the file's. rest emits what is left
// once the file's walk ended. A deleted state is never emitted.
type merge struct {
	o    overlay
	i    int
	emit func(key string, obj []byte) error
}

// file handles key k of the file's walk: it returns the object to use
// for k (b, or the overlay's), and false when the overlay deleted k.
func (m *merge) file(k string, b []byte) ([]byte, bool, error) {
	for m.i < len(m.o) && m.o[m.i].key < k {
		if err := m.one(m.o[m.i]); err != nil {
			return nil, false, err
		}
		m.i++
	}
	if m.i < len(m.o) && m.o[m.i].key == k {
		e := m.o[m.i]
		m.i++
		return e.obj, !e.deleted, nil
	}
	return b, true, nil
}

// rest emits the overlay's keys after the file's last.
func (m *merge) rest() error {
	for ; m.i < len(m.o); m.i++ {
		if err := m.one(m.o[m.i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *merge) one(e tailEntry) error {
	if e.deleted {
		return nil
	}
	return m.emit(e.key, e.obj)
}
