package bench

// In-process benchmarks of the journal and the relist diff: no apiserver.
// Each reports its rate as a custom metric, so the results read the same
// whatever b.N the framework picks:
//
//	BenchmarkJournalAppend   events/s through Writer.Update (group commit);
//	                         …/objects keeps objects (Settings.KeepObjects)
//	BenchmarkJournalRead     events/s through Journal.Read (replay)
//	BenchmarkJournalTrim     events/s through Writer.Trim; …/objects keeps objects
//	BenchmarkRelistDiff      objects/s of reconcile.Diff over ScanIndex pages
//	BenchmarkRelistStaged    objects/s of BeginRelist / Stage / Commit
//	BenchmarkIndexSize       bytes on disk per index entry
//	BenchmarkBboltAppend     bbolt's settings for the journal bucket, with bbolt alone
//	BenchmarkJournalHeap     live Go heap a Journal keeps after taking in N objects
//
// Objects are ConfigMaps as the apiserver serves them, about 1 KiB of JSON;
// keys look like "bench/cm-000123", UIDs have 36 characters and
// resourceVersions 6 digits.

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	bbolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
	"github.com/watchjournal/watchjournal/reconcile"
)

const (
	// indexN is the number of objects in the index the relist and size
	// benchmarks work against.
	indexN = 50_000
	// pageSize is the list page size, as reconcile's default.
	pageSize = 500
	// objectSize is the approximate size of one object's JSON, in bytes.
	objectSize = 1024
)

var (
	fixtureOnce sync.Once
	keys, uids  []string
)

// fixture builds the keys and UIDs of indexN objects, in key order.
func fixture() {
	fixtureOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		keys = make([]string, indexN)
		uids = make([]string, indexN)
		for i := range indexN {
			keys[i] = fmt.Sprintf("bench/cm-%06d", i)
			uids[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff,
				r.Uint32()&0xfff, 0x8000|r.Uint32()&0x3fff, r.Uint64()&0xffffffffffff)
		}
	})
}

// rv returns a 6-digit resourceVersion.
func rv(n int) string { return strconv.Itoa(100_000 + n%900_000) }

// object returns a ConfigMap of about objectSize bytes of JSON, shaped as
// the apiserver serves it.
func object(i int, resourceVersion string) []byte {
	head := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%06d","namespace":"bench",`+
		`"uid":%q,"resourceVersion":%q,"creationTimestamp":"2026-11-30T12:00:00Z",`+
		`"managedFields":[{"manager":"benchharness","operation":"Update","apiVersion":"v1","time":"2026-11-30T12:00:00Z",`+
		`"fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}}}}]},"data":{"payload":"`,
		i, uids[i%indexN], resourceVersion)
	tail := `"}}`
	pad := max(0, objectSize-len(head)-len(tail))
	b := make([]byte, 0, len(head)+pad+len(tail))
	b = append(b, head...)
	for k := range pad {
		b = append(b, 'a'+byte(k%26))
	}
	return append(b, tail...)
}

var benchResource = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "bench"}

// openJournal opens a new journal file in a temporary directory.
func openJournal(b *testing.B, opts journal.Options) *journal.Journal {
	b.Helper()
	res := benchResource
	opts.Resource = &res
	j, err := journal.Open(filepath.Join(b.TempDir(), "journal.db"), &opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close() })
	return j
}

// inBatches calls write with each range [lo, hi) of 0 to n, 1,000 long,
// in order, and fails b on its error.
func inBatches(b *testing.B, n int, write func(lo, hi int) error) {
	b.Helper()
	for lo := 0; lo < n; lo += 1000 {
		if err := write(lo, min(lo+1000, n)); err != nil {
			b.Fatal(err)
		}
	}
}

// fillIndex appends ADDED for the first n objects in key order, in
// transactions of 1,000 events, with the object when withObject is set.
func fillIndex(b *testing.B, j *journal.Journal, n int, withObject bool) {
	b.Helper()
	fixture()
	inBatches(b, n, func(lo, hi int) error {
		return j.Writer().Update(func(tx *journal.Tx) error {
			for i := lo; i < hi; i++ {
				e := journal.Event{Type: journal.Added, Key: keys[i], UID: uids[i], ResourceVersion: rv(i), Origin: journal.OriginRelist}
				if withObject {
					e.Object = object(i, e.ResourceVersion)
				}
				if _, err := tx.Append(&e); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion(rv(n))
		})
	})
}

// listed returns the items a list of the first n objects would give: the
// indexed resourceVersions, except that every changeEvery-th object (none
// when 0) has resourceVersion rv(gen + i).
func listed(n, changeEvery, gen int) []reconcile.Item {
	fixture()
	items := make([]reconcile.Item, n)
	for i := range items {
		r := rv(i)
		if changeEvery > 0 && i%changeEvery == 0 {
			r = rv(gen + i)
		}
		items[i] = reconcile.Item{Key: keys[i], UID: uids[i], ResourceVersion: r, Object: object(i, r)}
	}
	return items
}

// BenchmarkJournalAppend appends watch events of about 1 KiB, many per
// Writer.Update (group commit), with fsync on each commit unless nosync.
// Keys cycle over indexN objects: ADDED on the first pass, MODIFIED after.
func BenchmarkJournalAppend(b *testing.B) {
	fixture()
	cases := []struct {
		name  string
		batch int
		opts  journal.Options
	}{
		{"batch=1000", 1000, journal.Options{}},
		{"batch=1000/nosync", 1000, journal.Options{NoSync: true}},
		{"batch=1000/nosync/objects", 1000, journal.Options{NoSync: true}},
		// With one secondary index whose function decodes the object into
		// a *corev1.ConfigMap (as jcache's IndexField does): the decode is
		// paid here, once per change.
		{"batch=1000/nosync/objects/index", 1000, journal.Options{NoSync: true}},
		{"batch=1000/mmap=1GiB", 1000, journal.Options{InitialMmapSize: 1 << 30}},
		{"batch=100", 100, journal.Options{}},
		{"batch=10", 10, journal.Options{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			j := openJournal(b, c.opts)
			if strings.Contains(c.name, "/objects") {
				if err := j.Settings().KeepObjects(); err != nil { // journal/objects.go: the objects bucket
					b.Fatal(err)
				}
			}
			if strings.HasSuffix(c.name, "/index") {
				if err := j.Indexes().Add(map[string]journal.IndexFunc{"name": indexByName}); err != nil {
					b.Fatal(err)
				}
			}
			objs := make([][]byte, 256)
			for i := range objs {
				objs[i] = object(i, rv(i))
			}
			b.SetBytes(int64(c.batch * len(objs[0])))
			n := 0
			for b.Loop() {
				err := j.Writer().Update(func(tx *journal.Tx) error {
					for range c.batch {
						i := n % indexN
						typ := journal.Modified
						if n < indexN {
							typ = journal.Added
						}
						e := journal.Event{Type: typ, Key: keys[i], UID: uids[i], ResourceVersion: rv(n),
							Object: objs[n%len(objs)], Origin: journal.OriginWatch}
						if _, err := tx.Append(&e); err != nil {
							return err
						}
						n++
					}
					return tx.SetResourceVersion(rv(n))
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			reportFile(b, j, n)
		})
	}
}

// indexByName is a secondary index's function as jcache runs one: the
// object decoded into its Go type, then a field read.
func indexByName(obj []byte) ([]string, error) {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(obj, &cm); err != nil {
		return nil, err
	}
	return []string{cm.Name}, nil
}

// reportFile reports the journal file's size per event.
func reportFile(b *testing.B, j *journal.Journal, events int) {
	b.Helper()
	st, err := j.Stats()
	if err != nil {
		b.Fatal(err)
	}
	if events > 0 {
		b.ReportMetric(float64(st.FileSize)/float64(events), "file-B/event")
	}
}

// BenchmarkJournalTrim trims a journal of 20,000 events of about 1 KiB,
// each still its key's latest, 1,000 per Writer.Trim (as the compactor
// does): without objects kept, and with them, where every trimmed record
// is first copied into the objects bucket (the worst case of
// journal/objects.go's trim).
func BenchmarkJournalTrim(b *testing.B) {
	const events = 20_000
	for _, kept := range []bool{false, true} {
		name := "nosync"
		if kept {
			name += "/objects"
		}
		b.Run(name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				b.StopTimer()
				j := openJournal(b, journal.Options{NoSync: true})
				if kept {
					if err := j.Settings().KeepObjects(); err != nil {
						b.Fatal(err)
					}
				}
				fillIndex(b, j, events, true)
				b.StartTimer()
				for {
					k, _, err := j.Writer().Trim(events+1, 1000, 0, 0)
					if err != nil {
						b.Fatal(err)
					}
					if k == 0 {
						break
					}
					n += k
				}
			}
			if n%events != 0 {
				b.Fatalf("trimmed %d events; want a multiple of %d", n, events)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkJournalRead replays a journal of 20,000 events of about 1 KiB
// from offset 1 with Journal.Read, batch events per call.
func BenchmarkJournalRead(b *testing.B) {
	const events = 20_000
	j := openJournal(b, journal.Options{NoSync: true})
	fillIndex(b, j, events, true)
	for _, batch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			n := 0
			for b.Loop() {
				for off := uint64(1); ; {
					evs, err := j.Read(off, batch)
					if err != nil {
						b.Fatal(err)
					}
					if len(evs) == 0 {
						break
					}
					n += len(evs)
					off = evs[len(evs)-1].Offset + 1
				}
			}
			if n%events != 0 {
				b.Fatalf("read %d events; want a multiple of %d", n, events)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// diffPass diffs items against the index page by page as reconcile's
// relist does: for each page of pageSize listed items, the index entries in
// (previous page's last key, this page's last key], read with ScanIndex in
// chunks of pageSize; then the indexed keys after the last listed key. It
// calls stage with each page's events and returns how many there were.
func diffPass(j *journal.Journal, items []reconcile.Item, stage func([]journal.Event) error) (int, error) {
	total := 0
	after := ""
	emit := func(evs []journal.Event) error {
		total += len(evs)
		if stage == nil || len(evs) == 0 {
			return nil
		}
		for i := range evs {
			evs[i].Origin = journal.OriginRelist
		}
		return stage(evs)
	}
	for lo := 0; lo < len(items); lo += pageSize {
		page := items[lo:min(lo+pageSize, len(items))]
		through := page[len(page)-1].Key
		var evs []journal.Event
		cursor, i := after, 0
		for {
			entries, err := j.ScanIndex(cursor, pageSize)
			if err != nil {
				return 0, err
			}
			end := len(entries) < pageSize
			for k, e := range entries {
				if e.Key > through {
					entries, end = entries[:k], true
					break
				}
			}
			hi := len(page)
			if !end && len(entries) > 0 {
				last := entries[len(entries)-1].Key
				for hi = i; hi < len(page) && page[hi].Key <= last; hi++ {
				}
			}
			evs = append(evs, reconcile.Diff(entries, page[i:hi])...)
			i = hi
			if end {
				break
			}
			cursor = entries[len(entries)-1].Key
		}
		if err := emit(evs); err != nil {
			return 0, err
		}
		after = through
	}
	for {
		entries, err := j.ScanIndex(after, pageSize)
		if err != nil {
			return 0, err
		}
		if len(entries) == 0 {
			return total, nil
		}
		if err := emit(reconcile.Diff(entries, nil)); err != nil {
			return 0, err
		}
		after = entries[len(entries)-1].Key
	}
}

// BenchmarkRelistDiff diffs a list of indexN objects against an index of
// the same objects: pure (index entries already in memory), and through
// ScanIndex with nothing changed or 1% of the objects changed. Nothing is
// written.
func BenchmarkRelistDiff(b *testing.B) {
	j := openJournal(b, journal.Options{NoSync: true})
	fillIndex(b, j, indexN, false)
	entries, err := j.ScanIndex("", indexN)
	if err != nil || len(entries) != indexN {
		b.Fatalf("ScanIndex = %d entries, %v; want %d", len(entries), err, indexN)
	}
	same := listed(indexN, 0, 0)
	b.Run(fmt.Sprintf("pure/N=%d", indexN), func(b *testing.B) {
		n := 0
		for b.Loop() {
			for lo := 0; lo < indexN; lo += pageSize {
				hi := min(lo+pageSize, indexN)
				if evs := reconcile.Diff(entries[lo:hi], same[lo:hi]); len(evs) != 0 {
					b.Fatalf("Diff = %d events; want 0", len(evs))
				}
			}
			n += indexN
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
	})
	for _, c := range []struct {
		name        string
		changeEvery int
		want        int
	}{{"unchanged", 0, 0}, {"changed=1%", 100, indexN / 100}} {
		items := listed(indexN, c.changeEvery, 1)
		b.Run(fmt.Sprintf("scan+diff/%s/N=%d", c.name, indexN), func(b *testing.B) {
			n := 0
			for b.Loop() {
				got, err := diffPass(j, items, nil)
				if err != nil {
					b.Fatal(err)
				}
				if got != c.want {
					b.Fatalf("diff = %d events; want %d", got, c.want)
				}
				n += indexN
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkRelistStaged runs the whole relist a reconcile.Loop runs, through
// the public API: BeginRelist, ScanIndex + Diff + Stage per page, Commit.
// With fsync. "unchanged" stages nothing; "changed=1%" stages and commits
// MODIFIED for 1% of the objects, with new resourceVersions each time;
// "initial" starts from an empty index, as the first list does, and stages
// ADDED for every object (each iteration on a new file).
func BenchmarkRelistStaged(b *testing.B) {
	relist := func(b *testing.B, j *journal.Journal, items []reconcile.Item, want int) {
		b.Helper()
		rel, err := j.Writer().BeginRelist()
		if err != nil {
			b.Fatal(err)
		}
		got, err := diffPass(j, items, rel.Stage)
		if err != nil {
			b.Fatal(err)
		}
		if got != want || rel.Staged() != want {
			b.Fatalf("relist staged %d (diff %d) events; want %d", rel.Staged(), got, want)
		}
		if _, _, err := rel.Commit(rv(len(items))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("unchanged/N=%d", indexN), func(b *testing.B) {
		j := openJournal(b, journal.Options{})
		fillIndex(b, j, indexN, false)
		items := listed(indexN, 0, 0)
		n := 0
		for b.Loop() {
			relist(b, j, items, 0)
			n += indexN
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run(fmt.Sprintf("changed=1%%/N=%d", indexN), func(b *testing.B) {
		j := openJournal(b, journal.Options{})
		fillIndex(b, j, indexN, false)
		n, gen := 0, 0
		var items []reconcile.Item
		for b.Loop() {
			b.StopTimer()
			gen++
			items = listed(indexN, 100, gen*1000)
			b.StartTimer()
			relist(b, j, items, indexN/100)
			n += indexN
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
	})
	const initialN = 20_000
	for _, indexed := range []bool{false, true} {
		name := fmt.Sprintf("initial/N=%d", initialN)
		if indexed {
			name = fmt.Sprintf("initial/index=spread/N=%d", initialN)
		}
		b.Run(name, func(b *testing.B) { relistInitial(b, relist, initialN, indexed) })
	}
}

// spreadIndex is an index function whose values spread each key over
// 1,000 values, as a label or a field shared by a few objects across
// namespaces does; it does not decode, so that a benchmark of it measures
// the index's writes.
func spreadIndex(obj []byte) ([]string, error) {
	h := fnv.New32a()
	h.Write(obj)
	return []string{fmt.Sprintf("v%03d", h.Sum32()%1000)}, nil
}

// relistInitial is BenchmarkRelistStaged's first list of n objects into an
// empty file (each iteration on a new one); indexed: with spreadIndex kept
// in the file, and without fsync.
func relistInitial(b *testing.B, relist func(*testing.B, *journal.Journal, []reconcile.Item, int), initialN int, indexed bool) {
	{
		items := listed(initialN, 0, 0)
		n := 0
		for b.Loop() {
			b.StopTimer()
			dir, err := os.MkdirTemp(b.TempDir(), "")
			if err != nil {
				b.Fatal(err)
			}
			res := benchResource
			// Indexed: without fsync, to measure the writer's CPU.
			j, err := journal.Open(filepath.Join(dir, "journal.db"), &journal.Options{Resource: &res, NoSync: indexed})
			if err != nil {
				b.Fatal(err)
			}
			if indexed {
				if err := j.Settings().KeepObjects(); err != nil {
					b.Fatal(err)
				}
				if err := j.Indexes().Add(map[string]journal.IndexFunc{"spread": spreadIndex}); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			relist(b, j, items, initialN)
			n += initialN
			b.StopTimer()
			_ = j.Close()
			_ = os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/s")
	}
}

// indexValue encodes an index value as journal does (journal/index.go,
// schema 2): the tag 0x80 0x00, the uvarint offset of the key's last event
// with an object (here a 7-digit one, a journal that has taken millions of
// events), the UID as 2×16+1 and its 16 bytes (the fixture's UIDs are
// canonical UUIDs), then the resourceVersion.
func indexValue(uid, resourceVersion string) []byte {
	v := binary.AppendUvarint([]byte{0x80, 0x00}, 1_234_567)
	v = binary.AppendUvarint(v, 2*16+1)
	u, err := hex.DecodeString(strings.ReplaceAll(uid, "-", ""))
	if err != nil || len(u) != 16 {
		panic(fmt.Sprintf("indexValue: %q is not a UUID", uid))
	}
	return append(append(v, u...), resourceVersion...)
}

// BenchmarkIndexSize writes indexN index entries to a new file in
// transactions of 1,000 (as a relist commit does), then reports:
//
//	file-B/obj    the file's size / indexN
//	index-B/obj   pages allocated to the index bucket (leaf + branch) / indexN
//	payload-B/obj key + value bytes / indexN
//	leaf-fill-%   payload + bbolt's 16-byte element headers / leaf bytes
//
// "journal" goes through the public API (ADDED events without objects, so
// the file also holds their journal records); "store" writes the index
// bucket alone through journal/bolt; "bbolt-fill=X" writes the same keys and
// values with bbolt directly and Bucket.FillPercent X, to show what the
// setting would save. Keys go in key order (as a list returns them) or in
// random order (as watch events come).
func BenchmarkIndexSize(b *testing.B) {
	fixture()
	order := map[string][]int{"key-order": make([]int, indexN), "random-order": nil}
	for i := range order["key-order"] {
		order["key-order"][i] = i
	}
	order["random-order"] = rand.New(rand.NewPCG(3, 4)).Perm(indexN)
	for _, name := range []string{"key-order", "random-order"} {
		perm := order[name]
		b.Run("journal/"+name, func(b *testing.B) {
			for b.Loop() {
				j := openJournal(b, journal.Options{NoSync: true})
				inBatches(b, indexN, func(lo, hi int) error {
					return j.Writer().Update(func(tx *journal.Tx) error {
						for _, i := range perm[lo:hi] {
							e := journal.Event{Type: journal.Added, Key: keys[i], UID: uids[i], ResourceVersion: rv(i), Origin: journal.OriginRelist}
							if _, err := tx.Append(&e); err != nil {
								return err
							}
						}
						return nil
					})
				})
				st, err := j.Stats()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(st.FileSize)/indexN, "file-B/obj")
				// The buckets' stats come from the file, reopened read-only:
				// journal's API hands out no bbolt type.
				if err := j.Close(); err != nil {
					b.Fatal(err)
				}
				db, err := bbolt.Open(j.Path(), 0o600, &bbolt.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				reportBucket(b, db, "index")
				reportBucket(b, db, "journal")
				_ = db.Close()
			}
		})
		b.Run("store/"+name, func(b *testing.B) {
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "index.db")
				s, err := bolt.Open(path, bolt.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				inBatches(b, indexN, func(lo, hi int) error {
					return s.Update(func(tx storage.Tx) error {
						for _, i := range perm[lo:hi] {
							if err := tx.IndexPut([]byte(keys[i]), indexValue(uids[i], rv(i))); err != nil {
								return err
							}
						}
						return nil
					})
				})
				b.ReportMetric(float64(s.Size())/indexN, "file-B/obj")
				// The bucket's stats come from the file, reopened
				// read-only: the store hands out no bbolt type.
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				reportBucket(b, db, "index")
				_ = db.Close()
			}
		})
		for _, fill := range []float64{0.5, 1.0} {
			b.Run(fmt.Sprintf("bbolt-fill=%.1f/%s", fill, name), func(b *testing.B) {
				for b.Loop() {
					db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600,
						&bbolt.Options{NoSync: true, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
					if err != nil {
						b.Fatal(err)
					}
					inBatches(b, indexN, func(lo, hi int) error {
						return db.Update(func(tx *bbolt.Tx) error {
							bk, err := tx.CreateBucketIfNotExists([]byte("index"))
							if err != nil {
								return err
							}
							bk.FillPercent = fill
							for _, i := range perm[lo:hi] {
								if err := bk.Put([]byte(keys[i]), indexValue(uids[i], rv(i))); err != nil {
									return err
								}
							}
							return nil
						})
					})
					var size int64
					_ = db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil })
					b.ReportMetric(float64(size)/indexN, "file-B/obj")
					reportBucket(b, db, "index")
					_ = db.Close()
				}
			})
		}
	}
}

// reportBucket reports the pages allocated to a bucket per index entry and,
// for the index, its payload and leaf fill.
func reportBucket(b *testing.B, db *bbolt.DB, name string) {
	b.Helper()
	var st bbolt.BucketStats
	err := db.View(func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte(name))
		if bk == nil {
			return fmt.Errorf("no bucket %q", name)
		}
		st = bk.Stats()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.BranchAlloc+st.LeafAlloc)/indexN, name+"-B/obj")
	if name == "index" {
		payload := 0
		for i := range indexN {
			payload += len(keys[i]) + len(indexValue(uids[i], rv(i)))
		}
		b.ReportMetric(float64(payload)/indexN, "payload-B/obj")
		b.ReportMetric(100*float64(st.LeafInuse)/float64(st.LeafAlloc), "leaf-fill-%")
	}
}

// BenchmarkBboltAppend measures, with bbolt directly, the settings
// journal/bolt chooses for the journal bucket: append-only 8-byte
// big-endian keys, values of about 1 KiB, 1,000 a transaction, with fsync.
// Before timing, 50,000 records are written and the oldest 25,000 deleted,
// as retention does, so the freelist holds thousands of pages:
//
//	freelist-sync=X   Options.NoFreelistSync = !X (journal/bolt: synced)
//	freelist=array|hashmap   Options.FreelistType (journal/bolt: hashmap)
//	fill=X            Bucket.FillPercent (journal/bolt: 1.0)
//	pagesize=X        Options.PageSize (journal/bolt: the OS page size, 4096)
func BenchmarkBboltAppend(b *testing.B) {
	fixture()
	value := object(0, rv(0))
	for _, c := range []struct {
		name     string
		syncFree bool
		list     bbolt.FreelistType
		fill     float64
		pageSize int
	}{
		{"freelist-sync=true/freelist=hashmap/fill=1.0", true, bbolt.FreelistMapType, 1.0, 0},
		{"freelist-sync=false/freelist=hashmap/fill=1.0", false, bbolt.FreelistMapType, 1.0, 0},
		{"freelist-sync=true/freelist=array/fill=1.0", true, bbolt.FreelistArrayType, 1.0, 0},
		{"freelist-sync=true/freelist=hashmap/fill=0.5", true, bbolt.FreelistMapType, 0.5, 0},
		{"freelist-sync=true/freelist=hashmap/fill=1.0/pagesize=16384", true, bbolt.FreelistMapType, 1.0, 16384},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600,
				&bbolt.Options{NoFreelistSync: !c.syncFree, FreelistType: c.list, PageSize: c.pageSize})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			next := uint64(1)
			put := func(n int) error {
				return db.Update(func(tx *bbolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists([]byte("journal"))
					if err != nil {
						return err
					}
					bk.FillPercent = c.fill
					for range n {
						var k [8]byte
						binary.BigEndian.PutUint64(k[:], next)
						next++
						if err := bk.Put(k[:], value); err != nil {
							return err
						}
					}
					return nil
				})
			}
			for range 50 {
				if err := put(1000); err != nil {
					b.Fatal(err)
				}
			}
			err = db.Update(func(tx *bbolt.Tx) error {
				c := tx.Bucket([]byte("journal")).Cursor()
				for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= 25_000; k, _ = c.First() {
					if err := c.Delete(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			var free int
			st := db.Stats()
			free = st.FreePageN + st.PendingPageN
			n := 0
			for b.Loop() {
				if err := put(1000); err != nil {
					b.Fatal(err)
				}
				n += 1000
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(free), "free-pages")
			var size int64
			_ = db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil })
			b.ReportMetric(float64(size)/float64(next-1), "file-B/record")
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkJournalHeap reports how much the live Go heap grows (live-B,
// and per object) while a new journal takes in N objects of about 1 KiB,
// and after the file is closed and opened again (reopen-live-B). The heap a
// Journal keeps should not depend on N.
//
//	journal/append: N watch events, 1,000 per Update (no fsync);
//	journal/relist: one staged relist of N objects into an empty index
//	  (BeginRelist, Stage per page of 500, Commit), as the initial list;
//	bbolt-pagesize=X: what the relist does, with bbolt directly at page size
//	  X: put N values in one bucket, then move them 1,000 a transaction to
//	  another bucket, deleting them from the first.
//
// bbolt's freelist keeps an entry (allocs: page id → transaction id) for
// every allocation served from free pages since the file was opened that is
// still in use. Appends at the end of the file make none. A relist stages
// its events in a sibling file, so its journal pages extend the file too;
// when it staged them in a bucket of the same file, freeing the staged
// pages and reusing them for the journal cost 12 B/obj (the bbolt-pagesize
// cases show that mechanism with bbolt alone).
func BenchmarkJournalHeap(b *testing.B) {
	fixture()
	value := object(0, rv(0))
	report := func(b *testing.B, n int, grown, reopened uint64) {
		b.ReportMetric(float64(grown), "live-B")
		b.ReportMetric(float64(grown)/float64(n), "live-B/obj")
		if reopened > 0 {
			b.ReportMetric(float64(reopened), "reopen-live-B")
		}
	}
	for _, mode := range []string{"append", "relist"} {
		for _, n := range []int{20_000, 200_000} {
			b.Run(fmt.Sprintf("journal/%s/N=%d", mode, n), func(b *testing.B) {
				items := listedN(n)
				for b.Loop() {
					path := filepath.Join(b.TempDir(), "journal.db")
					res := benchResource
					base := liveHeap()
					j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
					if err != nil {
						b.Fatal(err)
					}
					if mode == "append" {
						inBatches(b, n, func(lo, hi int) error {
							return j.Writer().Update(func(tx *journal.Tx) error {
								for _, it := range items[lo:hi] {
									e := journal.Event{Type: journal.Added, Key: it.Key, UID: it.UID, ResourceVersion: it.ResourceVersion,
										Object: value, Origin: journal.OriginWatch}
									if _, err := tx.Append(&e); err != nil {
										return err
									}
								}
								return nil
							})
						})
					} else {
						rel, err := j.Writer().BeginRelist()
						if err != nil {
							b.Fatal(err)
						}
						if _, err := diffPass(j, items, rel.Stage); err != nil {
							b.Fatal(err)
						}
						if _, _, err := rel.Commit(rv(n)); err != nil {
							b.Fatal(err)
						}
					}
					grown := liveHeap() - base
					_ = j.Close()
					j, err = journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
					if err != nil {
						b.Fatal(err)
					}
					reopened := liveHeap() - base
					_ = j.Close()
					report(b, n, grown, reopened)
				}
			})
		}
	}
	for _, ps := range []int{4096, 16384} {
		const n = 200_000
		b.Run(fmt.Sprintf("bbolt-pagesize=%d/N=%d", ps, n), func(b *testing.B) {
			for b.Loop() {
				base := liveHeap()
				db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600,
					&bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistMapType, PageSize: ps})
				if err != nil {
					b.Fatal(err)
				}
				key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i+1)) }
				inBatches(b, n, func(lo, hi int) error {
					return db.Update(func(tx *bbolt.Tx) error {
						st, err := tx.CreateBucketIfNotExists([]byte("stage"))
						if err != nil {
							return err
						}
						st.FillPercent = 1.0
						for i := lo; i < hi; i++ {
							if err := st.Put(key(i), value); err != nil {
								return err
							}
						}
						return nil
					})
				})
				inBatches(b, n, func(lo, hi int) error {
					return db.Update(func(tx *bbolt.Tx) error {
						jb, err := tx.CreateBucketIfNotExists([]byte("journal"))
						if err != nil {
							return err
						}
						jb.FillPercent = 1.0
						st := tx.Bucket([]byte("stage"))
						for i := lo; i < hi; i++ {
							if err := jb.Put(key(i), st.Get(key(i))); err != nil {
								return err
							}
							if err := st.Delete(key(i)); err != nil {
								return err
							}
						}
						return nil
					})
				})
				grown := liveHeap() - base
				_ = db.Close()
				report(b, n, grown, 0)
			}
		})
	}
}

// listedN returns n listed items in key order, without objects; keys past
// indexN get their own names.
func listedN(n int) []reconcile.Item {
	fixture()
	value := object(0, rv(0))
	items := make([]reconcile.Item, n)
	for i := range items {
		items[i] = reconcile.Item{Key: fmt.Sprintf("bench/cm-%06d", i), UID: uids[i%indexN], ResourceVersion: rv(i), Object: value}
	}
	return items
}
