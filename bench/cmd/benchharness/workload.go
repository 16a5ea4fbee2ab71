package main

// The workloads, real shapes: besides the 1 KiB
// ConfigMaps of parent.go, the objects operators really watch, each with
// its churn (workloadByName; workloadSection's notes describe them). Every
// object carries workloadLabel=<workload>, which every subject selects. A
// workload runs workloadSubjects at each N as parent.go and cache.go run
// theirs; then its objects are deleted in etcd and etcd is compacted and
// defragmented (cleanupWorkload), so that the next workload starts from a
// small etcd (200,000 Pods are over 1 GB in etcd; its quota is 4 GiB) and
// the apiserver's restarts, which refill its watch cache, do not reload the
// previous workloads' objects.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/prometheus/procfs"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// Workload names. wlConfigMaps is the run of parent.go (its subjects, the
// readers and the cache subjects); the others are this file's.
const (
	wlConfigMaps = "configmaps"
	wlPods       = "pods"
	wlCRs        = "crs"
	wlSecrets    = "secrets"
)

var allWorkloads = []string{wlConfigMaps, wlPods, wlCRs, wlSecrets}

// workloadSubjects are the subjects a workload other than configmaps runs
// (those of them that -subjects names), in this order.
var workloadSubjects = []string{subjWatchjournal, subjInformer, subjWatchList, subjCRCache, subjJCache}

// workloadLabel marks every object of a workload; its value is the
// workload's name.
const workloadLabel = "bench.watchjournal.io/workload"

// secretNamespaces is how many namespaces the Secrets spread over.
const secretNamespaces = 100

var widgets = schema.GroupVersionResource{Group: "bench.watchjournal.io", Version: "v1", Resource: "widgets"}

// workload describes one kind of objects: where they live, how they are
// made and how they churn.
type workload struct {
	name string
	gvr  schema.GroupVersionResource
	// ns is the namespace the subjects watch; "" for all namespaces.
	ns string
	// sealed: watchjournal and jcache store the objects sealed (benchKey).
	sealed bool
	// nsOf is the namespace of object i.
	nsOf func(i int) string
	// object returns object i.
	object func(i int) *unstructured.Unstructured
	// churn returns the merge patch of update gen of object i and the
	// subresource it goes to ("" for the object).
	churn func(i, gen int) (subresource string, patch []byte)
}

// selector is the label selector of the workload's objects.
func (w *workload) selector() string { return workloadLabel + "=" + w.name }

// listPath is the URL path of the workload's collection in namespace ns
// ("" for all namespaces).
func listPath(gvr schema.GroupVersionResource, ns string) string {
	p := "/api/" + gvr.Version
	if gvr.Group != "" {
		p = "/apis/" + gvr.Group + "/" + gvr.Version
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + gvr.Resource
}

// workloadByName returns the workload of that name (not configmaps).
func workloadByName(name string) (*workload, error) {
	switch name {
	case wlPods:
		return &workload{name: name, gvr: corev1.SchemeGroupVersion.WithResource("pods"), ns: "bench-pods",
			nsOf: func(int) string { return "bench-pods" }, object: podObject, churn: podStatus}, nil
	case wlCRs:
		return &workload{name: name, gvr: widgets, ns: "bench-widgets",
			nsOf: func(int) string { return "bench-widgets" }, object: widgetObject, churn: widgetStatus}, nil
	case wlSecrets:
		return &workload{name: name, gvr: corev1.SchemeGroupVersion.WithResource("secrets"), ns: "", sealed: true,
			nsOf: secretNS, object: secretObject, churn: secretChurn}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", name)
}

// benchKey is the one key that seals the Secrets workload's objects in
// watchjournal's and jcache's files: 32 bytes derived from a fixed string
// (a benchmark, not a secret).
func benchKey() []byte { k := sha256.Sum256([]byte("watchjournal benchharness seal key")); return k[:] }

// objectMeta is the metadata of object i of workload w in namespace ns:
// the workload and group labels (cache.go's field index), two more, and
// extra's fields.
func objectMeta(w, ns string, i int, extra map[string]any) map[string]any {
	labels := map[string]any{workloadLabel: w, groupLabel: group(i), "app.kubernetes.io/name": fmt.Sprintf("app-%03d", i%200), "app.kubernetes.io/instance": fmt.Sprintf("inst-%05d", i/10)}
	m := map[string]any{"name": name(i), "namespace": ns, "labels": labels}
	maps.Copy(m, extra)
	return m
}

// filler is s repeated to n bytes.
func filler(s string, n int) string { return strings.Repeat(s, n/len(s)+1)[:n] }

// podContainers is how many containers a Pod has: an application and a
// sidecar.
const podContainers = 2

// podObject is Pod i: two containers, env and annotations of a size by i,
// so that the Pods are about 5 to 8 KiB as served with their status and
// managedFields.
func podObject(i int) *unstructured.Unstructured {
	const ns = "bench-pods"
	var containers []any
	for c := range podContainers {
		var env []any
		for e := range 1 + i%3 {
			env = append(env, map[string]any{"name": fmt.Sprintf("SETTING_%02d", e), "value": fmt.Sprintf("value-%d-%d-%s", c, e, filler("abcdefgh", 24))})
		}
		ctr := map[string]any{
			"name":      fmt.Sprintf("c%d", c),
			"image":     fmt.Sprintf("registry.example.com/team/service-%d:v1.%d.%d", c, i%50, i%7),
			"args":      []any{fmt.Sprintf("--shard=%d", i%16), "--config=/etc/config/config.yaml"},
			"env":       env,
			"ports":     []any{map[string]any{"name": fmt.Sprintf("http-%d", c), "containerPort": int64(8080 + c), "protocol": "TCP"}},
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}},
		}
		if c == 0 {
			ctr["volumeMounts"] = []any{map[string]any{"name": "config", "mountPath": "/etc/config", "readOnly": true}}
		}
		containers = append(containers, ctr)
	}
	annotations := map[string]any{
		"prometheus.io/scrape":             "true",
		"bench.watchjournal.io/config-sum": filler("0123456789abcdef", 64),
		"bench.watchjournal.io/notes":      filler("notes on this pod ", 1+300*(i%4)),
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": objectMeta(wlPods, ns, i, map[string]any{"annotations": annotations}),
		"spec": map[string]any{
			"nodeName":                     fmt.Sprintf("node-%03d", i%100),
			"automountServiceAccountToken": false,
			"containers":                   containers,
			"volumes":                      []any{map[string]any{"name": "config", "configMap": map[string]any{"name": fmt.Sprintf("config-%03d", i%200)}}},
		},
	}}
}

// podStatus is what a kubelet writes for Pod i at update gen: phase,
// conditions and one status per container.
func podStatus(i, gen int) (string, []byte) {
	t := time.Unix(1_800_000_000+int64(gen), 0).UTC().Format(time.RFC3339)
	ready := gen%2 == 0
	var cs []any
	for c := range podContainers {
		cs = append(cs, map[string]any{
			"name": fmt.Sprintf("c%d", c), "ready": ready, "restartCount": int64(0),
			"image":   fmt.Sprintf("registry.example.com/team/service-%d:v1.%d.%d", c, i%50, i%7),
			"imageID": "registry.example.com/team/service@sha256:" + filler("0123456789abcdef", 64),
			"state":   map[string]any{"running": map[string]any{"startedAt": t}},
		})
	}
	status := fmt.Sprint(ready)
	cond := func(typ, st string) map[string]any {
		return map[string]any{"type": typ, "status": st, "lastTransitionTime": t}
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{
		"phase": "Running", "hostIP": "10.0.0.1", "podIP": fmt.Sprintf("10.%d.%d.%d", 1+i/65536%200, i/256%256, i%256),
		"startTime":         t,
		"conditions":        []any{cond("PodScheduled", "True"), cond("Initialized", "True"), cond("ContainersReady", capital(status)), cond("Ready", capital(status))},
		"containerStatuses": cs,
	}})
	return "status", b
}

// capital is s with its first letter upper-cased ("true" → "True").
func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// widgetObject is custom resource i, about 2 KiB as served.
func widgetObject(i int) *unstructured.Unstructured {
	const ns = "bench-widgets"
	var rules []any
	for r := range 4 {
		rules = append(rules, map[string]any{"host": fmt.Sprintf("svc-%d.example.com", r), "path": fmt.Sprintf("/api/v%d", r), "weight": int64(25), "timeoutSeconds": int64(30)})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgets.Group + "/" + widgets.Version, "kind": "Widget",
		"metadata": objectMeta(wlCRs, ns, i, nil),
		"spec": map[string]any{
			"replicas": int64(1 + i%5), "image": fmt.Sprintf("registry.example.com/widgets/widget:v2.%d", i%30),
			"rules":  rules,
			"config": map[string]any{"mode": "active", "window": "5m", "tags": []any{"a", "b", "c"}, "description": filler("a widget of the benchmark ", 300)},
		},
	}}
}

// widgetStatus is a controller's status write for widget i at update gen.
func widgetStatus(i, gen int) (string, []byte) {
	t := time.Unix(1_800_000_000+int64(gen), 0).UTC().Format(time.RFC3339)
	b, _ := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration": int64(gen), "readyReplicas": int64(1 + i%5),
		"conditions": []any{map[string]any{"type": "Ready", "status": capital(fmt.Sprint(gen%2 == 0)), "lastTransitionTime": t, "reason": "Reconciled", "message": "widget reconciled"}},
	}})
	return "status", b
}

// secretNS is the namespace of Secret i.
func secretNS(i int) string { return fmt.Sprintf("bench-secrets-%02d", i%secretNamespaces) }

// secretObject is Secret i, about 1.4 KiB as served.
func secretObject(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": objectMeta(wlSecrets, secretNS(i), i, nil),
		"stringData": map[string]any{
			"username": fmt.Sprintf("user-%06d", i),
			"password": filler(fmt.Sprintf("p%06d", i), 32),
			"tls.key":  filler("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 400),
		},
	}}
}

// secretChurn is update gen of Secret i: a new password.
func secretChurn(i, gen int) (string, []byte) {
	return "", []byte(fmt.Sprintf(`{"stringData":{"password":%q}}`, filler(fmt.Sprintf("g%d-%06d", gen, i), 32)))
}

// widgetCRD is the CRD of widgets.
func widgetCRD() *unstructured.Unstructured {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": widgets.Resource + "." + widgets.Group},
		"spec": map[string]any{
			"group": widgets.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": widgets.Resource, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": widgets.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": open, "status": open}}},
			}},
		},
	}}
}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// namespaces returns the namespaces of the workload's objects.
func (w *workload) namespaces() []string {
	var nss []string
	for i := range secretNamespaces {
		if ns := w.nsOf(i); !slices.Contains(nss, ns) {
			nss = append(nss, ns)
		}
	}
	return nss
}

// waitServed waits until the apiserver serves lists of resource gvr in
// namespace ns ("" for all namespaces), polling every 100 ms for at most
// timeout: a CRD's resource some time after it is established, and every
// resource after an apiserver restart.
func (p *parent) waitServed(ctx context.Context, gvr schema.GroupVersionResource, ns string, timeout time.Duration) error {
	var err error
	if wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err = p.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}) != nil {
		return fmt.Errorf("%s not served: %w", gvr.Resource, err)
	}
	return nil
}

// churnOne writes update gen of object i.
func (p *parent) churnOne(ctx context.Context, w *workload, i, gen int) error {
	sub, patch := w.churn(i, gen)
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	return retry(ctx, func() error {
		_, err := p.dyn.Resource(w.gvr).Namespace(w.nsOf(i)).Patch(ctx, name(i), types.MergePatchType, patch, metav1.PatchOptions{}, subs...)
		return err
	})
}

// servedBytes sums the sizes of the workload's objects as served: each
// item's JSON in the pages (500 a page) of a list of the selector.
func (p *parent) servedBytes(ctx context.Context, w *workload) (sv served, err error) {
	rc := p.kube.CoreV1().RESTClient()
	cont := ""
	for {
		req := rc.Get().AbsPath(listPath(w.gvr, w.ns)).Param("limit", "500").Param("labelSelector", w.selector()).SetHeader("Accept", "application/json")
		if cont != "" {
			req = req.Param("continue", cont)
		}
		b, err := req.DoRaw(ctx)
		if err != nil {
			return sv, err
		}
		var page struct {
			Metadata metav1.ListMeta   `json:"metadata"`
			Items    []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return sv, err
		}
		for _, it := range page.Items {
			if sv.Objects == 0 || len(it) < sv.Min {
				sv.Min = len(it)
			}
			sv.Max = max(sv.Max, len(it))
			sv.Objects++
			sv.Bytes += int64(len(it))
		}
		if cont = page.Metadata.Continue; cont == "" {
			return sv, nil
		}
	}
}

// cleanupWorkload deletes the workload's objects, then compacts and
// defragments etcd, and logs its size before and after. It deletes them
// in etcd, by key prefix (the apiserver's default --etcd-prefix /registry,
// <resource>/<namespace>/ or <group>/<resource>/<namespace>/): the
// apiserver's own DeleteCollection is far slower at these N, and bound
// Pods would need a grace period of 0.
// The apiserver's watch cache sees the deletes through its etcd watch; no
// subject runs at that point.
func (p *parent) cleanupWorkload(ctx context.Context, w *workload) {
	before, _ := p.etcdDBSize(ctx)
	prefix := "/registry/" + w.gvr.Resource + "/"
	if w.gvr.Group != "" {
		prefix = "/registry/" + w.gvr.Group + "/" + w.gvr.Resource + "/"
	}
	deleted := 0
	for _, ns := range w.namespaces() {
		k, err := p.etcdDeletePrefix(ctx, prefix+ns+"/")
		if err != nil {
			logf("%s: deleting the objects of %s in etcd: %v", w.name, ns, err)
		}
		deleted += k
	}
	p.wlCreated = 0
	logf("%s: %d objects deleted in etcd; etcd's database %s", w.name, deleted, mib(uint64(before)))
	p.compactDefrag(ctx, w.name+": after")
}

// compactDefrag compacts etcd at its current revision and defragments it,
// and logs its database's size before and after.
func (p *parent) compactDefrag(ctx context.Context, what string) {
	before, _ := p.etcdDBSize(ctx)
	if _, err := p.cp.Compact(ctx); err != nil {
		logf("%s: compacting etcd: %v", what, err)
	}
	if err := etcdCall(ctx, p.cp, "/v3/maintenance/defragment", []byte("{}"), nil); err != nil {
		logf("%s: defragmenting etcd: %v", what, err)
	}
	after, _ := p.etcdDBSize(ctx)
	logf("%s: etcd's database %s, %s after compaction and defragmentation", what, mib(uint64(before)), mib(uint64(after)))
}

// etcdDeletePrefix deletes every key under prefix (the gRPC gateway's
// /v3/kv/deleterange) and returns how many.
func (p *parent) etcdDeletePrefix(ctx context.Context, prefix string) (int, error) {
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]string{
		"key": base64.StdEncoding.EncodeToString([]byte(prefix)), "range_end": base64.StdEncoding.EncodeToString(end),
	})
	var out struct {
		Deleted string `json:"deleted"` // int64 as a JSON string
	}
	if err := etcdCall(ctx, p.cp, "/v3/kv/deleterange", body, &out); err != nil {
		return 0, err
	}
	n, _ := strconv.Atoi(out.Deleted)
	return n, nil
}

// etcdDBSize returns the size of etcd's database file.
func (p *parent) etcdDBSize(ctx context.Context) (int64, error) {
	var st struct {
		DBSize string `json:"dbSize"` // int64 as a JSON string (grpc-gateway)
	}
	if err := etcdCall(ctx, p.cp, "/v3/maintenance/status", []byte("{}"), &st); err != nil {
		return 0, err
	}
	var n int64
	_, err := fmt.Sscan(st.DBSize, &n)
	return n, err
}

// etcdCall posts body to etcd's HTTP endpoint at path (nil: a GET), within
// 5 minutes, and decodes the answer into out (nil: none).
func etcdCall(ctx context.Context, cp *controlplane.ControlPlane, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	method := http.MethodPost
	if body == nil {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, cp.EtcdURL()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// workloadResult is what the parent knows of one workload's run: the
// creations and, at each N, the objects' size as served.
type workloadResult struct {
	Name      string     `json:"name"`
	Creations []creation `json:"creations"`
	Served    []served   `json:"served"`
}

// served is the size of a workload's objects as served at one N, after
// the subjects' bursts (so with the status the churn wrote on the first
// burst-size objects): their number, the sum of their sizes, the smallest
// and the largest.
type served struct {
	N       int   `json:"n"`
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	Min     int   `json:"min,omitempty"`
	Max     int   `json:"max,omitempty"`
}

// runWorkload runs workload w at every N: its objects created, its
// subjects each in a child (parent.subject: sync, burst of churn, forced
// relists, a restart with nothing changed), the objects' size as served;
// then it deletes them.
func (p *parent) runWorkload(ctx context.Context, w *workload, res *results) error {
	subjects := slices.DeleteFunc(slices.Clone(workloadSubjects), func(s string) bool { return !slices.Contains(p.o.subjects, s) })
	if len(subjects) == 0 {
		return nil
	}
	p.wl = w
	defer func() { p.wl = nil }()
	// What the runs before left in etcd's history goes first: the
	// ConfigMaps' bursts and relists at 200,000, then this workload's
	// objects, must fit etcd's quota (4 GiB).
	p.compactDefrag(ctx, w.name+": before")
	// What the objects need: the namespaces and, for crs, the CRD,
	// established and served.
	if err := p.createNamespaces(ctx, w.namespaces()...); err != nil {
		return err
	}
	if w.gvr == widgets {
		_, err := p.dyn.Resource(crds).Create(ctx, widgetCRD(), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the CRD: %w", err)
		}
		if err := p.waitServed(ctx, w.gvr, w.ns, time.Minute); err != nil {
			return err
		}
	}
	defer p.cleanupWorkload(ctx, w)
	wr := workloadResult{Name: w.name}
	defer func() { res.workloads = append(res.workloads, wr) }()
	for _, n := range p.o.ns {
		c, err := p.createRange(ctx, w.name, &p.wlCreated, n, func(ctx context.Context, i int) error {
			_, err := p.dyn.Resource(w.gvr).Namespace(w.nsOf(i)).Create(ctx, w.object(i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		wr.Creations = append(wr.Creations, c)
		for _, s := range subjects {
			if isCache(s) {
				res.wlCaches = append(res.wlCaches, p.runCacheSubject(ctx, n, s))
			} else {
				res.wlRows = append(res.wlRows, p.runSubject(ctx, n, s))
			}
		}
		sv, err := p.servedBytes(ctx, w)
		if err != nil {
			logf("%s N=%d: the objects' size as served: %v", w.name, n, err)
		} else {
			logf("%s N=%d: %d objects, %s as served (%.0f B an object, %d to %d)", w.name, n, sv.Objects, mib(uint64(sv.Bytes)),
				float64(sv.Bytes)/float64(max(1, sv.Objects)), sv.Min, sv.Max)
		}
		sv.N = n
		wr.Served = append(wr.Served, sv)
	}
	return nil
}

// diskCost is watchjournal's disk cost over a burst of churn, as its child
// measured it (and the parent's burst time).
type diskCost struct {
	// Events is the burst's updates; Commits the journal commits the loop
	// made meanwhile (reconcile.Status.CommitLatency.Count; bbolt fsyncs
	// the file twice a commit: the pages, then the meta page).
	Events  int64  `json:"events"`
	Commits uint64 `json:"commits"`
	// WriteBytes is the child's /proc/self/io write_bytes over the burst
	// (bytes it sent to the storage layer: the journal's pages), WChar its
	// wchar (every byte written through write-like system calls).
	WriteBytes int64 `json:"writeBytes"`
	WChar      int64 `json:"wchar"`
	// FileSize is the journal file's size after the burst (default
	// retention), JournalBytes the retained events as stored, Objects the
	// index's keys (journal.Stats).
	FileSize     int64  `json:"fileSize"`
	JournalBytes uint64 `json:"journalBytes"`
	Objects      uint64 `json:"objects"`
	// Allocated is the file's allocated blocks in bytes (st_blocks × 512):
	// bbolt grows the file by truncating it to twice its size (up to
	// 1 GiB steps), sparse until written, so at small N FileSize is
	// mostly growth not yet used.
	Allocated int64 `json:"allocated"`
	// BurstSeconds is from the parent's first write of the burst until
	// the child saw the last (set by the parent).
	BurstSeconds float64 `json:"burstSeconds,omitempty"`
}

// diskNow returns a subject's disk counters now; false for subjects
// without a journal.
func diskNow(sub subject) (diskCost, bool) {
	s, ok := sub.(*wjSubject)
	if !ok {
		return diskCost{}, false
	}
	var d diskCost
	d.Commits = s.loop.Status().CommitLatency.Count
	if p, err := procfs.Self(); err == nil { // zero when unreadable
		if io, err := p.IO(); err == nil {
			d.WriteBytes, d.WChar = int64(io.WriteBytes), int64(io.WChar)
		}
	}
	if st, err := s.j.Stats(); err == nil {
		d.FileSize, d.JournalBytes, d.Objects = st.FileSize, st.JournalBytes, st.Objects
	}
	if fi, err := os.Stat(s.j.Path()); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			d.Allocated = st.Blocks * 512
		}
	}
	return d, true
}

// childWorkload is a child's workload (envWorkload); nil for the
// ConfigMaps.
func childWorkload() *workload {
	name := os.Getenv(envWorkload)
	if name == "" {
		return nil
	}
	w, err := workloadByName(name)
	if err != nil {
		return nil
	}
	return w
}
