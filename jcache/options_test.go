package jcache_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
)

// TestNew_RefusesWhatDiskCannotMean: options that cannot mean the same on
// disk are errors from New, not ignored.
func TestNew_RefusesWhatDiskCannotMean(t *testing.T) {
	off := false
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for name, opts := range map[string]crcache.Options{
		"NewInformer": {NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			return nil
		}},
		"DefaultEnableWatchBookmarks=false":   {DefaultEnableWatchBookmarks: &off},
		"ByObject EnableWatchBookmarks=false": {ByObject: map[client.Object]crcache.ByObject{&corev1.Pod{}: {EnableWatchBookmarks: &off}}},
	} {
		if _, err := jcache.NewFunc(jcache.Options{Dir: t.TempDir()})(cfg, opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
