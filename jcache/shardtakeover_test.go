package jcache_test

// A range is taken over with the deletes made while no replica held it,
// against the real apiserver, caches of one shard group in one process:
//
//   - a killed replica (its Lease left to expire): before the others take
//     its range over some of its ConfigMaps are deleted, one is deleted
//     and created again (a new UID), one is updated. The taker's handler
//     gets OnDelete for exactly the deleted ones, DELETE then ADD for the
//     recreated one, the update's state as an OnAdd; then a fourth
//     replica joins and takes keys from the live ones: no handler gets an
//     OnDelete for a key that only moved, and the dead replica's range is
//     not taken over a second time;
//   - a replica restarted under its name: its handler gets OnDelete for
//     what was deleted while it was down;
//   - a replica joining, then leaving cleanly: the ConfigMaps that move,
//     deleted one at a time across the join and across the leave, each
//     reach some replica's handler as OnDelete, those deleted in a move's
//     gap included.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/jcache"
)

// seenEvent is one call a handler got: add or delete, of name with uid;
// final says a delete came as DeletedFinalStateUnknown; v is the data's v.
type seenEvent struct {
	op, name, uid, v string
	final            bool
}

// takeoverReplica is one cache of the group and the calls its handler got.
type takeoverReplica struct {
	name   string
	cache  *jcache.Cache
	cancel context.CancelFunc
	done   chan error
	reg    toolscache.ResourceEventHandlerRegistration

	mu     sync.Mutex
	events []seenEvent
}

func (r *takeoverReplica) record(op string, obj any) {
	final := false
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, final = d.Obj, true
	}
	cm := obj.(*corev1.ConfigMap)
	r.mu.Lock()
	r.events = append(r.events, seenEvent{op: op, name: cm.Name, uid: string(cm.UID), v: cm.Data["v"], final: final})
	r.mu.Unlock()
}

// seen returns a copy of the calls from the i-th on.
func (r *takeoverReplica) seen(i int) []seenEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[min(i, len(r.events)):])
}

// startTakeoverReplica starts a cache, member name of the group so, with a
// handler of ConfigMaps that records what it gets.
func startTakeoverReplica(t *testing.T, rc *rest.Config, so jcache.ShardOptions, name string, hooks ...func(jcache.Options) jcache.Options) *takeoverReplica {
	t.Helper()
	so.Member = name
	o := jcache.WithReplayChunk(jcache.Options{Dir: t.TempDir(), NoSync: true, NoSocket: true, Shard: &so}, 7)
	for _, h := range hooks {
		o = h(o)
	}
	c, err := jcache.NewFunc(o)(rc, crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &takeoverReplica{name: name, cache: c.(*jcache.Cache), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	inf := getInformer(t, ctx, c, &corev1.ConfigMap{})
	if r.reg, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.record("add", obj) },
		UpdateFunc: func(_, obj any) { r.record("update", obj) },
		DeleteFunc: func(obj any) { r.record("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- c.Start(ctx) }()
	return r
}

func (r *takeoverReplica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("cache %s: %v", r.name, err)
	}
}

// takeoverSettled reports whether every replica of rs is settled with
// the members of rs, and describes them.
func takeoverSettled(rs []*takeoverReplica) (bool, string) {
	var names []string
	for _, r := range rs {
		names = append(names, r.name)
	}
	slices.Sort(names)
	ok := true
	var b strings.Builder
	for _, r := range rs {
		st := r.cache.ShardStatus()
		ok = ok && st.Settled && slices.Equal(st.Members, names)
		fmt.Fprintf(&b, "\n  %s: members %v settled %v held %.60q target %.60q error %v", r.name, st.Members, st.Settled, st.Held, st.Target, st.LastError)
	}
	return ok, b.String()
}

// current reports whether r's handler shows each of cms that r holds as
// the object's state: its last call of the name is an add or update of
// the object's UID and data.
func (r *takeoverReplica) current(cms []corev1.ConfigMap) (bool, string) {
	last := map[string]seenEvent{}
	for _, e := range r.seen(0) {
		last[e.name] = e
	}
	for i := range cms {
		cm := &cms[i]
		if !r.cache.Holds(cm) {
			continue
		}
		e, ok := last[cm.Name]
		if !ok || e.op == "delete" || e.uid != string(cm.UID) || e.v != cm.Data["v"] {
			return false, fmt.Sprintf("%s holds %s (uid %s, v %s); its handler's last call of it: %+v", r.name, cm.Name, cm.UID, cm.Data["v"], e)
		}
	}
	return true, ""
}

func listCMs(t *testing.T, kube kubernetes.Interface, ns string) []corev1.ConfigMap {
	t.Helper()
	l, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(l.Items, func(cm corev1.ConfigMap) bool { return !strings.HasPrefix(cm.Name, "cm-") })
}

func TestShard_TakeoverGivesTheDeletesMadeWhileUnheld(t *testing.T) {
	cp, kube, ns := setup(t)
	rc := cp.RESTConfig()
	const n = 90
	createCMs(t, kube, ns, n, func(i int) string { return fmt.Sprintf("cm-%02d", i) }, func(int) string { return "1" })
	so := jcache.ShardOptions{
		Group: "takeover", Namespace: ns,
		Resources:     []schema.GroupResource{{Resource: "configmaps"}},
		LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
	}
	r0 := startTakeoverReplica(t, rc, so, "r0")
	r1 := startTakeoverReplica(t, rc, so, "r1", jcache.AbandonShardLease)
	r2 := startTakeoverReplica(t, rc, so, "r2")
	all := []*takeoverReplica{r0, r1, r2}
	defer func() {
		for _, r := range all {
			r.cancel()
		}
	}()
	var last string
	wait := func(why string, cond func() (bool, string)) {
		t.Helper()
		waitShard(t, why, func() bool {
			ok, s := cond()
			last = s
			return ok
		}, func() string { return last })
	}
	rs := []*takeoverReplica{r0, r1, r2}
	waitCurrent(t, kube, ns, "three replicas settle, each handler current with what it holds", rs...)
	// r1 publishes where its handler is: every ConfigMap created.
	lastRV := ""
	for _, cm := range listCMs(t, kube, ns) {
		if rvAtOrAfter(cm.ResourceVersion, lastRV) {
			lastRV = cm.ResourceVersion
		}
	}
	wait("r1 publishes a position at or past the last create", func() (bool, string) {
		l, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "takeover-r1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ps map[string]string
		_ = json.Unmarshal([]byte(l.Annotations["watchjournal.io/shard-positions"]), &ps)
		for _, p := range ps {
			if rvAtOrAfter(p, lastRV) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("r1's Lease positions %v; want one at or past %s", ps, lastRV)
	})

	// Pick r1's keys, kill it, change them before its Lease expires.
	var held []corev1.ConfigMap
	for _, cm := range listCMs(t, kube, ns) {
		if r1.cache.Holds(&cm) {
			held = append(held, cm)
		}
	}
	if len(held) < 6 {
		t.Fatalf("r1 holds %d ConfigMaps; want at least 6", len(held))
	}
	killed := time.Now()
	r1.stop(t)
	rs = []*takeoverReplica{r0, r2}
	deleted, recreated, updated := held[:3], held[3], held[4]
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, cm := range append(slices.Clone(deleted), recreated) {
		if err := cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	again := createCM(t, kube, ns, recreated.Name, nil, map[string]string{"v": "2"})
	up := updated.DeepCopy()
	up.Data["v"] = "2"
	if _, err := cms.Update(context.Background(), up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, cm := range held[:5] {
			if r.cache.Holds(&cm) {
				t.Fatalf("%s held %s when the changes were done (%v after the kill): they were not made while the range was unheld",
					r.name, cm.Name, time.Since(killed))
			}
		}
	}
	t.Logf("changes made %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	mark := map[string]int{}
	for _, r := range rs {
		mark[r.name] = len(r.seen(0))
	}

	waitCurrent(t, kube, ns, "r0 and r2 take r1's range over, each handler current with what it holds", rs...)

	// Exactly the deleted UIDs got an OnDelete, each on its new holder;
	// where that holder holds the recreated name's new object too, its
	// OnAdd follows the old one's OnDelete.
	want := map[string]string{} // uid → holder
	for _, cm := range append(slices.Clone(deleted), recreated) {
		for _, r := range rs {
			if r.cache.Holds(&cm) {
				want[string(cm.UID)] = r.name
			}
		}
	}
	got := map[string]string{}
	for _, r := range rs {
		evs := r.seen(mark[r.name])
		for i, e := range evs {
			if e.op != "delete" {
				continue
			}
			if _, dup := got[e.uid]; dup || !e.final {
				t.Errorf("%s: OnDelete %+v given twice or not as DeletedFinalStateUnknown", r.name, e)
			}
			got[e.uid] = r.name
			if e.name == recreated.Name && r.cache.Holds(again) &&
				!slices.ContainsFunc(evs[i:], func(a seenEvent) bool { return a.op == "add" && a.uid == string(again.UID) }) {
				t.Errorf("%s holds the recreated %s: no OnAdd of its new UID after the old one's OnDelete: %+v", r.name, e.name, evs)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("OnDelete after the takeover, by UID: %v; want %v (deleted %v, recreated %s)", got, want, names(deleted), recreated.Name)
	}

	// A fourth replica takes keys from the live ones: no OnDelete on any,
	// and r1's range is not taken over again.
	r3 := startTakeoverReplica(t, rc, so, "r3")
	all = append(all, r3)
	for _, r := range rs {
		mark[r.name] = len(r.seen(0))
	}
	rs = []*takeoverReplica{r0, r2, r3}
	waitCurrent(t, kube, ns, "r3 joins, each handler current with what it holds", rs...)
	for _, r := range rs {
		for _, e := range r.seen(mark[r.name]) {
			if e.op == "delete" {
				t.Errorf("%s: OnDelete %+v after r3 joined; want none (keys only moved)", r.name, e)
			}
		}
	}
}

func names(cms []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Name)
	}
	return out
}

// rvAtOrAfter reports whether resourceVersion a is at or after b; both
// decimal etcd revisions.
func rvAtOrAfter(a, b string) bool {
	return len(a) > len(b) || len(a) == len(b) && a >= b
}

// A replica restarted under its name with its directory takes its own
// range over from its previous instance's Lease: its handler gets
// OnDelete for the ConfigMaps deleted while it was down.
func TestShard_RestartGivesTheDeletesMadeWhileDown(t *testing.T) {
	cp, kube, ns := setup(t)
	rc := cp.RESTConfig()
	createCMs(t, kube, ns, 20, func(i int) string { return fmt.Sprintf("cm-%02d", i) }, func(int) string { return "1" })
	so := jcache.ShardOptions{
		Group: "restart", Namespace: ns,
		Resources:     []schema.GroupResource{{Resource: "configmaps"}},
		LeaseDuration: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
	}
	dir := t.TempDir()
	inDir := func(o jcache.Options) jcache.Options { o.Dir = dir; return o }
	var last string
	wait := func(r *takeoverReplica, why string) { t.Helper(); waitCurrent(t, kube, ns, why, r) }
	r := startTakeoverReplica(t, rc, so, "r0", inDir, jcache.AbandonShardLease)
	wait(r, "the replica settles, its handler current")
	waitShard(t, "the replica publishes a position", func() bool {
		l, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "restart-r0", metav1.GetOptions{})
		last = fmt.Sprint(l.GetAnnotations(), err)
		return err == nil && l.Annotations["watchjournal.io/shard-positions"] != "{}" && l.Annotations["watchjournal.io/shard-positions"] != ""
	}, func() string { return last })
	r.stop(t)
	deleted := map[string]bool{"cm-03": true, "cm-11": true}
	for name := range deleted {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r = startTakeoverReplica(t, rc, so, "r0", inDir)
	defer r.stop(t)
	wait(r, "the restarted replica settles, its handler current")
	got := map[string]bool{}
	for _, e := range r.seen(0) {
		if e.op == "delete" {
			got[e.name] = true
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(deleted) {
		t.Errorf("OnDelete after the restart: %v; want %v", got, deleted)
	}
}

// A replica stopped cleanly (its Lease deleted), with no other member
// live, and restarted under its name with its directory: nobody took its
// range over while it was down and its Lease shows no previous instance,
// so its handler gets the deletes made meanwhile from the file's record,
// as an unsharded cache's would, though it was given no range when its
// replay ran and when the loop's relist journaled the deletes. The
// group's first renewal is held until then: of a file kept whole, until
// the handler synced; of an Owners file, whose loop runs only once the
// group gives a range, until its replay is done (the relist follows the
// growth, which waits for the file to list the range).
func TestShard_CleanRestartAloneGivesTheDeletesMadeWhileDown(t *testing.T) {
	cms := []schema.GroupResource{{Resource: "configmaps"}}
	t.Run("whole file", func(t *testing.T) { cleanRestartAlone(t, nil) })
	t.Run("owners file", func(t *testing.T) { cleanRestartAlone(t, cms) })
}

// waitCurrent waits until the replicas rs are settled with each other
// and each one's handler holds the ConfigMaps of ns as the server has
// them.
func waitCurrent(t *testing.T, kube kubernetes.Interface, ns, why string, rs ...*takeoverReplica) {
	t.Helper()
	var last string
	waitShard(t, why, func() bool {
		ok, s := takeoverSettled(rs)
		if ok {
			cms := listCMs(t, kube, ns)
			for _, r := range rs {
				if ok, s = r.current(cms); !ok {
					break
				}
			}
		}
		last = s
		return ok
	}, func() string { return last })
}

func cleanRestartAlone(t *testing.T, owners []schema.GroupResource) {
	cp, kube, ns := setup(t)
	rc := cp.RESTConfig()
	createCMs(t, kube, ns, 20, func(i int) string { return fmt.Sprintf("cm-%02d", i) }, func(int) string { return "1" })
	so := jcache.ShardOptions{
		Group: "clean", Namespace: ns,
		Resources: []schema.GroupResource{{Resource: "configmaps"}}, Owners: owners,
		LeaseDuration: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
	}
	dir := t.TempDir()
	inDir := func(o jcache.Options) jcache.Options { o.Dir = dir; return o }
	wait := func(r *takeoverReplica, why string) { t.Helper(); waitCurrent(t, kube, ns, why, r) }
	r := startTakeoverReplica(t, rc, so, "r0", inDir)
	wait(r, "the replica settles, its handler current")
	r.stop(t)
	if _, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "clean-r0", metav1.GetOptions{}); err == nil {
		t.Fatal("the Lease is still there after a clean stop; want it deleted")
	}
	deleted := map[string]bool{"cm-04": true, "cm-15": true}
	for name := range deleted {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	r = startTakeoverReplica(t, rc, so, "r0", inDir, jcache.HoldShardGroup(gate))
	defer r.stop(t)
	given := r.reg.HasSynced
	if owners != nil {
		given = func() bool { return jcache.HandlerReplayed(r.reg) }
	}
	waitShard(t, "the restarted handler is given the file while the group gives no range", given, func() string {
		return fmt.Sprintf("status %+v, calls %+v", r.cache.ShardStatus(), r.seen(0))
	})
	if calls := r.seen(0); len(calls) != 0 {
		t.Fatalf("calls before the group gave a range: %+v; want none", calls)
	}
	close(gate)
	wait(r, "the restarted replica settles, its handler current")
	got := map[string]bool{}
	for _, e := range r.seen(0) {
		if e.op == "delete" {
			got[e.name] = true
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(deleted) {
		t.Errorf("OnDelete after the restart: %v; want %v (calls: %+v)", got, deleted, r.seen(0))
	}
}

// A key that moves between live replicas and is deleted in the move's
// gap (after the loser's handlers dropped it, before the gainer's grew
// into it) gets its OnDelete from the gainer: two replicas settled, a
// third joins while the ConfigMaps that move to it are deleted one at a
// time across the join; then it stops cleanly while those it holds are
// deleted.
func TestShard_MoveGivesTheDeletesMadeInItsGap(t *testing.T) {
	cp, kube, ns := setup(t)
	rc := cp.RESTConfig()
	createCMs(t, kube, ns, 180, func(i int) string { return fmt.Sprintf("cm-%03d", i) }, func(int) string { return "1" })
	so := jcache.ShardOptions{
		Group: "gap", Namespace: ns,
		Resources: []schema.GroupResource{{Resource: "configmaps"}},
		// Renewals 2 s apart: a move's gap (the loser's drop to the
		// gainer's growth) is up to one of them.
		LeaseDuration: 6 * time.Second, RenewInterval: 2 * time.Second,
	}
	rs := []*takeoverReplica{startTakeoverReplica(t, rc, so, "r0"), startTakeoverReplica(t, rc, so, "r1")}
	defer func() {
		for _, r := range rs {
			r.stop(t)
		}
	}()
	waitCurrent(t, kube, ns, "two replicas settle, each handler current", rs...)

	// The ConfigMaps r2's share will take, deleted 100 ms apart from its
	// start on.
	share := hashrange.Assign([]string{"r0", "r1", "r2"}, 0)["r2"]
	var moving []corev1.ConfigMap
	for _, cm := range listCMs(t, kube, ns) {
		if share.ContainsUID(string(cm.UID)) {
			moving = append(moving, cm)
		}
	}
	marks := []int{len(rs[0].seen(0)), len(rs[1].seen(0)), 0}
	rs = append(rs, startTakeoverReplica(t, rc, so, "r2"))
	start := time.Now()
	deleted := map[string]string{} // uid → name
	for i, cm := range moving {
		if i%3 == 2 {
			continue // left for r2's leave, below
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted[string(cm.UID)] = cm.Name
		time.Sleep(100 * time.Millisecond) // spread the deletes over the join: some land in a move's gap
	}
	t.Logf("%d ConfigMaps of r2's share deleted over %v from its start", len(deleted), time.Since(start).Round(100*time.Millisecond))
	waitCurrent(t, kube, ns, "three replicas settle, each handler current", rs...)

	// everyDeleteGiven checks that every UID of deleted got an OnDelete
	// (at least once, on some replica of among, after marks) and no UID
	// not in ever did (a delete of an earlier phase may be given again:
	// at least once).
	ever := map[string]string{}
	everyDeleteGiven := func(why string, among []*takeoverReplica, marks []int, deleted map[string]string) {
		t.Helper()
		got := map[string][]string{} // uid → replicas
		for i, r := range among {
			for _, e := range r.seen(marks[i]) {
				if e.op != "delete" {
					continue
				}
				if _, ok := ever[e.uid]; !ok {
					t.Errorf("%s: %s: OnDelete %+v; want none for a ConfigMap not deleted", why, r.name, e)
				}
				got[e.uid] = append(got[e.uid], r.name)
			}
		}
		by := map[string]int{}
		for _, rs := range got {
			for _, r := range rs {
				by[r]++
			}
		}
		t.Logf("%s: OnDelete given, by replica: %v", why, by)
		var missing []string
		for uid, name := range deleted {
			if len(got[uid]) == 0 {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%s: no replica's handler got OnDelete for %d of %d deleted ConfigMaps: %v", why, len(missing), len(deleted), missing)
		}
	}
	maps.Copy(ever, deleted)
	everyDeleteGiven("r2 joins", rs, marks, deleted)

	// r2 stops cleanly (its Lease deleted) while the ConfigMaps it holds
	// are deleted one at a time: each reaches some replica's handler.
	r2 := rs[2]
	var leaving []corev1.ConfigMap
	for _, cm := range listCMs(t, kube, ns) {
		if r2.cache.Holds(&cm) {
			leaving = append(leaving, cm)
		}
	}
	marks = []int{len(rs[0].seen(0)), len(rs[1].seen(0)), len(r2.seen(0))}
	deleted = map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, cm := range leaving {
			if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(100 * time.Millisecond) // spread the deletes over the leave
		}
	}()
	time.Sleep(500 * time.Millisecond) // some deletes before the stop, most after
	r2.stop(t)
	t.Logf("r2 stopped with %d ConfigMaps held, deleted 100 ms apart from 500 ms before the stop", len(leaving))
	rs = rs[:2]
	<-done
	for _, cm := range leaving {
		deleted[string(cm.UID)] = cm.Name
	}
	maps.Copy(ever, deleted)
	waitCurrent(t, kube, ns, "r0 and r1 take r2's range over, each handler current", rs...)
	everyDeleteGiven("r2 leaves", []*takeoverReplica{rs[0], rs[1], r2}, marks, deleted)
}
