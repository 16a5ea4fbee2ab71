package jcache_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// oldChecker asserts that every OnUpdate's old object is complete: its
// label gen and data gen are there, agree, and are one below the new
// object's (each update raises both by one).
type oldChecker struct {
	mu      sync.Mutex
	updates int
	bad     []string
	first   chan struct{} // closed at the first OnUpdate
	gate    *hold         // the first OnUpdate waits for it (nil: none)
	once    sync.Once
	changed chan struct{}
	before  func(k int) // called at the start of the k-th OnUpdate (1-based), after the gate
}

func newOldChecker(gate *hold) *oldChecker {
	return &oldChecker{first: make(chan struct{}), gate: gate, changed: make(chan struct{})}
}

func (c *oldChecker) OnAdd(any, bool) {}
func (c *oldChecker) OnDelete(any)    {}
func (c *oldChecker) OnUpdate(o, n any) {
	c.once.Do(func() {
		close(c.first)
		if c.gate != nil {
			c.gate.wait()
		}
	})
	if c.before != nil {
		c.mu.Lock()
		k := c.updates + 1
		c.mu.Unlock()
		c.before(k)
	}
	old, cm := o.(*corev1.ConfigMap), n.(*corev1.ConfigMap)
	og, ng := old.Labels["gen"], cm.Labels["gen"]
	on, _ := strconv.Atoi(og)
	nn, _ := strconv.Atoi(ng)
	c.mu.Lock()
	defer c.mu.Unlock()
	if og == "" || old.Data["gen"] != og || cm.Data["gen"] != ng || on != nn-1 {
		c.bad = append(c.bad, fmt.Sprintf("%s rv %s: old labels=%v data=%v, new labels=%v data=%v",
			cm.Name, cm.ResourceVersion, old.Labels, old.Data, cm.Labels, cm.Data))
	}
	c.updates++
	close(c.changed)
	c.changed = make(chan struct{})
}

// count returns how many updates c has had.
func (c *oldChecker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates
}

func (c *oldChecker) waitUpdates(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got, ch := c.updates, c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out: %d of %d updates", got, n)
		}
	}
}

// untilOffsets waits until cond holds for the (first, head) offsets of
// the cache directory's one file; an error after 60 s.
func untilOffsets(dir, what string, cond func(first, head uint64) bool) (uint64, uint64, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		fo, err := jcache.FileOffsets(dir)
		if err != nil {
			return 0, 0, err
		}
		if len(fo) == 1 {
			for _, o := range fo {
				if cond(o[0], o[1]) {
					return o[0], o[1], nil
				}
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			return 0, 0, fmt.Errorf("timed out waiting for %s: files %v", what, fo)
		}
	}
}

func waitOffsets(t *testing.T, dir, what string, cond func(first, head uint64) bool) (uint64, uint64) {
	t.Helper()
	first, head, err := untilOffsets(dir, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return first, head
}

// TestCache_RetentionKeepsOldObjectsComplete: a cache with tiny retention
// (the last 3 events) and many updates. A handler held at its first
// update while the others are written holds retention at what it has
// delivered. Released, it waits in each update until the file is trimmed
// up to that update, so every old object it gets next was written in a
// record trimmed after the key's next MODIFIED had been appended; each
// must be complete (labels and data, one generation back). Once every
// handler is through, the file keeps only the last 3 events.
func TestCache_RetentionKeepsOldObjectsComplete(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	const objects, rounds = 5, 20
	for i := range objects {
		createCM(t, kube, ns, fmt.Sprintf("cm%d", i), map[string]string{"gen": "0"}, map[string]string{"gen": "0"})
	}
	r := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Retention: &journal.Retention{MaxEvents: 3}}, 20*time.Millisecond)),
		crcache.Options{Mapper: staticMapper()}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	inf, err := r.c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	fast := newOldChecker(nil)
	held := newHold()
	defer held.release() // before r.stop: slow's blocked OnUpdate returns
	slow := newOldChecker(held)
	// Released, slow waits in its k-th update until the file is trimmed
	// up to that update's event (mods[k-1]), or to the last 3 events.
	var mods []uint64
	slow.before = func(k int) {
		if k > len(mods) {
			return
		}
		_, _, err := untilOffsets(dir, fmt.Sprintf("the trim up to update %d", k), func(first, head uint64) bool {
			return first >= min(mods[k-1], head-2)
		})
		if err != nil {
			slow.mu.Lock()
			slow.bad = append(slow.bad, err.Error())
			slow.mu.Unlock()
		}
	}
	var regs []toolscache.ResourceEventHandlerRegistration
	for _, h := range []*oldChecker{fast, slow} {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	// Both handlers replayed the stored objects before the first update,
	// so each gets it as an OnUpdate, not within the replay's OnAdds.
	if !toolscache.WaitForCacheSync(ctx.Done(), regs[0].HasSynced, regs[1].HasSynced) {
		t.Fatalf("handlers not synced: fast %v, slow %v", regs[0].HasSynced(), regs[1].HasSynced())
	}
	update := func(round, i int) {
		name := fmt.Sprintf("cm%d", i)
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g := strconv.Itoa(round)
		cm.Labels["gen"], cm.Data["gen"] = g, g
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(1, 0)
	select { // slow holds at the event before its first update
	case <-slow.first:
	case <-ctx.Done():
		t.Fatalf("slow got no OnUpdate for cm0's first update (fast has %d updates)", fast.count())
	}
	for round := 1; round <= rounds; round++ {
		for i := range objects {
			if round == 1 && i == 0 {
				continue
			}
			update(round, i)
		}
	}
	fast.waitUpdates(t, objects*rounds)
	// Every ADDED record before slow's first update is trimmed (the
	// retained events start at most at that update), though each key has
	// newer records: their objects are the old objects slow still needs.
	first, head := waitOffsets(t, dir, "the trim up to the held handler", func(first, head uint64) bool {
		return head >= objects*(rounds+1) && first > objects
	})
	if head-first+1 <= 3 {
		t.Fatalf("retained %d-%d while a handler was held: want its events kept", first, head)
	}
	// Every MODIFIED is still retained (slow holds at the first).
	if mods, err = jcache.ModifiedOffsets(dir); err != nil || len(mods) != objects*rounds {
		t.Fatalf("ModifiedOffsets = %d offsets, %v; want %d", len(mods), err, objects*rounds)
	}
	held.release()
	slow.waitUpdates(t, objects*rounds)
	// Once both are through, the file keeps the last 3 events.
	waitOffsets(t, dir, "the trim to 3 events", func(first, head uint64) bool { return head-first+1 <= 3 && first > 0 })
	// The live file reads through its inspect socket (journalctl stats):
	// its retention, and the handlers' hold as the consumer "jcache".
	fo, err := jcache.FileOffsets(dir)
	if err != nil || len(fo) != 1 {
		t.Fatalf("FileOffsets = %v, %v", fo, err)
	}
	for name := range fo {
		cl := inspect.NewClient(inspect.SocketPath(filepath.Join(dir, name)))
		ret, err := cl.Retention(ctx)
		if err != nil || ret != (journal.Retention{MaxEvents: 3}) {
			t.Errorf("Retention through the socket = %+v, %v; want MaxEvents 3", ret, err)
		}
		st, err := cl.Stats(ctx)
		if _, held := st.Consumers[jcache.RetentionConsumer]; err != nil || !held || st.LastOffset-st.FirstOffset+1 > 3 {
			t.Errorf("Stats through the socket = %+v, %v; want the consumer %q and at most 3 events", st, err, jcache.RetentionConsumer)
		}
	}
	for _, c := range []*oldChecker{fast, slow} {
		c.mu.Lock()
		if len(c.bad) > 0 || c.updates != objects*rounds {
			t.Errorf("%d updates (want %d), incomplete old objects: %q", c.updates, objects*rounds, c.bad)
		}
		c.mu.Unlock()
	}
}

// TestCache_RetentionDefaultAndOff: a cache file records
// DefaultRetention unless Options.Retention says otherwise; a zero
// journal.Retention turns trimming off (no limit recorded). Either way
// the handlers' consumer records how far they got (catchup.go).
func TestCache_RetentionDefaultAndOff(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, map[string]string{"k": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		opt  *journal.Retention
		want journal.Retention
	}{
		{"default", nil, jcache.DefaultRetention},
		{"off", &journal.Retention{}, journal.Retention{}},
	} {
		dir := t.TempDir()
		r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Retention: tc.opt}), crcache.Options{Mapper: staticMapper()}, cp)
		inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
		h := newOldChecker(nil)
		if _, err := inf.AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
		fo, err := jcache.FileOffsets(dir)
		if err != nil || len(fo) != 1 {
			t.Fatalf("%s: FileOffsets = %v, %v", tc.name, fo, err)
		}
		for name := range fo {
			cl := inspect.NewClient(inspect.SocketPath(filepath.Join(dir, name)))
			// The retention goroutine records the policy once it starts:
			// wait for the consumer.
			if _, _, err := untilOffsets(dir, "the retention consumer", func(uint64, uint64) bool {
				st, err := cl.Stats(ctx)
				_, ok := st.Consumers[jcache.RetentionConsumer]
				return err == nil && ok
			}); err != nil {
				t.Fatal(err)
			}
			ret, err := cl.Retention(ctx)
			if err != nil || ret != tc.want {
				t.Errorf("%s: Retention = %+v, %v; want %+v", tc.name, ret, err, tc.want)
			}
		}
		r.stop()
	}
}

// A handler added to a file whose retention trimmed every event of the
// first list (and a List of it) gets every stored object, not only the
// keys with events still retained: the objects are kept per key, apart
// from the events.
func TestCache_HandlerAddedToTrimmedFileGetsEveryObject(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 10
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("cm%d", i), nil, map[string]string{"d": "x"})
	}
	dir := t.TempDir()
	r := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true,
		Retention: &journal.Retention{MaxEvents: 3}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	_, synced := waitOffsets(t, dir, "the first list", func(first, head uint64) bool { return head > n })
	for v := range 5 {
		updateCM(t, ctx, kube, ns, "cm0", func(cm *corev1.ConfigMap) { cm.Data["d"] = fmt.Sprint(v) })
	}
	waitOffsets(t, dir, "every event of the first list trimmed", func(first, head uint64) bool { return first > synced })

	var l corev1.ConfigMapList
	if err := r.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != n {
		t.Errorf("List after the trim: %d objects; want %d", len(l.Items), n)
	}
	// cm0 comes as the replay read it, then with its later events.
	cm0 := hasAll("add cm0 labels=map[] data=map[d:4]")
	cm0Updated := hasAll("update cm0 labels=map[] data=map[d:3] -> cm0 labels=map[] data=map[d:4]")
	var rest []string
	for i := 1; i < n; i++ {
		rest = append(rest, fmt.Sprintf("add cm%d labels=map[] data=map[d:x]", i))
	}
	rec := newRecorder()
	if _, err := inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "every stored object", func(evs []string) bool {
		return hasAll(rest...)(evs) && (cm0(evs) || cm0Updated(evs))
	})
}
