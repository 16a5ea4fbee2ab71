package jcache

// Indexes on disk: IndexField's index kept in the journal file, written in
// the same transaction as the object (journal.Indexes.Add), so that
// client.MatchingFields{...} is a lookup of the keys holding the value and
// a read of their objects, not a decode of every object of the namespace.
//
// controller-runtime calls IndexField before the informer starts (the
// manager registers indexes, then starts the cache): AddIndexers registers
// each index function on the feed's journal under a name of the file's,
// "<flavor>:<index>" (typed, unstructured or metadata: a typed and an
// unstructured informer share a file, and their functions take other
// objects). The journal's function decodes the stored bytes (transformed
// before they were stored: transform.go) into the informer's object type,
// as the informer's handlers get it,
// and calls the user's function: the decode is paid at write time, by the
// writer (the feed's reconcile.Loop), once per change of the key; a read
// through the index decodes only the objects it returns.
//
// Indexes follow the code. The file cannot tell whether the function
// given under a name today is the one its entries were computed with (a
// new version of the program may change it; a changed transform starts
// the file afresh: transform.go). So every registration is followed by a reindex: AddIndexers
// registers the functions (the writer indexes with them from then on)
// and starts a goroutine that runs journal.Reindex, which decodes
// every stored object once per index, in
// bounded batches beside the writer, and rewrites only the keys whose
// values differ (a name the file does not record is built the same way).
// Until it is done the index is pending in the file, and a read through
// it takes the read-time path below: a List is correct throughout, the
// cache syncs without waiting for the reindex, and the reindex is off the
// path to the first reconcile. The goroutine ends when the reindex does, or
// when the feed's last release stops it (the file closes after it).
//
// The read-time path stays: an index the file does not keep (the
// registration failed, the reindex is not done, or the namespace
// index, which is a key-prefix scan)
// is evaluated by decoding the namespace's objects (indexer.go).
//
// An index function is called by the writer inside its write transaction:
// a function that fails (a decode error) fails the write, as client-go's
// store panics on one; the loop retries it. The function must not read the
// cache. Index values are stored as the function returns them, except in
// a file that seals its objects (Secrets, SealResources): there each value
// is stored as its keyed hash (journal/sealfile.go), so an index over a
// Secret's data puts none of it in the file; a lookup hashes the value it
// is asked for, and lookup below checks each object's real values again.
// ListIndexFuncValues cannot list hashed values: it evaluates the
// function over the objects.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// indexReads counts how index reads were served, for tests: lookups in an
// index on disk, and read-time evaluations (a decode of every object of
// the namespace).
var indexReads struct{ disk, scan atomic.Int64 }

// diskIndexes is the informer's indexes kept in its file: index name →
// the file's name for it.
type diskIndexes struct {
	mu    sync.Mutex
	names map[string]string
}

func (d *diskIndexes) get(name string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.names[name]
	return n, ok
}

// diskName is the file's name of the informer's index name.
func (i *informer) diskName(name string) string {
	switch i.objType.(type) {
	case *unstructured.Unstructured:
		return "unstructured:" + name
	case *metav1.PartialObjectMetadata:
		return "metadata:" + name
	}
	return "typed:" + name
}

// indexOnDisk registers add's functions (but the namespace index) on the
// feed's journal. A failure is logged: the indexes stay evaluated at read
// time. It must not run under i.mu (a build decodes, which takes it).
func (i *informer) indexOnDisk(add toolscache.Indexers) {
	if i.f == nil {
		return
	}
	fns := map[string]journal.IndexFunc{}
	names := map[string]string{}
	for name, fn := range add {
		if name == toolscache.NamespaceIndex || fn == nil {
			continue
		}
		fns[i.diskName(name)] = func(b []byte) ([]string, error) {
			o, err := i.decode(b)
			if err != nil {
				return nil, err
			}
			vals, err := fn(o)
			if err == nil && i.hasHandlers() {
				// For the handlers' dispatch (decoded.go), once the index
				// function is done with it: a handler never shares it with
				// a running index function.
				i.decoded.put(b, o)
			}
			return vals, err
		}
		names[name] = i.diskName(name)
	}
	if len(fns) == 0 {
		return
	}
	if err := i.f.j.Indexes().Add(fns); err != nil {
		i.log.Error(err, "keeping an index in the journal file failed; it is evaluated at read time", "file", i.f.path)
		return
	}
	i.disk.mu.Lock()
	if i.disk.names == nil {
		i.disk.names = map[string]string{}
	}
	maps.Copy(i.disk.names, names)
	i.disk.mu.Unlock()
	i.f.reindexes.start(i.f.j, slices.Sorted(maps.Keys(fns)), i.log.WithValues("file", i.f.path))
}

// reindexes are a feed's reindex runs: each started by an
// AddIndexers, running until it is done or stop. The zero value is ready.
type reindexes struct {
	wg sync.WaitGroup

	mu      sync.Mutex
	ctx     context.Context // made by the first start; cancelled by stop
	cancel  context.CancelFunc
	stopped bool
	all     []*reindexRun
}

// reindexRun is one Reindex; stats and err are set when done is
// closed.
type reindexRun struct {
	names []string
	done  chan struct{}
	stats journal.ReindexStats
	err   error
}

// start reindexes names in j in a goroutine.
func (v *reindexes) start(j *journal.Journal, names []string, log logr.Logger) {
	r := &reindexRun{names: names, done: make(chan struct{})}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.all = append(v.all, r)
	if v.stopped {
		r.err = journal.ErrClosed
		close(r.done)
		return
	}
	if v.ctx == nil {
		v.ctx, v.cancel = context.WithCancel(context.Background())
	}
	ctx := v.ctx
	v.wg.Go(func() {
		defer close(r.done)
		begin := time.Now()
		r.stats, r.err = j.Indexes().Reindex(ctx, names)
		switch {
		case r.err == nil:
			log.V(1).Info("indexes reindexed against their functions", "indexes", names, "keys", r.stats.Keys,
				"rewritten", r.stats.Rewritten, "transactions", r.stats.Transactions, "duration", time.Since(begin))
		case ctx.Err() != nil || errors.Is(r.err, journal.ErrClosed):
		default:
			log.Error(r.err, "reindexing indexes kept in the journal file failed; they are evaluated at read time", "indexes", names)
		}
	})
}

// stop ends the reindexes and waits for them; a later start fails
// its reindex with journal.ErrClosed at once.
func (v *reindexes) stop() {
	v.mu.Lock()
	v.stopped = true
	if v.cancel != nil {
		v.cancel()
	}
	v.mu.Unlock()
	v.wg.Wait()
}

// wait waits for every reindex started so far and returns them.
func (v *reindexes) wait(ctx context.Context) ([]*reindexRun, error) {
	v.mu.Lock()
	all := slices.Clone(v.all)
	v.mu.Unlock()
	for _, r := range all {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return all, nil
}

// lookup calls fn with each object whose index name includes value,
// through the index on disk, in one read transaction; where the file
// stores its values hashed, each object's values are checked again. ok is false when the
// file keeps no such index (fn was not called).
func (x *indexer) lookup(name, value string, fn func(key string, o runtime.Object)) (ok bool, err error) {
	dn, found := x.inf.disk.get(name)
	if !found || x.inf.f == nil {
		return false, nil
	}
	// Hashed values: the object's own values decide (a hash collision
	// would be the only way to differ).
	var check toolscache.IndexFunc
	if x.inf.f.j.Indexes().Hashed() {
		check, _ = x.inf.indexFunc(name)
	}
	// The batch in flight (tail.go): its keys' objects are checked
	// against the function, whatever the file's index says of them.
	pending := x.inf.f.tail.overlay("")
	if len(pending) > 0 {
		check, _ = x.inf.indexFunc(name)
	}
	err = x.inf.f.j.ViewObjects(func(v *journal.ObjectView) error {
		d := readDecoder{inf: x.inf, fn: func(k string, o runtime.Object) error { // decoded on all cores (readdecode.go)
			if check != nil {
				vals, err := check(o)
				if err != nil {
					return err
				}
				if !slices.Contains(vals, value) {
					return nil
				}
			}
			fn(k, o)
			return nil
		}}
		over := pending.above(v.Head())
		inTail := make(map[string]bool, len(over))
		for _, e := range over {
			inTail[e.key] = true
		}
		err := v.Lookup(dn, value, func(k string, b []byte) (bool, error) {
			if inTail[k] {
				return true, nil
			}
			x.inf.f.readObject(len(b))
			return true, d.add(k, b)
		})
		for _, e := range over {
			if err != nil {
				break
			}
			if !e.deleted {
				x.inf.f.readObject(len(e.obj))
				err = d.add(e.key, e.obj)
			}
		}
		// The objects before an error are handed over first.
		if ferr := d.flush(); err == nil {
			err = ferr
		}
		return err
	})
	if errors.Is(err, journal.ErrNoIndex) {
		return false, nil
	}
	indexReads.disk.Add(1)
	return true, err
}
