package jcache

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// heldUID is the one UID in heldRange, otherUID outside it.
const heldUID, otherUID types.UID = "held-uid", "other-uid"

var heldRange = hashrange.Set{{First: hashrange.Hash(string(heldUID)), Last: hashrange.Hash(string(heldUID))}}

// shardCM returns a ConfigMap of uid name, with a controller owner of
// ownerUID when it is not empty, and a non-controller owner of other when
// that is not empty.
func shardCM(name string, uid, ownerUID, other types.UID) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}}
	if other != "" {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: other})
	}
	if ownerUID != "" {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: ownerUID, Controller: ptr.To(true)})
	}
	return c
}

func TestShardUID(t *testing.T) {
	for _, c := range []struct {
		name string
		obj  any
		want types.UID
		ok   bool
	}{
		{"an object without owner hashes by its own UID", shardCM("a", "self", "", ""), "self", true},
		{"a controller owner's UID comes first", shardCM("a", "self", "owner", ""), "owner", true},
		{"a non-controller owner does not count", shardCM("a", "self", "", "other"), "self", true},
		{"with both, the controller owner", shardCM("a", "self", "owner", "other"), "owner", true},
		{"a DeletedFinalStateUnknown is unwrapped", toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: shardCM("a", "self", "owner", "")}, "owner", true},
		{"no object metadata", "ns/a", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, ok := shardUID(c.obj); got != c.want || ok != c.ok {
				t.Errorf("shardUID = %q, %v; want %q, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// callRecorder records a handler's calls as "add NAME", "update OLD NEW",
// "delete NAME".
type callRecorder struct{ calls []string }

func (r *callRecorder) OnAdd(obj any, _ bool) {
	r.calls = append(r.calls, "add "+obj.(metav1.Object).GetName())
}
func (r *callRecorder) OnUpdate(old, obj any) {
	r.calls = append(r.calls, "update "+old.(metav1.Object).GetName()+" "+obj.(metav1.Object).GetName())
}
func (r *callRecorder) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	r.calls = append(r.calls, "delete "+obj.(metav1.Object).GetName())
}

func TestShardFilter_PassesOnlyTheRange(t *testing.T) {
	in, out := heldUID, otherUID
	rec := &callRecorder{}
	f := newShardFilter(nil, nil, rec)
	f.set.Store(&heldRange)

	f.OnAdd(shardCM("held", in, "", ""), true)
	f.OnAdd(shardCM("other", out, "", ""), true)
	f.OnAdd(shardCM("child-of-held", out, in, ""), false)
	f.OnUpdate(shardCM("u1", in, "", ""), shardCM("u1", in, "", ""))
	f.OnUpdate(shardCM("u2", out, "", ""), shardCM("u2", out, "", ""))
	// A controller owner set: the key hashes by the owner from then on.
	f.OnUpdate(shardCM("adopted-in", out, "", ""), shardCM("adopted-in", out, in, ""))
	f.OnUpdate(shardCM("adopted-out", in, "", ""), shardCM("adopted-out", in, out, ""))
	f.OnDelete(shardCM("d1", in, "", ""))
	f.OnDelete(shardCM("d2", out, "", ""))
	f.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/d3", Obj: shardCM("d3", out, in, "")})

	want := []string{"add held", "add child-of-held", "update u1 u1", "add adopted-in", "delete d1", "delete d3"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls = %q; want %q", rec.calls, want)
	}
}

func TestShardFilter_NothingBeforeARange(t *testing.T) {
	rec := &callRecorder{}
	f := newShardFilter(nil, nil, rec)
	f.OnAdd(shardCM("a", "uid-1", "", ""), true)
	f.OnDelete(shardCM("a", "uid-1", "", ""))
	if len(rec.calls) != 0 {
		t.Errorf("calls before the filter joined its group = %q; want none", rec.calls)
	}
}

func TestShardOptions_Invalid(t *testing.T) {
	cms := []schema.GroupResource{{Resource: "configmaps"}}
	for _, c := range []struct {
		name string
		o    ShardOptions
	}{
		{"no group", ShardOptions{Member: "a", Resources: cms}},
		{"a group that is no DNS label", ShardOptions{Group: "My_Group", Member: "a", Resources: cms}},
		{"no resources", ShardOptions{Group: "g", Member: "a"}},
		{"a lease under a second", ShardOptions{Group: "g", Member: "a", Resources: cms, LeaseDuration: 500 * time.Millisecond}},
		{"a renewal not shorter than the lease", ShardOptions{Group: "g", Member: "a", Resources: cms, LeaseDuration: 3 * time.Second, RenewInterval: 3 * time.Second}},
		{"an owner resource that is not sharded", ShardOptions{Group: "g", Member: "a", Resources: cms, Owners: []schema.GroupResource{{Resource: "secrets"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.o.withDefaults(); !errors.Is(err, ErrShardOptions) {
				t.Errorf("withDefaults() error = %v; want ErrShardOptions", err)
			}
		})
	}
	o, err := ShardOptions{Group: "g", Resources: cms}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Member == "" || o.Namespace != "default" || o.LeaseDuration != 15*time.Second || o.RenewInterval != 5*time.Second {
		t.Errorf("defaults = %+v; want a member name, namespace default, 15s lease, 5s renewal", o)
	}
}

func TestNextHeld(t *testing.T) {
	r := func(first, last uint64) hashrange.Set { return hashrange.Set{{First: first, Last: last}} }
	for _, c := range []struct {
		name                      string
		cur, target, others, want hashrange.Set
	}{
		{"a first member takes its share", nil, r(0, 99), nil, r(0, 99)},
		{"it waits for what another still publishes", nil, r(0, 99), r(50, 199), r(0, 49)},
		{"what left the share goes at once", r(0, 199), r(0, 99), r(100, 199), r(0, 99)},
		{"even where no one publishes it yet", r(0, 199), r(0, 99), nil, r(0, 99)},
		{"what it holds stays though another publishes it", r(0, 99), r(0, 99), r(0, 49), r(0, 99)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextHeld(c.cur, c.target, c.others); !got.Equal(c.want) {
				t.Errorf("nextHeld(%v, %v, %v) = %v; want %v", c.cur, c.target, c.others, got, c.want)
			}
		})
	}
}

// A shrink is published only once every handler applied it: until then
// the published range still covers what a handler may deliver.
func TestShardGroup_PublishesAShrinkOnceApplied(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}, wake: make(chan struct{}, 1)}
	whole, half := hashrange.Set{{First: 0, Last: 199}}, hashrange.Set{{First: 0, Last: 99}}
	f1, f2 := newShardFilter(g, nil, nil), newShardFilter(g, nil, nil)
	g.join(f1)
	g.setHeld(whole, nil)
	if got := g.publishable(); !got.Equal(whole) {
		t.Fatalf("after a grow, publishable = %v; want %v (published before the handlers apply it)", got, whole)
	}
	f1.acked.Store(1)
	g.join(f2) // at generation 1
	g.setHeld(half, nil)
	if got := g.publishable(); !got.Equal(whole) {
		t.Fatalf("after a shrink no handler applied, publishable = %v; want %v", got, whole)
	}
	f1.acked.Store(2)
	if got := g.publishable(); !got.Equal(whole) {
		t.Fatalf("after a shrink one of two handlers applied, publishable = %v; want %v", got, whole)
	}
	f2.acked.Store(2)
	if got := g.publishable(); !got.Equal(half) {
		t.Fatalf("after a shrink every handler applied, publishable = %v; want %v", got, half)
	}
	g.setHeld(nil, nil)
	g.remove(f1)
	g.remove(f2)
	if got := g.publishable(); !got.Empty() {
		t.Fatalf("after the handlers stopped, publishable = %v; want none", got)
	}
}

// A handler that starts after the group grew into a range taken over
// keeps the takeover's deletes though the group publishes right after it
// joined: the takeovers it collects are those of the join.
func TestShardGroup_AFirstHandlerCollectsTheTakeoversItJoins(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}, wake: make(chan struct{}, 1)}
	all := hashrange.Set{{First: 0, Last: 99}}
	g.setHeld(all, []takeover{{member: "b", part: all, positions: map[string]string{"cm": "7"}}})
	f := newShardFilter(g, nil, nil)
	g.join(f)
	g.publishable() // a renewal between the join and the replay
	if len(f.pending) != 1 || f.pending[0].member != "b" || !f.pending[0].part.Equal(all) {
		t.Fatalf("takeovers the handler has for its replay = %+v; want b's range %v", f.pending, all)
	}
}

// A handler that joins while the group's growth waits for a ranged file
// to list it applies only what the files hold, and leaves the growth to
// its apply: its replay gives no object of a part whose owners a read
// does not find yet.
func TestShardGroup_AHandlerJoiningADeferredGrowth(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}, wake: make(chan struct{}, 1), files: map[*feed]hashrange.Set{}}
	listed, all := hashrange.Set{{First: 0, Last: 49}}, hashrange.Set{{First: 0, Last: 99}}
	owners := &feed{}
	g.fileSynced(owners, listed, false)
	g.setHeld(all, nil)
	f := newShardFilter(g, nil, nil)
	set, _ := g.join(f)
	if !set.Equal(listed) || f.acked.Load() != 0 {
		t.Fatalf("join while the owners file lists %v of %v = range %v, generation %d acknowledged; want %v, 0 (the growth left to apply)",
			listed, all, set, f.acked.Load(), listed)
	}
	if st := g.status(); st.Settled {
		t.Fatalf("status while the handler has not applied the growth = %+v; want not settled", st)
	}
}
