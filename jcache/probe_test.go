package jcache

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// TestParseResourceURL_PathWords: namespaces and resources named like
// the words of a request path (api, apis, namespaces, watch) are read as
// the segments they are in, with and without a host path before them.
func TestParseResourceURL_PathWords(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, prefix := range []string{"", "/", "/k8s/clusters/api", "/apis/api/"} {
		p := prefix
		if len(p) > 0 && p[len(p)-1] == '/' {
			p = p[:len(p)-1]
		}
		for _, tc := range []struct {
			path string
			want journal.Resource
		}{
			{"/api/v1/configmaps", journal.Resource{GVR: cm}},
			{"/api/v1/namespaces", journal.Resource{GVR: cm.GroupVersion().WithResource("namespaces")}},
			{"/api/v1/namespaces/api/configmaps", journal.Resource{GVR: cm, Namespace: "api"}},
			{"/api/v1/namespaces/apis/configmaps", journal.Resource{GVR: cm, Namespace: "apis"}},
			{"/api/v1/namespaces/watch/configmaps", journal.Resource{GVR: cm, Namespace: "watch"}},
			{"/api/v1/namespaces/namespaces/configmaps", journal.Resource{GVR: cm, Namespace: "namespaces"}},
			{"/apis/apps/v1/namespaces/api/deployments", journal.Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "api"}},
			{"/apis/api/v1/namespaces/apis/api", journal.Resource{GVR: schema.GroupVersionResource{Group: "api", Version: "v1", Resource: "api"}, Namespace: "apis"}},
			{"/apis/watch/v1/watch", journal.Resource{GVR: schema.GroupVersionResource{Group: "watch", Version: "v1", Resource: "watch"}}},
		} {
			u := &url.URL{Path: p + tc.path, RawQuery: "labelSelector=a%3Db&fieldSelector=metadata.name%3Dx"}
			tc.want.LabelSelector, tc.want.FieldSelector = "a=b", "metadata.name=x"
			got, err := parseResourceURL(prefix, u)
			if err != nil || got != tc.want {
				t.Errorf("parseResourceURL(%q, %q) = %+v, %v; want %+v", prefix, u.Path, got, err, tc.want)
			}
		}
	}
	for _, path := range []string{"/x/api/v1/configmaps", "/api/v1", "/api/v1/namespaces/a/configmaps/b", "/apis/v1/configmaps", "/api/v1/namespaces//configmaps", "/api//configmaps"} {
		if got, err := parseResourceURL("", &url.URL{Path: path}); err == nil {
			t.Errorf("parseResourceURL(%q) = %+v; want an error", path, got)
		}
	}
}
