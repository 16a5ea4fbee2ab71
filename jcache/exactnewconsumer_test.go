package jcache_test

// A new Exact consumer (a controller name the file has not seen) on a
// file whose retention already trimmed the first events starts from every
// stored object, not from the first retained event: the keys whose only
// events were trimmed are reconciled too.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

func TestExact_NewConsumerOnTrimmedFileReconcilesEveryObject(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 10
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("cm%02d", i))
		createCM(t, kube, ns, all[i], nil, nil)
	}
	dir := t.TempDir()
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t),
		Retention: &journal.Retention{HardMaxBytes: 8 << 10}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()
	if _, err := rc.c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// Three objects change ten times with 2 KiB each: the hard cap trims
	// the first list's events, the only events of cm03..cm09.
	big := strings.Repeat("x", 2048)
	for round := range 10 {
		for _, name := range all[:3] {
			patch := fmt.Sprintf(`{"data":{"v":"%d-%s"}}`, round, big)
			if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFirstRetained(t, dir, "configmaps.", n+1)

	h := runByHandWith(t, rc.c, ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }, jcache.ExactOptions{MaxPending: 3})
	defer h.stop()
	h.rec.waitUntil(t, "every object reconciled, the commit at the head", func() bool {
		ok, _ := atHead(h.src)
		return ok && len(h.rec.names()) == n
	}, func() any { _, s := atHead(h.src); return fmt.Sprint(h.rec.names(), s) })
	if got := h.rec.names(); strings.Join(got, ",") != strings.Join(all, ",") {
		t.Fatalf("a new consumer on the trimmed file reconciled %v; want every stored object %v", got, all)
	}
}

// waitFirstRetained waits until retention trimmed the file of dir whose
// name starts with prefix up to at least offset first (its first retained
// offset is first or more).
func waitFirstRetained(t *testing.T, dir, prefix string, first uint64) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		offs, err := jcache.FileOffsets(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, o := range offs {
			if strings.HasPrefix(name, prefix) && o[0] >= first {
				return
			}
		}
		select {
		case <-deadline:
			t.Fatalf("retention did not trim the %s file to offset %d: %v", prefix, first, offs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
