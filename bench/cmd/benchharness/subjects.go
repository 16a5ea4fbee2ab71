package main

// The subjects: what each child process runs against the apiserver.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/internal/clientrate"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Subject names, in the order the harness runs them; the notes under the
// ConfigMaps' table (results.write, "Subjects") describe each.
const (
	subjWatchjournal      = "watchjournal"
	subjWatchjournalPaged = "watchjournal-paged" // reconcile.ListModePaginated
	subjInformer          = "informer"
	subjInformerNoGzip    = "informer-nogzip" // rest.Config.DisableCompression
	subjMetadata          = "metadata-informer"
	subjTransform         = "transform-informer"
	subjList              = "bare-list"
	subjWatchList         = "bare-watch-list"
	subjWatchListMeta     = "bare-watch-list-meta" // PartialObjectMetadata
)

var allSubjects = []string{subjWatchjournal, subjWatchjournalPaged, subjInformer, subjInformerNoGzip, subjMetadata, subjTransform, subjList, subjWatchList, subjWatchListMeta, subjJournalctl, subjCRCache, subjJCache, subjJCacheExact, subjJCacheTransform, subjJCacheSharded}

// bare reports whether a subject is a bare list, which keeps nothing and
// sees no updates.
func bare(subject string) bool {
	return subject == subjList || subject == subjWatchList || subject == subjWatchListMeta
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// collection is the path suffix of the watched collection, which requests
// counts: the ConfigMaps, or a child's workload's resource (childConfig).
var collection = "/configmaps"

// subject is one way of keeping up with the ConfigMaps of a namespace.
type subject interface {
	// sync starts the subject and returns once it holds all n objects.
	sync(ctx context.Context) error
	// updates returns how many updates (a changed resourceVersion) the
	// subject has seen; waitUpdates blocks until it has seen target.
	updates() int64
	waitUpdates(ctx context.Context, target int64) error
	// armRelist records where the subject is before a forced relist;
	// waitRelist blocks until that relist is complete and returns when it
	// began (the last list request started after armRelist) and ended.
	armRelist()
	waitRelist(ctx context.Context) (relistInfo, error)
	// counts returns the subject's client's requests.
	counts() *requests
	close()
}

// background is a goroutine that runs until stopped: a subject's loop or
// informer.
type background struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run in a goroutine with a context that stop cancels.
func (b *background) start(run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go func() { defer close(b.done); run(ctx) }()
}

// stop cancels the goroutine, if started, and waits for it to return.
func (b *background) stop() {
	if b.cancel != nil {
		b.cancel()
		<-b.done
	}
}

// relistInfo describes one relist.
type relistInfo struct {
	Start time.Time // the last list (or watch-list) request started after armRelist
	End   time.Time
	// Gone is how many 410s watchjournal saw; -1 for other subjects.
	Gone int64
	// Note is anything else worth reporting.
	Note string
}

// requests counts the requests of one client, by wrapping its transport:
// all of them and the response body bytes read (restartchild.go), and of
// the collection's, list pages, complete lists (first pages), watches and
// watch-lists (watches with sendInitialEvents=true, client-go's streaming
// list, on by default since v1.35).
type requests struct {
	next http.RoundTripper

	all, bytes                        atomic.Int64
	pages, lists, watches, watchLists atomic.Int64
	armed                             atomic.Bool
	listStart                         atomic.Int64 // Unix ns of the last list start after arm
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	r.all.Add(1)
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, collection) {
		q := req.URL.Query()
		startsList := false
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			r.watches.Add(1)
			if q.Get("sendInitialEvents") == "true" {
				r.watchLists.Add(1)
				startsList = true
			}
		default:
			r.pages.Add(1)
			if q.Get("continue") == "" {
				r.lists.Add(1)
				startsList = true
			}
		}
		if startsList && r.armed.Load() {
			// The last start wins: attempts that failed while the proxy
			// was cut do not count.
			r.listStart.Store(time.Now().UnixNano())
		}
	}
	resp, err := r.next.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &r.bytes}
	}
	return resp, err
}

// countingBody adds the bytes read to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (r *requests) arm() {
	r.listStart.Store(0)
	r.armed.Store(true)
}

func (r *requests) started() time.Time {
	if ns := r.listStart.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// counted returns a copy of cfg whose transport counts into a new requests.
func counted(cfg *rest.Config) (*rest.Config, *requests) {
	c := rest.CopyConfig(cfg)
	r := &requests{}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.next = rt; return r })
	return c, r
}

// ---------------------------------------------------------------------------
// watchjournal.

type wjSubject struct {
	n    int
	j    *journal.Journal
	loop *reconcile.Loop
	reqs *requests
	background

	headBase  uint64 // the journal's head at armRelist (restart.go checks what the relist journaled)
	listsBase int
	goneBase  int
}

func newWatchjournal(kind string, cfg *rest.Config, ns, dir string, n int) (*wjSubject, error) {
	res := journal.Resource{GVR: configMaps, Namespace: ns}
	jopts := journal.Options{Resource: &res}
	var opts reconcile.Options
	if w := childWorkload(); w != nil {
		res = journal.Resource{GVR: w.gvr, Namespace: w.ns, LabelSelector: w.selector()}
		if w.sealed { // Secrets: sealed with a key, as an operator keeping their data must
			kr, err := journal.NewKeyring(benchKey())
			if err != nil {
				return nil, err
			}
			jopts.Keyring, opts.SecretPayloads = kr, true
		}
	}
	j, err := journal.Open(filepath.Join(dir, "journal.db"), &jopts)
	if err != nil {
		return nil, err
	}
	// The journal runs with journalctl watch's client-side rate limit, not
	// the harness's QPS 1000, so that its numbers are what a CLI user gets.
	cfg, reqs := counted(cfg)
	clientrate.Apply(cfg, clientrate.QPS, clientrate.Burst)
	if kind == subjWatchjournalPaged {
		opts.ListMode = reconcile.ListModePaginated
	}
	loop, err := reconcile.New(cfg, j, opts)
	if err != nil {
		_ = j.Close()
		return nil, err
	}
	return &wjSubject{n: n, j: j, loop: loop, reqs: reqs}, nil
}

// run starts the loop.
func (s *wjSubject) run() { s.start(func(ctx context.Context) { _ = s.loop.Run(ctx) }) }

func (s *wjSubject) sync(ctx context.Context) error {
	s.run()
	if err := s.loop.WaitFor(ctx, func(st reconcile.Status) bool { return st.Lists >= 1 }); err != nil {
		return fmt.Errorf("watchjournal: waiting for the initial list: %w (status %+v)", err, s.loop.Status())
	}
	st, err := s.j.Stats()
	if err != nil {
		return err
	}
	if st.Objects != uint64(s.n) {
		return fmt.Errorf("watchjournal: index holds %d objects after the initial list; want %d", st.Objects, s.n)
	}
	return nil
}

func (s *wjSubject) updates() int64 { return int64(s.loop.Status().Events) }

func (s *wjSubject) waitUpdates(ctx context.Context, target int64) error {
	return s.loop.WaitFor(ctx, func(st reconcile.Status) bool { return int64(st.Events) >= target })
}

func (s *wjSubject) armRelist() {
	st := s.loop.Status()
	s.listsBase, s.goneBase = st.Lists, st.Gone
	s.headBase, _ = s.j.Head()
	s.reqs.arm()
}

func (s *wjSubject) waitRelist(ctx context.Context) (relistInfo, error) {
	err := s.loop.WaitFor(ctx, func(st reconcile.Status) bool { return st.Lists > s.listsBase })
	end := time.Now()
	st := s.loop.Status()
	if err != nil {
		return relistInfo{}, fmt.Errorf("watchjournal: waiting for the relist: %w (status %+v)", err, st)
	}
	return relistInfo{Start: s.reqs.started(), End: end, Gone: int64(st.Gone - s.goneBase), Note: s.relistCheck()}, nil
}

func (s *wjSubject) counts() *requests { return s.reqs }

func (s *wjSubject) close() {
	s.stop()
	_ = s.j.Close()
}

// ---------------------------------------------------------------------------
// client-go informers.

// counts are an informer's handler notifications, with a channel closed and
// replaced on every change so that waiters need not poll.
type counts struct {
	mu                              sync.Mutex
	changed                         chan struct{}
	adds, updates, resyncs, deletes int64
}

func newCounts() *counts { return &counts{changed: make(chan struct{})} }

func (c *counts) bump(f func(*counts)) {
	c.mu.Lock()
	f(c)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *counts) get() (adds, updates, resyncs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adds, c.updates, c.resyncs
}

func (c *counts) waitFor(ctx context.Context, cond func(*counts) bool) error {
	for {
		c.mu.Lock()
		ok, ch := cond(c), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func resourceVersion(obj any) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetResourceVersion()
	}
	return ""
}

// handler counts adds, updates with a new resourceVersion, and updates
// with the same one (a relist's Replace delivers every object again).
func (c *counts) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.bump(func(c *counts) { c.adds++ }) },
		UpdateFunc: func(old, new any) {
			if resourceVersion(old) == resourceVersion(new) {
				c.bump(func(c *counts) { c.resyncs++ })
			} else {
				c.bump(func(c *counts) { c.updates++ })
			}
		},
		DeleteFunc: func(any) { c.bump(func(c *counts) { c.deletes++ }) },
	}
}

type informerSubject struct {
	n    int
	inf  cache.SharedIndexInformer
	c    *counts
	reqs *requests
	background
	resyncsBase int64
}

// stripToMeta is the transform subject's cache.TransformFunc: it keeps only
// name, namespace, UID and resourceVersion of a ConfigMap.
func stripToMeta(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown: keep as is
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: strings.Clone(cm.Name), Namespace: strings.Clone(cm.Namespace),
		UID: cm.UID, ResourceVersion: strings.Clone(cm.ResourceVersion),
	}}, nil
}

func newInformer(kind string, cfg *rest.Config, ns string, n int) (*informerSubject, error) {
	cfg, reqs := counted(cfg)
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	// The ConfigMaps, or a workload's objects by its label.
	gvr := configMaps
	var tweak func(*metav1.ListOptions)
	if w := childWorkload(); w != nil {
		if kind != subjInformer {
			return nil, fmt.Errorf("workload %s has no subject %q", w.name, kind)
		}
		gvr, ns, tweak = w.gvr, w.ns, func(o *metav1.ListOptions) { o.LabelSelector = w.selector() }
	}
	var inf cache.SharedIndexInformer
	switch {
	case kind == subjMetadata:
		mc, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		inf = metadatainformer.NewFilteredMetadataInformer(mc, gvr, ns, 0, indexers, tweak).Informer()
	case gvr.Group != "": // the custom resource: unstructured, JSON
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		inf = dynamicinformer.NewFilteredDynamicInformer(dc, gvr, ns, 0, indexers, tweak).Informer()
	case kind == subjInformer || kind == subjTransform || kind == subjInformerNoGzip: // typed: client-go's defaults, protobuf
		cfg.DisableCompression = kind == subjInformerNoGzip
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		gi, err := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak)).ForResource(gvr)
		if err != nil {
			return nil, err
		}
		inf = gi.Informer()
		if kind == subjTransform {
			if err := inf.SetTransform(stripToMeta); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown informer %q", kind)
	}
	s := &informerSubject{n: n, inf: inf, c: newCounts(), reqs: reqs}
	if _, err := inf.AddEventHandler(s.c.handler()); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *informerSubject) sync(ctx context.Context) error {
	s.start(s.inf.RunWithContext)
	if err := s.c.waitFor(ctx, func(c *counts) bool { return c.adds >= int64(s.n) }); err != nil {
		a, _, _ := s.c.get()
		return fmt.Errorf("informer: %d of %d objects added: %w", a, s.n, err)
	}
	return nil
}

func (s *informerSubject) updates() int64 { _, u, _ := s.c.get(); return u }

func (s *informerSubject) waitUpdates(ctx context.Context, target int64) error {
	return s.c.waitFor(ctx, func(c *counts) bool { return c.updates >= target })
}

func (s *informerSubject) armRelist() {
	a, u, r := s.c.get()
	s.resyncsBase = a + u + r
	s.reqs.arm()
}

// waitRelist waits until the relist's Replace has delivered every object
// to the handler again: as an update with the same resourceVersion, or,
// for the objects changed during the gap (restart.go), an update with a
// new one or an add. (resyncsBase counts all three.)
func (s *informerSubject) waitRelist(ctx context.Context) (relistInfo, error) {
	err := s.c.waitFor(ctx, func(c *counts) bool { return c.adds+c.updates+c.resyncs >= s.resyncsBase+int64(s.n) })
	end := time.Now()
	if err != nil {
		a, u, r := s.c.get()
		return relistInfo{}, fmt.Errorf("informer: %d of %d objects delivered again: %w", a+u+r-s.resyncsBase, s.n, err)
	}
	return relistInfo{Start: s.reqs.started(), End: end, Gone: -1}, nil
}

func (s *informerSubject) counts() *requests { return s.reqs }
func (s *informerSubject) close()            { s.stop() }

// ---------------------------------------------------------------------------
// The bare paginated list: the apiserver's own list speed, items thrown away.

type listSubject struct {
	n    int
	rc   rest.Interface
	reqs *requests
	// path is the collection's URL path; selector the labelSelector
	// parameter (a workload's, workload.go; empty for the ConfigMaps).
	path, selector string
}

func newList(cfg *rest.Config, ns string, n int) (*listSubject, error) {
	c, reqs := counted(cfg)
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.APIPath = "/api"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.AcceptContentTypes = "application/json"
	c.ContentType = "application/json"
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	s := &listSubject{n: n, rc: rc, reqs: reqs, path: listPath(configMaps, ns)}
	if w := childWorkload(); w != nil {
		s.path, s.selector = listPath(w.gvr, w.ns), w.selector()
	}
	return s, nil
}

// listAll lists every page (500 a page, resourceVersion unset, JSON as
// watchjournal asks) and returns how many objects the first page said the
// list holds (0 when it did not say). It decodes only each page's metadata,
// which comes before the items, and reads the rest to io.Discard: the
// apiserver's own list speed.
func (s *listSubject) listAll(ctx context.Context) (int, error) {
	cont, total := "", 0
	for {
		req := s.rc.Get().AbsPath(s.path).Param("limit", "500")
		if s.selector != "" {
			req = req.Param("labelSelector", s.selector)
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return 0, err
		}
		meta, err := skimList(body)
		_ = body.Close()
		if err != nil {
			return 0, err
		}
		if cont == "" && meta.RemainingItemCount != nil {
			total = 500 + int(*meta.RemainingItemCount)
		}
		if cont = meta.Continue; cont == "" {
			return total, nil
		}
	}
}

// skimList decodes a list's metadata and discards everything after it.
func skimList(r io.Reader) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil { // {
		return meta, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return meta, err
		}
		if t == "metadata" {
			if err := dec.Decode(&meta); err != nil {
				return meta, err
			}
			break
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return meta, err
		}
	}
	_, err := io.Copy(io.Discard, io.MultiReader(dec.Buffered(), r))
	return meta, err
}

func (s *listSubject) sync(ctx context.Context) error {
	n, err := s.listAll(ctx)
	if err == nil && n != 0 && n != s.n {
		err = fmt.Errorf("bare list: the list holds %d objects; want %d", n, s.n)
	}
	return err
}

func (s *listSubject) updates() int64                           { return 0 }
func (s *listSubject) waitUpdates(context.Context, int64) error { return nil }
func (s *listSubject) armRelist()                               { s.reqs.arm() }

// waitRelist lists everything a second time.
func (s *listSubject) waitRelist(ctx context.Context) (relistInfo, error) {
	return bareRelist(ctx, s.sync)
}

// bareRelist is a bare subject's relist: sync again, timed.
func bareRelist(ctx context.Context, sync func(context.Context) error) (relistInfo, error) {
	start := time.Now()
	if err := sync(ctx); err != nil {
		return relistInfo{}, err
	}
	return relistInfo{Start: start, End: time.Now(), Gone: -1}, nil
}

func (s *listSubject) counts() *requests { return s.reqs }
func (s *listSubject) close()            {}

// ---------------------------------------------------------------------------
// The bare watch-list: the apiserver's streaming list (KEP-3157: a watch
// with sendInitialEvents=true, as client-go's reflector does by default),
// events thrown away.

type watchListSubject struct {
	listSubject
	// accept, when set, is the Accept header (PartialObjectMetadata for
	// bare-watch-list-meta).
	accept string
	// Ordered reports whether the last list's ADDED events came in key
	// order, as a paginated list's items do.
	ordered bool
}

// watchList streams every object as an ADDED event until the bookmark
// that ends the initial events, reading only each event's type and the
// object's name. It returns how many objects there were.
func (s *watchListSubject) watchList(ctx context.Context) (int, error) {
	req := s.rc.Get().AbsPath(s.path).
		Param("watch", "true").Param("sendInitialEvents", "true").Param("resourceVersionMatch", "NotOlderThan").
		Param("allowWatchBookmarks", "true").Param("timeoutSeconds", "600")
	if s.accept != "" {
		req = req.SetHeader("Accept", s.accept)
	}
	if s.selector != "" {
		req = req.Param("labelSelector", s.selector)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	n, prev := 0, ""
	s.ordered = true
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return n, fmt.Errorf("watch-list: after %d objects: %w", n, err)
		}
		switch ev.Type {
		case "ADDED":
			name := nameOf(ev.Object)
			if name < prev {
				s.ordered = false
			}
			prev = name
			n++
		case "BOOKMARK":
			if strings.Contains(string(ev.Object), `"k8s.io/initial-events-end":"true"`) {
				return n, nil
			}
		case "ERROR":
			return n, fmt.Errorf("watch-list: %s", ev.Object)
		}
	}
}

// nameOf returns metadata.name of an object as the apiserver writes it
// (the first "name" key), without decoding the object.
func nameOf(obj []byte) string {
	const key = `"name":"`
	i := strings.Index(string(obj), key)
	if i < 0 {
		return ""
	}
	rest := obj[i+len(key):]
	if j := strings.IndexByte(string(rest), '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

func (s *watchListSubject) sync(ctx context.Context) error {
	n, err := s.watchList(ctx)
	if err == nil && n != s.n {
		err = fmt.Errorf("bare watch-list: %d objects; want %d", n, s.n)
	}
	return err
}

func (s *watchListSubject) waitRelist(ctx context.Context) (relistInfo, error) {
	info, err := bareRelist(ctx, s.sync)
	info.Note = fmt.Sprintf("objects in key order: %v", s.ordered)
	return info, err
}

// newSubject returns the subject kind; callers look at the error first (a
// failed constructor's nil pointer is a non-nil subject).
func newSubject(kind string, cfg *rest.Config, ns, dir string, n int) (subject, error) {
	switch kind {
	case subjWatchjournal, subjWatchjournalPaged:
		return newWatchjournal(kind, cfg, ns, dir, n)
	case subjInformer, subjInformerNoGzip, subjMetadata, subjTransform:
		return newInformer(kind, cfg, ns, n)
	case subjList:
		return newList(cfg, ns, n)
	case subjWatchList, subjWatchListMeta:
		l, err := newList(cfg, ns, n)
		if err != nil {
			return nil, err
		}
		s := &watchListSubject{listSubject: *l}
		if kind == subjWatchListMeta {
			s.accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		}
		return s, nil
	}
	return nil, fmt.Errorf("unknown subject %q", kind)
}
