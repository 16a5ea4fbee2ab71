package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// shardedFixture is a made-up run of jcache and jcache-sharded at two N:
// the replicas at N=20000 with the kill of replica-0, an error at
// N=200000.
func shardedFixture() *results {
	var caches []cacheRow
	for _, x := range cachesFixture() {
		if x.Subject == subjJCache {
			caches = append(caches, x)
		}
	}
	const n = 20_000
	mem := func(mib uint64) memory {
		return memory{HeapInuse: mib << 20, RSS: 8 * mib << 20, RSSAnon: 2 * mib << 20}
	}
	ok := shardedRow{N: n, Subject: subjJCacheSharded, Objects: n + cacheListN, Load: "2.50", LeaseDuration: 15, RenewInterval: 5, TakeoverSeconds: 17.5,
		Replicas: []shardStart{
			{Member: "replica-0", Buckets: []int{0, 1, 2}, Keys: 7200, FirstReconcileSeconds: 1.5, InProcessSeconds: 1.25, AllSeconds: 2, CPU: 1,
				Reconciles: 7200, Steady: mem(3), Killed: true, DiskBytes: 30 << 20},
			{Member: "replica-1", Buckets: []int{3, 4}, Keys: 6900, FirstReconcileSeconds: 1.5, InProcessSeconds: 1.25, AllSeconds: 6.5, CPU: 1.5,
				Reconciles: 6900, NotHeld: 4, Steady: mem(4), Taken: 3000, TakenSeconds: 16, After: mem(5), DiskBytes: 40 << 20},
			{Member: "replica-2", Buckets: []int{5}, Keys: 6900, FirstReconcileSeconds: 6, InProcessSeconds: 5.75, AllSeconds: 7, CPU: 2,
				Reconciles: 6900, Steady: mem(2), Taken: 4200, TakenSeconds: 17.5, After: mem(4), DiskBytes: 50 << 20},
		}}
	bad := shardedRow{N: 200_000, Subject: subjJCacheSharded, Objects: 200_000 + cacheListN, LeaseDuration: 15, RenewInterval: 5,
		Err: "replica-1: waiting for its range to be reconciled: no | reply"}
	r := &results{o: options{ns: []int{n, 200_000}, command: "make bench BENCH_SUBJECTS=jcache,jcache-sharded"}, caches: caches, sharded: []shardedRow{ok, bad}}
	return described(r)
}

// The sharded section as the harness writes it: the jcache row before the
// replicas at each N, the error row, the reported rows.
func TestGoldenSharded(t *testing.T) {
	r := shardedFixture()
	got := r.shardedSection()
	golden(t, "golden-sharded.md", got)
	for _, want := range []string{
		"| 20000 | jcache | one process | 21000 | all |",
		"| 20000 | jcache-sharded | replica-0 | 7200 | 3 | 2.50 | 3.0 | 24.0 | 6.0 | 1.50 (1.25) | 2.00 | 1.00 | 0 | killed (SIGKILL) | – | – | – | 30.0 |",
		"| 200000 | jcache-sharded | error: replica-1: waiting for its range to be reconciled: no / reply |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the section has no line %q:\n%s", want, got)
		}
	}
}

// The reported rows compare the replicas with jcache's row at the same N;
// they carry no target, and a failed row reports nothing.
func TestShardedReported(t *testing.T) {
	r := shardedFixture()
	got := map[string]string{}
	for _, x := range r.shardedReported() {
		if x.state != "reported" {
			t.Errorf("%s: state %q; want reported", x.name, x.state)
		}
		got[x.name] = x.measured
	}
	// jcache at N=20000 (cachesFixture): heap 6 MiB, RSS 18 MiB, every
	// object 3 s, first reconcile 2 s.
	want := map[string]string{
		"3 sharded replicas: heap per replica once all of its range was reconciled, against jcache's one process (N=20000)":                                                               "3.0 / 4.0 / 2.0 MiB; jcache 6.0 MiB: the largest replica 67% of it, the 3 together 1.50×",
		"3 sharded replicas: RSS per replica once all of its range was reconciled, against jcache's one process (N=20000)":                                                                "24.0 / 32.0 / 16.0 MiB; jcache 18.0 MiB: the largest replica 178% of it, the 3 together 4.00×",
		"3 sharded replicas started together: exec to all of its range reconciled, per replica, against jcache's exec to every object reconciled (N=20000)":                               "all of its range: 2.00 / 6.50 / 7.00 s; first reconcile: 1.50 / 1.50 / 6.00 s; jcache: every object 3.00 s, first reconcile 2.00 s; the slowest replica 2.33× and 3.00× of it",
		"a replica killed (SIGKILL): from the kill until every key of its range was reconciled by a survivor, LeaseDuration 15 s and RenewInterval 5 s, the library's defaults (N=20000)": "17.50 s for the 7200 keys of replica-0 (replica-1 took 3000 in 16.00 s, replica-2 took 4200 in 17.50 s)",
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s:\n got %q\nwant %q", name, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d reported rows; want %d: %v", len(got), len(want), got)
	}
}

// A run of only the cache subjects writes the sharded section into a
// results file without one and keeps the rest; a full run without the
// sharded subject keeps the section as it was.
func TestShardedSplice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := restartGoldenFixture().write(path); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	if strings.Contains(before, shardedBegin) {
		t.Fatalf("a run without the sharded subject wrote its section:\n%s", before)
	}
	r := shardedFixture()
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	section := r.shardedSection()
	if strings.Count(got, shardedBegin) != 1 || !strings.Contains(got, section) {
		t.Fatalf("the sharded section is not in the file once:\n%s", got)
	}
	if s, h := strings.Index(got, section), strings.Index(got, handWritten); s > h {
		t.Errorf("the sharded section is after the hand-written part (at %d; that part at %d)", s, h)
	}
	// Outside the cache and sharded sections, the file is as it was (but
	// for the blank line that sets a new section apart).
	outside := func(s string) string {
		for _, m := range [][2]string{{cacheBegin, cacheEnd}, {shardedBegin, shardedEnd}} {
			s = strings.Replace(s, string(oldSection([]byte(s), m[0], m[1])), "", 1)
		}
		return strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	if a, b := outside(got), outside(before); a != b {
		t.Errorf("the run changed the file outside its sections:\n%s\nwant:\n%s", a, b)
	}
	full := restartGoldenFixture()
	full.caches = nil
	if err := full.write(path); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, path); !strings.Contains(again, section) {
		t.Errorf("a full run without the sharded subject dropped its section:\n%s", again)
	}
}

// bucketsOf gives the buckets a range holds whole and says when it cuts
// one; the buckets of hashrange.Assign's split are each member's, once.
func TestBucketsOf(t *testing.T) {
	const width = uint64(1) << shardBucketShift
	got, partial := bucketsOf(hashrange.Set{{First: 2 * width, Last: 4*width - 1}, {First: 255 * width, Last: 1<<64 - 1}})
	if want := []int{2, 3, 255}; !slices.Equal(got, want) || partial {
		t.Errorf("bucketsOf = %v, partial %v; want %v, false", got, partial, want)
	}
	if got, partial := bucketsOf(hashrange.Set{{First: width / 2, Last: 2*width - 1}}); !slices.Equal(got, []int{1}) || !partial {
		t.Errorf("bucketsOf(half of bucket 0 and bucket 1) = %v, partial %v; want [1], true", got, partial)
	}
	members := []string{"replica-0", "replica-1", "replica-2"}
	var rs []shardStart
	totals := make([]int, hashrange.DefaultBuckets)
	for m, s := range hashrange.Assign(members, 0) {
		b, partial := bucketsOf(s)
		if partial {
			t.Errorf("%s's range %s cuts a bucket", m, s)
		}
		rs = append(rs, shardStart{Member: m, Buckets: b})
	}
	if err := checkSplit(rs, totals); err != nil {
		t.Errorf("checkSplit of Assign's split: %v", err)
	}
}

// checkSplit and checkTakeover fail a row whose ranges overlap, leave a
// bucket out, or whose survivors took another range than the killed one.
func TestShardedChecks(t *testing.T) {
	totals := make([]int, hashrange.DefaultBuckets)
	totals[0], totals[1] = 5, 7
	all := make([]int, hashrange.DefaultBuckets-2)
	for i := range all {
		all[i] = i + 2
	}
	for _, c := range []struct {
		name string
		rs   []shardStart
		want string // "" for no error, else a part of it
	}{
		{"each bucket once", []shardStart{{Member: "a", Buckets: []int{0}, Keys: 5}, {Member: "b", Buckets: append([]int{1}, all...), Keys: 7}}, ""},
		{"a bucket held twice", []shardStart{{Member: "a", Buckets: []int{0, 1}, Keys: 12}, {Member: "b", Buckets: append([]int{1}, all...), Keys: 7}}, "bucket 1 is held by a and b"},
		{"a bucket held by none", []shardStart{{Member: "a", Buckets: []int{0}, Keys: 5}, {Member: "b", Buckets: all, Keys: 0}}, "bucket 1 is held by no replica"},
		{"keys that are not the buckets' objects", []shardStart{{Member: "a", Buckets: []int{0}, Keys: 4}, {Member: "b", Buckets: append([]int{1}, all...), Keys: 7}}, "a reports 4 keys"},
	} {
		err := checkSplit(c.rs, totals)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: checkSplit = %v; want %q", c.name, err, c.want)
		}
	}
	if err := checkTakeover([]int{1, 4, 9}, [][]int{{4}, {1, 9}}); err != nil {
		t.Errorf("checkTakeover of the killed range split between two survivors = %v; want nil", err)
	}
	if err := checkTakeover([]int{1, 4, 9}, [][]int{{4}, {1}}); err == nil {
		t.Errorf("checkTakeover with bucket 9 taken by none = nil; want an error")
	}
	if err := checkTakeover([]int{1, 4}, [][]int{{1, 4}, {4}}); err == nil {
		t.Errorf("checkTakeover with bucket 4 taken twice = nil; want an error")
	}
}

// objectIndex maps the cache ConfigMaps' keys to distinct indexes, and no
// other key.
func TestObjectIndex(t *testing.T) {
	const n = 250
	for _, c := range []struct {
		ns, name string
		want     int
		ok       bool
	}{
		{cacheNS(0), name(0), 0, true},
		{cacheNS(249), name(249), 249, true},
		{cacheListNS, name(0), n, true},
		{cacheListNS, name(cacheListN - 1), n + cacheListN - 1, true},
		{cacheNS(250), name(250), 0, false}, // beyond n
		{cacheNS(1), name(2), 0, false},     // not in its namespace
		{cacheListNS, name(cacheListN), 0, false},
		{"bench", "other", 0, false},
	} {
		if got, ok := objectIndex(n, c.ns, c.name); got != c.want || ok != c.ok {
			t.Errorf("objectIndex(%d, %q, %q) = %d, %v; want %d, %v", n, c.ns, c.name, got, ok, c.want, c.ok)
		}
	}
	counts := newBucketCounts(n)
	counts.add(3, 7)
	counts.add(3, 7) // a second reconcile of the same key counts once
	counts.add(n, 7)
	if want, have, ok := counts.complete([]int{7}, append(make([]int, 7), 2)); want != 2 || have != 2 || !ok {
		t.Errorf("complete = %d, %d, %v; want 2, 2, true", want, have, ok)
	}
	counts.reset()
	if _, have, ok := counts.complete([]int{7}, append(make([]int, 7), 2)); have != 0 || ok {
		t.Errorf("after reset: %d counted, complete %v; want 0, false", have, ok)
	}
}
