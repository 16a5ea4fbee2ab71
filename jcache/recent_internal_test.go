package jcache

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestRecent_Bounded: the recent objects stay within recentMax objects
// and recentMaxBytes, dropping the oldest; an object of other bytes, or
// too large to keep, is not returned.
func TestRecent_Bounded(t *testing.T) {
	var r recentObjects
	keep := func(runtime.Object) bool { return true }
	obj := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	for i := range 3 * recentMax {
		k := fmt.Sprint("k", i%(2*recentMax))
		r.put(k, []byte(k+"!"), obj(k))
	}
	if len(r.m) > recentMax || len(r.order) > 2*recentMax {
		t.Errorf("%d objects and %d puts kept; want at most %d and %d", len(r.m), len(r.order), recentMax, 2*recentMax)
	}
	last := fmt.Sprint("k", (3*recentMax-1)%(2*recentMax))
	if o := r.get(last, []byte(last+"!"), keep); o == nil || o.(*corev1.ConfigMap).Name != last {
		t.Errorf("get of the last put = %v", o)
	}
	if o := r.get(last, []byte(last+"?"), keep); o != nil {
		t.Errorf("get with other bytes = %v; want nil", o)
	}
	dropped := fmt.Sprint("k", 2*recentMax-1) // recentMax puts of other keys since
	if o := r.get(dropped, []byte(dropped+"!"), keep); o != nil {
		t.Errorf("get of a dropped key = %v; want nil", o)
	}

	var big recentObjects
	mib := bytes.Repeat([]byte("x"), 1<<20)
	for i := range 20 {
		big.put(fmt.Sprint(i), append([]byte(fmt.Sprint(i)), mib...), obj("big"))
	}
	if big.bytes > recentMaxBytes {
		t.Errorf("%d bytes kept; want at most %d", big.bytes, recentMaxBytes)
	}
	huge := bytes.Repeat([]byte("x"), recentMaxBytes/4+1)
	big.put("huge", huge, obj("huge"))
	if o := big.get("huge", huge, keep); o != nil {
		t.Errorf("an object over a quarter of the bound was kept")
	}
}
