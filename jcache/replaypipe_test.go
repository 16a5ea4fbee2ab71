package jcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/journal"
)

// replayPayload is the size of a data entry replayFile adds to every
// ConfigMap (0: none).
var replayPayload = 0

// replayFile opens a journal keeping objects with n ConfigMaps ns/oNNNNNN
// and returns it with the keys in key order.
func replayFile(t *testing.T, n int) (*journal.Journal, []string) { return replayFileB(t, n) }

// configMapFile opens a journal of ConfigMaps that keeps objects, in a
// directory of t's (closed when t ends), holding n ConfigMaps ns/oNNNNNN
// added by a watch at resourceVersions 1 to n, each made by fill and
// stored as encode gives it; it returns it with the keys in key order.
func configMapFile(t testing.TB, n int, fill func(i int, cm *corev1.ConfigMap), encode func(*corev1.ConfigMap) ([]byte, error)) (*journal.Journal, []string) {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", APIVersion: "v1"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, n)
	err = j.Writer().Update(func(tx *journal.Tx) error {
		for i := range n {
			cm := &corev1.ConfigMap{}
			cm.Kind, cm.APIVersion = "ConfigMap", "v1"
			cm.Namespace, cm.Name = "ns", fmt.Sprintf("o%06d", i)
			cm.UID, cm.ResourceVersion = types.UID(fmt.Sprint("u", i)), fmt.Sprint(i+1)
			fill(i, cm)
			b, err := encode(cm)
			if err != nil {
				return err
			}
			keys[i] = "ns/" + cm.Name
			if _, err := tx.Append(&journal.Event{Type: journal.Added, Key: keys[i], UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Object: b, Origin: journal.OriginWatch}); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(fmt.Sprint(n))
	})
	if err != nil {
		t.Fatal(err)
	}
	return j, keys
}

func replayFileB(t testing.TB, n int) (*journal.Journal, []string) {
	t.Helper()
	return configMapFile(t, n, func(i int, cm *corev1.ConfigMap) {
		cm.Data = map[string]string{"v": fmt.Sprint(i)}
		if replayPayload > 0 {
			cm.Data["payload"] = strings.Repeat("x", replayPayload)
		}
	}, func(cm *corev1.ConfigMap) ([]byte, error) { return json.Marshal(cm) })
}

// recorder records the keys a handler is given, and whether two calls
// ever overlapped.
type recorder struct {
	mu       sync.Mutex
	adds     []string
	updates  []string
	initial  bool
	inFlight atomic.Int32
	overlap  atomic.Bool
}

func (h *recorder) enter() func() {
	if h.inFlight.Add(1) > 1 {
		h.overlap.Store(true)
	}
	return func() { h.inFlight.Add(-1) }
}

func (h *recorder) OnAdd(o any, initial bool) {
	defer h.enter()()
	cm := o.(*corev1.ConfigMap)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.adds = append(h.adds, cm.Namespace+"/"+cm.Name)
	h.initial = h.initial || !initial
}

func (h *recorder) OnUpdate(_, o any) {
	defer h.enter()()
	cm := o.(*corev1.ConfigMap)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.updates = append(h.updates, cm.Namespace+"/"+cm.Name)
}

func (h *recorder) OnDelete(any) {}

// replayRegistration returns a registration of h on j whose replay
// chunks hold at most chunk objects (0: the default).
func replayRegistration(j *journal.Journal, h *recorder, chunk int) *registration {
	return newRegistration(replayInformer(j, chunk), h, 0)
}

// addEach replays r's file chunk by chunk, giving each object to h as an
// initial add; it returns the first error of a decode or of ctx.
func addEach(ctx context.Context, r *registration, h interface{ OnAdd(any, bool) }) error {
	return r.eachChunk(ctx, func(ctx context.Context, job *replayJob) error {
		for i := range job.objs {
			o, err := job.object(ctx, i)
			if err != nil {
				return err
			}
			h.OnAdd(o, true)
		}
		return nil
	})
}

// replayInformer returns an informer of ConfigMaps on j whose replay
// chunks hold at most chunk objects (0: the default).
func replayInformer(j *journal.Journal, chunk int) *informer {
	o := &Options{hooks: testHooks{replayChunk: chunk}}
	return newInformer(&feed{j: j, opts: o}, nil, &corev1.ConfigMap{}, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, 0, nil, logr.Discard())
}

func sameKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: key %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

// TestReplay_ParallelDecodeKeepsOrder: a replay decoded on all cores, in
// many chunks (of 37 objects, the last partial), gives the handler every
// stored object as OnAdd(obj, true) in key order, one call at a time;
// then a resync gives every object as OnUpdate in key order.
func TestReplay_ParallelDecodeKeepsOrder(t *testing.T) {
	j, keys := replayFile(t, 1000)
	h := &recorder{}
	r := replayRegistration(j, h, 37)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.feed(ctx) }()
	for !r.replayed.Load() {
		r.mu.Lock()
		p := r.progress
		r.mu.Unlock()
		if r.replayed.Load() {
			break
		}
		select {
		case <-p:
		case err := <-done:
			t.Fatalf("feed returned before the replay was done: %v", err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	sameKeys(t, "replay", h.adds, keys)
	h.mu.Unlock()
	if h.initial {
		t.Error("a replayed object was given as OnAdd(obj, false)")
	}
	if h.overlap.Load() {
		t.Error("two handler calls overlapped")
	}

	if err := r.resyncAll(t.Context(), func(journal.Event) bool { return false }); err != nil {
		t.Fatal(err)
	}
	sameKeys(t, "resync", h.updates, keys)
	if h.overlap.Load() {
		t.Error("two handler calls overlapped in the resync")
	}
}

// TestReplay_DecodeErrorSurfaces: an object that does not decode (here
// its transform fails) ends the replay with that error, after the
// objects before it were delivered in order and none after it; the
// registration never reports the replay done.
func TestReplay_DecodeErrorSurfaces(t *testing.T) {
	j, keys := replayFile(t, 1000)
	h := &recorder{}
	r := replayRegistration(j, h, 37)
	bad := errors.New("this object does not decode")
	r.inf.onDecode = func(o any) (any, error) {
		if o.(*corev1.ConfigMap).Name == "o000500" {
			return nil, bad
		}
		return o, nil
	}
	if err := r.feed(t.Context()); !errors.Is(err, bad) {
		t.Fatalf("feed returned %v, want the decode error", err)
	}
	sameKeys(t, "replay up to the bad object", h.adds, keys[:500])
	if r.replayed.Load() {
		t.Error("the replay is reported done after a decode error")
	}
	head, err := j.Head()
	if err != nil {
		t.Fatal(err)
	}
	r.pos.Store(head) // the events are delivered: the resync is of the objects alone
	if err := r.resyncAll(t.Context(), func(journal.Event) bool { return false }); !errors.Is(err, bad) {
		t.Fatalf("resyncAll returned %v, want the decode error", err)
	}
	sameKeys(t, "resync up to the bad object", h.updates, keys[:500])
}

// BenchmarkReplay: a replay of 20,000 stored ConfigMaps to a handler that
// does nothing, from chunks read and decoded as a restart does.
func BenchmarkReplay(b *testing.B) {
	j, _ := replayFileB(b, 20000)
	for b.Loop() {
		h := &recorder{}
		r := replayRegistration(j, h, 0)
		if err := addEach(b.Context(), r, h); err != nil {
			b.Fatal(err)
		}
	}
}

// cancelAfter cancels a context at its n-th OnAdd.
type cancelAfter struct {
	recorder
	n      int
	cancel context.CancelFunc
}

func (h *cancelAfter) OnAdd(o any, initial bool) {
	h.recorder.OnAdd(o, initial)
	if len(h.adds) == h.n {
		h.cancel()
	}
}

// TestReplay_StopsWithItsContext: a replay whose context ends stops
// handing objects to the handler at once (none after the cancel, though
// later chunks were read and decoded ahead), returns nil, and is not
// reported done.
func TestReplay_StopsWithItsContext(t *testing.T) {
	j, keys := replayFile(t, 1000)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := &cancelAfter{n: 100, cancel: cancel}
	r := newRegistration(replayInformer(j, 37), h, 0)
	if err := r.feed(ctx); err != nil {
		t.Fatalf("feed returned %v after its context ended, want nil", err)
	}
	sameKeys(t, "replay until the cancel", h.adds, keys[:100])
	if r.replayed.Load() {
		t.Error("a cancelled replay is reported done")
	}
}

// TestReplay_DecodesBoundedAhead: while the handler holds its first
// object, the workers decode at most aheadBatches() batches of
// decodeBatch objects of a 3,000-object chunk, not the chunk: the
// decoded objects waiting for the handler stay bounded (a serial replay
// held one). The window in which nothing more may be decoded is a
// negative check: an unbounded pipeline fails it at once; a bounded one
// cannot fail it however slow the machine.
func TestReplay_DecodesBoundedAhead(t *testing.T) {
	j, keys := replayFile(t, 3000)
	bound := int64(aheadBatches() * decodeBatch)
	var decoded atomic.Int64
	release := make(chan struct{})
	h := &blockFirst{release: release}
	r := replayRegistration(j, &h.recorder, 0)
	r.inf.onDecode = func(o any) (any, error) {
		decoded.Add(1)
		return o, nil
	}
	done := make(chan error, 1)
	go func() {
		done <- addEach(t.Context(), r, h)
	}()
	// The handler holds object 0: decoding reaches the bound, then
	// nothing more is decoded for a while.
	for decoded.Load() < bound {
		select {
		case err := <-done:
			t.Fatalf("the replay ended (%v) with %d of %d decoded", err, decoded.Load(), bound)
		case <-time.After(time.Millisecond):
		}
	}
	window := time.After(200 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case <-window:
			waiting = false
		case <-time.After(time.Millisecond):
			if n := decoded.Load(); n > bound {
				t.Fatalf("%d objects decoded while the handler held the first; want at most %d", n, bound)
			}
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sameKeys(t, "replay", h.adds, keys)
}

// blockFirst is a recorder whose first OnAdd waits for release.
type blockFirst struct {
	recorder
	release <-chan struct{}
	once    sync.Once
}

func (h *blockFirst) OnAdd(o any, initial bool) {
	h.once.Do(func() { <-h.release })
	h.recorder.OnAdd(o, initial)
}
