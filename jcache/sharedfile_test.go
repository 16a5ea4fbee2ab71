package jcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// Two caches of one process on one directory share its files: a second
// one with other options is refused with an error naming the option
// (else the first one's retention, fsyncs or key would be the file's,
// silently); one with the same options shares the file.
func TestCache_SecondCacheOnADirWithOtherOptionsRefused(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, map[string]string{"a": "x"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	first, err := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true})(cp.RESTConfig(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	getInformer(t, ctx, first, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	defer first.RemoveInformer(ctx, &corev1.ConfigMap{})

	other, err := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Retention: &journal.Retention{MaxBytes: 1 << 20}})(cp.RESTConfig(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	var conflict *jcache.OptionsConflictError
	if !errors.Is(err, jcache.ErrOptionsConflict) || !errors.As(err, &conflict) || conflict.Option != "Retention" {
		t.Fatalf("a second cache on the directory with another Retention: GetInformer = %v; want an OptionsConflictError naming Retention", err)
	}

	same, err := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true})(cp.RESTConfig(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := same.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
		t.Fatalf("a second cache on the directory with the same options: GetInformer = %v", err)
	}
	_ = same.RemoveInformer(ctx, &corev1.ConfigMap{})
}

// Two members of one shard group in one process on one directory would
// share the group's ranged file of an Owners resource, whose name carries
// the group and not the member: the second would be served the first's
// range, never its own. Its informer is refused naming Shard.Member;
// each member needs its own directory, as each replica has.
func TestCache_SecondShardMemberOnADirRefused(t *testing.T) {
	cp, _, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	member := func(name string) crcache.Cache {
		t.Helper()
		c, err := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, NoSocket: true, Shard: &jcache.ShardOptions{
			Group: "shared", Member: name, Namespace: ns,
			Resources: []schema.GroupResource{{Resource: "configmaps"}},
			Owners:    []schema.GroupResource{{Resource: "configmaps"}},
		}})(cp.RESTConfig(), crcache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := member("a")
	if _, err := first.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	defer first.RemoveInformer(ctx, &corev1.ConfigMap{})

	_, err := member("b").GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	var conflict *jcache.OptionsConflictError
	if !errors.Is(err, jcache.ErrOptionsConflict) || !errors.As(err, &conflict) || conflict.Option != "Shard.Member" {
		t.Fatalf("a second member of the group on the directory: GetInformer = %v; want an OptionsConflictError naming Shard.Member", err)
	}
}
