// Command recordapiserver records list and watch responses of a real
// kube-apiserver into testdata/apiserver, for the decoder and diff tests
// of package reconcile (reconcile/recorded_test.go), which replay the
// committed bytes. UIDs, resourceVersions and times differ at every
// recording: record once, commit, and let the tests assert against the
// committed files' content.
//
// It starts its own etcd and kube-apiserver (internal/testing/controlplane, watch
// cache on as in a production apiserver; off for watch-gone.json), creates ConfigMaps labelled
// app=rec in namespace wj-rec (one named "kind", whose name collides with a
// JSON field; one with a non-ASCII annotation), and writes the bodies as
// the server sent them:
//
//	list-page1.json          GET configmaps?labelSelector=app=rec&limit=2 (has a continue token)
//	list-page2.json          the same with that continue token (the last page)
//	list-metadata-page1.json the first page again as a PartialObjectMetadataList
//	watch-events.json        a watch with sendInitialEvents and bookmarks: ADDED (initial),
//	                         BOOKMARK (initial-events-end), then ADDED c, MODIFIED a, DELETED b
//	list-after-watch.json    one unpaginated list after those changes
//	watch-gone.json          a watch from a resourceVersion etcd compacted away (watch
//	                         cache off): an ERROR frame with a 410 Status
//	watch-prevkv-nil.json    a watch from the compaction revision less one: an ERROR frame
//	                         with the "PrevKv=nil" 500 (when no other write came between)
//
// Each watch file is the stream's frames as sent, one JSON object a line.
//
//	go run ./internal/testing/recordapiserver [-dir testdata/apiserver]
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

const (
	ns       = "wj-rec"
	selector = "app=rec"
	// metaAccept is the Accept header of a metadata-only list, as
	// package reconcile sends it.
	metaAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	// maxFile is the most a recorded file may hold, in bytes.
	maxFile = 50 << 10
)

func main() {
	dir := flag.String("dir", "testdata/apiserver", "directory to write the recordings to")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "recordapiserver:", err)
		os.Exit(1)
	}
}

type recorder struct {
	dir  string
	kube kubernetes.Interface
}

// startRecorder starts a control plane (its watch cache on or off) in a
// temporary directory, creates namespace ns in it and returns a recorder
// into dir. stop, never nil and due whatever the error, stops what was
// started and removes the directory.
func startRecorder(ctx context.Context, dir string, watchCache bool) (r *recorder, cp *controlplane.ControlPlane, stop func(), err error) {
	tmp, err := os.MkdirTemp("", "wj-record-")
	if err != nil {
		return nil, nil, func() {}, err
	}
	stop = func() { os.RemoveAll(tmp) }
	cp, err = controlplane.Start(ctx, tmp, controlplane.Options{WatchCache: watchCache, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		return nil, nil, stop, err
	}
	stop = func() { cp.Stop(); os.RemoveAll(tmp) }
	r = &recorder{dir: dir, kube: kubernetes.NewForConfigOrDie(cp.RESTConfig())}
	_, err = r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return r, cp, stop, err
}

func run(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r, cp, stop, err := startRecorder(ctx, dir, true)
	defer stop()
	if err != nil {
		return err
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "rec"}, Annotations: map[string]string{"note": "ünïcode 日本"}}, Data: map[string]string{"v": "1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "rec"}}, Data: map[string]string{"v": "1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kind", Labels: map[string]string{"app": "rec"}}, Data: map[string]string{"kind": "Secret", "v": "1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}, Data: map[string]string{"v": "1"}},
	} {
		if _, err := r.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	// Lists.
	page1, err := r.get(ctx, url.Values{"labelSelector": {selector}, "limit": {"2"}}, "")
	if err != nil {
		return err
	}
	var p1 metav1.List
	if err := json.Unmarshal(page1, &p1); err != nil || p1.Continue == "" {
		return fmt.Errorf("page 1 has no continue token (%v): %s", err, page1)
	}
	page2, err := r.get(ctx, url.Values{"labelSelector": {selector}, "limit": {"2"}, "continue": {p1.Continue}}, "")
	if err != nil {
		return err
	}
	meta1, err := r.get(ctx, url.Values{"labelSelector": {selector}, "limit": {"2"}}, metaAccept)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"list-page1.json": page1, "list-page2.json": page2, "list-metadata-page1.json": meta1} {
		if err := r.write(name, b); err != nil {
			return err
		}
	}

	// A watch from the list's resourceVersion with its initial events and
	// the bookmark that ends them, then one change of each kind.
	q := url.Values{"labelSelector": {selector}, "watch": {"true"}, "allowWatchBookmarks": {"true"}, "sendInitialEvents": {"true"},
		"resourceVersionMatch": {"NotOlderThan"}, "resourceVersion": {p1.ResourceVersion}, "timeoutSeconds": {"60"}}
	frames, err := r.watch(ctx, q, 7, func(n int) error {
		if n != 4 { // 3 initial ADDED and the bookmark have come
			return nil
		}
		cms := r.kube.CoreV1().ConfigMaps(ns)
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app": "rec"}}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		a, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		a.Data["v"] = "2"
		if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			return err
		}
		return cms.Delete(ctx, "b", metav1.DeleteOptions{})
	})
	if err != nil {
		return err
	}
	if err := r.write("watch-events.json", frames); err != nil {
		return err
	}
	after, err := r.get(ctx, url.Values{"labelSelector": {selector}}, "")
	if err != nil {
		return err
	}
	if err := r.write("list-after-watch.json", after); err != nil {
		return err
	}

	cp.Stop()
	return recordGone(ctx, dir)
}

// recordGone records a watch from a resourceVersion that etcd compacted
// away. With the watch cache on, the apiserver serves such a watch from
// its cache window or from etcd; with it off (as the reconcile tests run
// it), the answer is deterministic: HTTP 200, then an ERROR frame with a
// 410 Status.
func recordGone(ctx context.Context, dir string) error {
	r, cp, stop, err := startRecorder(ctx, dir, false)
	defer stop()
	if err != nil {
		return err
	}
	cms := r.kube.CoreV1().ConfigMaps(ns)
	a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "rec"}}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created := a.ResourceVersion
	for _, v := range []string{"2", "3"} {
		a.Data["v"] = v
		if a, err = cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	rev, err := cp.Compact(ctx)
	if err != nil {
		return err
	}
	// From before the compaction revision less one: 410.
	q := url.Values{"labelSelector": {selector}, "watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {created}, "timeoutSeconds": {"60"}}
	gone, err := r.watch(ctx, q, 1, nil)
	if err != nil {
		return err
	}
	if err := r.write("watch-gone.json", gone); err != nil {
		return err
	}
	// From the compaction revision less one, when the last update is the
	// compaction revision: the event at that revision has no previous
	// value any more, and the apiserver answers the "PrevKv=nil" 500, which
	// it will answer forever for that resourceVersion.
	if strconv.FormatInt(rev, 10) != a.ResourceVersion {
		fmt.Fprintf(os.Stderr, "compacted at %d, not at the update's %s (other writes came between): watch-prevkv-nil.json not recorded\n", rev, a.ResourceVersion)
		return nil
	}
	q.Set("resourceVersion", strconv.FormatInt(rev-1, 10))
	prevKV, err := r.watch(ctx, q, 1, nil)
	if err != nil {
		return err
	}
	return r.write("watch-prevkv-nil.json", prevKV)
}

// request is a GET of the recorded resource with query q, accepting accept.
func (r *recorder) request(q url.Values, accept string) *rest.Request {
	req := r.kube.CoreV1().RESTClient().Get().Namespace(ns).Resource("configmaps").SetHeader("Accept", accept)
	for k, vs := range q {
		for _, v := range vs {
			req.Param(k, v)
		}
	}
	return req
}

// get lists the recorded resource with query q and returns the body as sent.
func (r *recorder) get(ctx context.Context, q url.Values, accept string) ([]byte, error) {
	return r.request(q, cmp.Or(accept, "application/json")).DoRaw(ctx)
}

// watch opens a watch with query q and returns its first n frames, one a
// line, as sent; after each frame it calls after (if not nil) with the
// number of frames read.
func (r *recorder) watch(ctx context.Context, q url.Values, n int, after func(int) error) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	body, err := r.request(q, "application/json").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", q.Encode(), err)
	}
	defer body.Close()
	var out bytes.Buffer
	dec := json.NewDecoder(body)
	for i := 1; i <= n; i++ {
		var frame json.RawMessage
		if err := dec.Decode(&frame); err != nil {
			return nil, fmt.Errorf("watch %s: frame %d: %w (so far: %s)", q.Encode(), i, err, out.Bytes())
		}
		out.Write(frame)
		out.WriteByte('\n')
		if after != nil {
			if err := after(i); err != nil {
				return nil, err
			}
		}
	}
	return out.Bytes(), nil
}

func (r *recorder) write(name string, b []byte) error {
	if len(b) > maxFile {
		return fmt.Errorf("%s: %d bytes, more than %d", name, len(b), maxFile)
	}
	p := filepath.Join(r.dir, name)
	fmt.Printf("%s: %d bytes\n", p, len(b))
	return os.WriteFile(p, b, 0o644)
}
