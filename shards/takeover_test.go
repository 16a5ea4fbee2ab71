package shards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
	"github.com/watchjournal/watchjournal/shards"
)

// childEnv makes the test binary run one shard member (childMember)
// instead of the tests: "<kubeconfig>,<db>,<member>".
const childEnv = "WATCHJOURNAL_SHARDS_TEST_MEMBER"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		childMember(v)
		return
	}
	os.Exit(m.Run())
}

// The resource and the member options the takeover tests use.
var (
	takeoverRes  = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "work"}
	takeoverOpts = shards.Options{Group: "tk", Namespace: "default", LeaseDuration: 4 * time.Second, RenewInterval: 500 * time.Millisecond}
)

// childMember runs a member until it is killed.
func childMember(v string) {
	f := strings.Split(v, ",")
	cfg, err := clientcmd.BuildConfigFromFlags("", f[0])
	if err == nil {
		opts := takeoverOpts
		opts.Member = f[2]
		var m *shards.Member
		if m, err = shards.Open(cfg, f[1], takeoverRes, opts); err == nil {
			err = m.Run(context.Background())
		}
	}
	fmt.Fprintln(os.Stderr, "member:", err)
	os.Exit(1)
}

// A member is SIGKILLed and never comes back; two of its keys are deleted
// and one is updated while no journal watches them. The survivor takes its
// range over with the index the dead member published: it journals the
// two DELETED (reason gone) and the MODIFIED, exactly once each, and ADDED
// (moved) for the rest of the range. Once it holds the
// range, the dead member's Lease and index are deleted. When the member
// does come back on its old file after all, it journals none of those
// changes again: it hands the range's keys back (DELETED, moved) and lists
// them anew (ADDED, moved), as the survivor hands them over.
//
// It runs in both start orders: a first (b joins the running group with an
// empty file), and b first (a does). The first to start serves the whole
// space alone and shrinks to its share only once the second publishes its
// own; b is killed once the two publish disjoint shares, so that "b's
// range" is what only b held.
func TestMember_TakeoverAfterKill_JournalsWhatChangedWhileDead(t *testing.T) {
	t.Run("a first", func(t *testing.T) { takeoverAfterKill(t, false) })
	t.Run("b first", func(t *testing.T) { takeoverAfterKill(t, true) })
}

// takeoverAfterKill is TestMember_TakeoverAfterKill_JournalsWhatChangedWhileDead
// with b started first, and a once b serves the whole space alone, when
// bFirst; with a first, and b once a serves the whole space alone,
// otherwise.
func takeoverAfterKill(t *testing.T, bFirst bool) {
	cp, cs, cms := startWork(t, 60)
	cfg := cp.RESTConfig()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()

	// b runs in its own process, to be killed.
	var bErr strings.Builder
	startB := func() (*exec.Cmd, chan struct{}) {
		b := exec.Command(os.Args[0], "-test.run=^$")
		b.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{cp.KubeconfigPath(), filepath.Join(dir, "b.db"), "b"}, ","))
		b.Stderr = &bErr
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = b.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = b.Process.Kill()
			<-done
		})
		return b, done
	}
	leases := cs.CoordinationV1().Leases("default")
	opts := takeoverOpts
	opts.Member, opts.Logger = "a", testr.New(t)
	a, err := shards.Open(cfg, filepath.Join(dir, "a.db"), takeoverRes, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done := make(chan error, 1)
	aRuns := false
	startA := func() {
		aRuns = true
		go func() { done <- a.Run(ctx) }()
	}
	defer func() {
		if aRuns {
			cancel()
			<-done
		}
	}()

	// The second starts once the first serves alone: its Lease publishes
	// the whole space.
	var b *exec.Cmd
	var bDone chan struct{}
	if bFirst {
		b, bDone = startB()
		waitLease(t, ctx, leases, "tk-b", "b serves alone", 60*time.Second, func(l *coordinationv1.Lease) bool {
			return l.Annotations[shards.AnnotationSelector] == hashrange.Full().Selector()
		}, bErr.String)
		startA()
	} else {
		startA()
		waitMember(t, a, "a serves alone", 60*time.Second, func(st shards.Status, _ reconcile.Status) bool {
			return st.State == shards.StateServing && st.Published == hashrange.Full().Selector()
		})
		b, bDone = startB()
	}

	// Both serve their own shares (the first to start has shrunk to its
	// own: until then it publishes the whole space, and a key of a's
	// share would be in both), and b's published index holds every key of
	// its range.
	var bRange hashrange.Set
	var bKeys []string // "work/<name>" in b's range
	var lastSeen string
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := a.Status()
		lb, err := leases.Get(ctx, "tk-b", metav1.GetOptions{})
		if err == nil && st.State == shards.StateServing && len(st.Members) == 2 && st.Published == st.Target {
			bRange, _ = hashrange.Parse(lb.Annotations[shards.AnnotationSelector])
			var mf struct{ Range string }
			_ = json.Unmarshal([]byte(lb.Annotations[shards.AnnotationIndex]), &mf)
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bKeys = nil
			for _, cm := range list.Items {
				if bRange.ContainsUID(string(cm.UID)) {
					bKeys = append(bKeys, "work/"+cm.Name)
				}
			}
			aPub := parsed(st.Published)
			if !bRange.Empty() && bRange.Union(aPub).Equal(hashrange.Full()) && bRange.Intersect(aPub).Empty() && mf.Range == bRange.Selector() &&
				strings.Contains(lb.Annotations[shards.AnnotationIndex], fmt.Sprintf(`"keys":%d`, len(bKeys))) {
				break
			}
			lastSeen = fmt.Sprintf("b publishes %.1f%% of the space, %.1f%% of it a's; b's index %s; %d keys in b's range",
				100*bRange.Share(), 100*bRange.Intersect(aPub).Share(), lb.Annotations[shards.AnnotationIndex], len(bKeys))
		}
		if time.Now().After(deadline) {
			t.Fatalf("a and b not both serving with b's index published within 60s; a %+v; %s; b's stderr %s", st, lastSeen, bErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(bKeys) < 3 {
		t.Fatalf("b's range holds %d of the 60 ConfigMaps; want 3 at least", len(bKeys))
	}
	sort.Strings(bKeys)
	aKeys, err := a.Journal().ScanIndex("", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range aKeys {
		if bRange.ContainsUID(e.UID) {
			t.Errorf("%s: a's index holds it, in b's range, before b dies", e.Key)
		}
	}
	from, err := a.Journal().Head()
	if err != nil {
		t.Fatal(err)
	}

	// b dies; two of its keys are deleted and one is updated.
	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-bDone
	gone, changed := bKeys[:2], bKeys[2]
	for _, k := range gone {
		if err := cms.Delete(ctx, strings.TrimPrefix(k, "work/"), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := updateKey(t, ctx, cms, changed)

	evs := takenOver(t, a, from)
	byKey := map[string][]journal.Event{}
	for _, e := range evs {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	show := func(es []journal.Event) string {
		var s []string
		for _, e := range es {
			s = append(s, fmt.Sprintf("%s(%s)@%s", e.Type, e.Reason, e.ResourceVersion))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	for _, k := range gone {
		if es := byKey[k]; len(es) != 1 || es[0].Type != journal.Deleted || es[0].Reason != journal.ReasonGone {
			t.Errorf("%s, deleted while b was dead: a journaled %s; want one DELETED (gone)", k, show(es))
		}
	}
	if es := byKey[changed]; len(es) != 1 || es[0].Type != journal.Modified || es[0].ResourceVersion != cm.ResourceVersion || es[0].Reason != "" {
		t.Errorf("%s, updated while b was dead: a journaled %s; want one MODIFIED@%s", changed, show(es), cm.ResourceVersion)
	}
	for _, k := range bKeys[3:] {
		if es := byKey[k]; len(es) != 1 || es[0].Type != journal.Added || es[0].Reason != journal.ReasonMoved {
			t.Errorf("%s, unchanged in b's range: a journaled %s; want one ADDED (moved)", k, show(es))
		}
	}
	for k, es := range byKey {
		if i := sort.SearchStrings(bKeys, k); i == len(bKeys) || bKeys[i] != k {
			t.Errorf("%s, outside b's range: a journaled %s; want nothing", k, show(es))
		}
	}

	// b's Lease and index are collected once a holds the range.
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, lerr := leases.Get(ctx, "tk-b", metav1.GetOptions{})
		chunks, err := leases.List(ctx, metav1.ListOptions{LabelSelector: shards.LabelIndexOf + "=b"})
		if err != nil {
			t.Fatal(err)
		}
		if apierrors.IsNotFound(lerr) && len(chunks.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's Lease (get: %v) and %d index chunks still there 30s after a took its range", lerr, len(chunks.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// b comes back on its old file after all.
	b, bDone = startB()
	waitMember(t, a, "a hands b's range back", 60*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		if st.State != shards.StateServing || len(st.Members) != 2 || st.Published != st.Target || st.Range == hashrange.Full().Selector() {
			return false
		}
		lb, err := leases.Get(ctx, "tk-b", metav1.GetOptions{})
		if err != nil {
			return false
		}
		pub, err := hashrange.Parse(lb.Annotations[shards.AnnotationSelector])
		return err == nil && !pub.Empty() && pub.Union(parsed(st.Published)).Equal(hashrange.Full())
	})
	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-bDone
	bj, err := journal.Open(filepath.Join(dir, "b.db"), &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bj.Close()
	bEvs, err := bj.Read(1, 10000)
	if err != nil {
		t.Fatal(err)
	}
	bByKey := map[string][]journal.Event{}
	for _, e := range bEvs {
		bByKey[e.Key] = append(bByKey[e.Key], e)
	}
	// b's first life saw no change; its second hands over and lists: moved
	// events only.
	for _, k := range bKeys {
		es := bByKey[k]
		for _, e := range es {
			if e.Type == journal.Modified || (e.Type == journal.Deleted && e.Reason != journal.ReasonMoved) {
				t.Errorf("%s: b, back, journaled %s; want no change journaled twice (a journaled it)", k, show(es))
				break
			}
		}
		if n := len(es); n == 0 || es[0].Type != journal.Added || es[n-1].Reason != journal.ReasonMoved {
			t.Errorf("%s: b journaled %s; want its first ADDED and at last a moved event", k, show(es))
		}
	}
	if es := bByKey[changed]; len(es) == 0 || es[len(es)-1].Type != journal.Added || es[len(es)-1].ResourceVersion != cm.ResourceVersion {
		t.Errorf("%s: b journaled %s; want it at last ADDED (moved) at %s", changed, show(es), cm.ResourceVersion)
	}
}

// A member stopped with LeaveTimeout negative (no handover) publishes its
// final index and leaves its Lease to expire: the survivor takes its range
// over with that index and journals the delete and the update made right
// after it stopped, once each.
func TestMember_StopWithoutHandover_TakeoverWithIndex(t *testing.T) {
	cp, _, cms := startWork(t, 40)
	cfg := cp.RESTConfig()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	open := func(name string, leave time.Duration) *shards.Member {
		opts := takeoverOpts
		opts.Member, opts.LeaveTimeout, opts.Logger = name, leave, testr.New(t)
		m, err := shards.Open(cfg, filepath.Join(dir, name+".db"), takeoverRes, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a, b := open("a", 0), open("b", -1)
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	bctx, bcancel := context.WithCancel(ctx)
	go func() { aDone <- a.Run(ctx) }()
	go func() { bDone <- b.Run(bctx) }()
	defer func() { cancel(); <-aDone }()
	defer bcancel()

	for _, m := range []*shards.Member{a, b} {
		waitMember(t, m, "both serving", 60*time.Second, func(st shards.Status, ls reconcile.Status) bool {
			return st.State == shards.StateServing && len(st.Members) == 2 && st.Published == st.Target
		})
	}
	bKeys, err := b.Journal().ScanIndex("", 100)
	if err != nil || len(bKeys) < 2 {
		t.Fatalf("b holds %v (%v); want 2 keys at least", bKeys, err)
	}
	from, err := a.Journal().Head()
	if err != nil {
		t.Fatal(err)
	}
	bcancel()
	if err := <-bDone; err != nil {
		t.Fatalf("b's Run = %v; want nil", err)
	}
	gone, changed := bKeys[0].Key, bKeys[1].Key
	if err := cms.Delete(ctx, strings.TrimPrefix(gone, "work/"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := updateKey(t, ctx, cms, changed)
	evs := takenOver(t, a, from)
	var forGone, forChanged []string
	for _, e := range evs {
		s := fmt.Sprintf("%s(%s)@%s", e.Type, e.Reason, e.ResourceVersion)
		switch e.Key {
		case gone:
			forGone = append(forGone, s)
		case changed:
			forChanged = append(forChanged, s)
		}
	}
	if len(forGone) != 1 || !strings.HasPrefix(forGone[0], "DELETED(") || strings.HasPrefix(forGone[0], "DELETED(moved)") {
		t.Errorf("%s, deleted after b stopped: a journaled %v; want one DELETED, not moved", gone, forGone)
	}
	if want := "MODIFIED()@" + cm.ResourceVersion; len(forChanged) != 1 || forChanged[0] != want {
		t.Errorf("%s, updated after b stopped: a journaled %v; want [%s]", changed, forChanged, want)
	}
}

// waitLease waits for cond on the Lease name, printing the last one seen
// (and more, from extra) on a timeout.
// startWork starts a control plane and creates in it namespace work
// holding n ConfigMaps cm-NN with data v=1; it returns the control plane,
// an admin client and work's ConfigMaps.
func startWork(t *testing.T, n int) (*controlplane.ControlPlane, *kubernetes.Clientset, coreclient.ConfigMapInterface) {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	cs := cp.CreateNamespaceT(t, "work")
	cms := cs.CoreV1().ConfigMaps("work")
	for i := range n {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return cp, cs, cms
}

// updateKey sets data v to 2 in the ConfigMap of key (work/NAME) and
// returns it as updated.
func updateKey(t *testing.T, ctx context.Context, cms coreclient.ConfigMapInterface, key string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cms.Get(ctx, strings.TrimPrefix(key, "work/"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cm
}

// takenOver waits until a serves the full range, synced, and returns the
// events a journaled after offset from.
func takenOver(t *testing.T, a *shards.Member, from uint64) []journal.Event {
	t.Helper()
	waitMember(t, a, "a takes b's range over", 60*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		return st.State == shards.StateServing && st.Published == hashrange.Full().Selector() && ls.Synced
	})
	evs, err := a.Journal().Read(from+1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func waitLease(t *testing.T, ctx context.Context, leases coordclient.LeaseInterface, name, what string, within time.Duration, cond func(*coordinationv1.Lease) bool, extra func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(l) {
			return
		}
		if time.Now().After(deadline) {
			last := fmt.Sprint("get: ", err)
			if err == nil {
				last = fmt.Sprintf("annotations %v", l.Annotations)
			}
			t.Fatalf("%s: not within %v; Lease %s last seen: %s; %s", what, within, name, last, extra())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parsed is the Set of a Status range ("": empty).
func parsed(sel string) hashrange.Set {
	s, _ := hashrange.Parse(sel)
	return s
}
