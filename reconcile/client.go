package reconcile

// The client speaks to the apiserver with raw JSON: a list page is decoded
// as it streams in, just far enough to read each item's metadata, and each
// item that is kept is kept as the bytes the server sent. Nothing builds a
// map[string]any per object. A metadata-only page costs its items' keys,
// UIDs and resourceVersions, not its body; a full page, its objects.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/watchjournal/watchjournal/journal"
)

// client lists and watches one resource.
type client struct {
	rc rest.Interface
	// watchRC is rc without cfg.Timeout: a watch lives for its
	// timeoutSeconds.
	watchRC rest.Interface
	res     journal.Resource
	// metadataOnly drops each object's payload, keeping metadata only.
	metadataOnly bool
}

// newClient returns a client of res through cfg: JSON, HTTP/1.1 unless cfg
// sets a Transport or NextProtos (see New for why), cfg.Timeout on every
// request but watches, one rate limiter for both, and the Retry-After
// header of an error answer kept in its Status (details.retryAfterSeconds).
func newClient(cfg *rest.Config, res journal.Resource, metadataOnly bool) (*client, error) {
	c := rest.CopyConfig(cfg)
	gv := schema.GroupVersion{Group: res.GVR.Group, Version: res.GVR.Version}
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	if c.UserAgent == "" {
		c.UserAgent = "watchjournal"
	}
	if c.Transport == nil && len(c.NextProtos) == 0 {
		// HTTP/1.1: each watch has its own TCP connection, so closing a
		// stalled watch closes its connection, and the next request dials
		// a new one instead of queueing on a dead HTTP/2 connection.
		c.NextProtos = []string{"http/1.1"}
	}
	c.Wrap(keepRetryAfter)
	if c.RateLimiter == nil {
		// One limiter for lists and watches, as one rest client would
		// have (rest.RESTClientForConfigAndClient's defaults).
		qps, burst := c.QPS, c.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		if qps > 0 {
			c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		}
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("reconcile: http client: %w", err)
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("reconcile: rest client: %w", err)
	}
	// cfg.Timeout is http.Client.Timeout, which would cut every watch at
	// it. Watches use the same transport (and connections) without it.
	whc := *hc
	whc.Timeout = 0
	wrc, err := rest.RESTClientForConfigAndClient(c, &whc)
	if err != nil {
		return nil, fmt.Errorf("reconcile: rest client: %w", err)
	}
	return &client{rc: rc, watchRC: wrc, res: res, metadataOnly: metadataOnly}, nil
}

// keepRetryAfter wraps a transport so that an error answer's Retry-After
// header is not lost: client-go keeps it (as details.retryAfterSeconds)
// only when the body is not a Status, as with API Priority and Fairness's
// plain-text 429; a Status body that names no delay gets the header's.
func keepRetryAfter(rt http.RoundTripper) http.RoundTripper {
	return retryAfterTransport{rt}
}

type retryAfterTransport struct{ rt http.RoundTripper }

// RoundTrip sends req; for a 4xx or 5xx answer with a Retry-After in whole
// seconds and a JSON Status body without details.retryAfterSeconds, it
// returns the Status with the header's delay in its details.
func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	secs, perr := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if perr != nil || secs <= 0 {
		return resp, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var st metav1.Status
	if rerr != nil || json.Unmarshal(body, &st) != nil || st.Kind != "Status" {
		return resp, nil
	}
	if st.Details == nil {
		st.Details = &metav1.StatusDetails{}
	}
	if st.Details.RetryAfterSeconds > 0 {
		return resp, nil
	}
	st.Details.RetryAfterSeconds = int32(min(secs, math.MaxInt32))
	if out, merr := json.Marshal(&st); merr == nil {
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// path returns the collection path of the resource.
func (c *client) path() []string {
	var p []string
	if c.res.GVR.Group == "" {
		p = []string{"/api", c.res.GVR.Version}
	} else {
		p = []string{"/apis", c.res.GVR.Group, c.res.GVR.Version}
	}
	if c.res.Namespace != "" {
		p = append(p, "namespaces", c.res.Namespace)
	}
	return append(p, c.res.GVR.Resource)
}

func (c *client) selectors(r *rest.Request) *rest.Request {
	if c.res.LabelSelector != "" {
		r = r.Param("labelSelector", c.res.LabelSelector)
	}
	if c.res.FieldSelector != "" {
		r = r.Param("fieldSelector", c.res.FieldSelector)
	}
	return r
}

// page is one decoded list page.
type page struct {
	Items           []Item
	ResourceVersion string
	Continue        string
}

type rawMeta struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// listRequest is one page request.
type listRequest struct {
	limit int64
	// cont is the continue token of the page; empty for the first.
	cont string
	// exactRV, for a first page, reads it at exactly this resourceVersion
	// (resourceVersionMatch=Exact), to fetch a page again as it was.
	exactRV string
	// meta asks for a PartialObjectMetadataList: each item's metadata only,
	// a fraction of the bytes to send and decode. Items then carry no
	// Object.
	meta bool
}

// metaAccept asks the apiserver to serve a list as PartialObjectMetadataList
// (API concepts, "Receiving resources as Tables"/metadata-only responses).
const metaAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

// list reads one page. resourceVersion is left unset, unless exactRV is
// given, so the read is consistent (served from etcd, or from a watch cache
// proven current): "0" could go back in time (API concepts, "Semantics for
// get and list"). A continue token carries its list's resourceVersion.
func (c *client) list(ctx context.Context, req listRequest, timeout time.Duration) (*page, error) {
	var items []Item
	p, err := c.listEach(ctx, req, timeout, func(it Item) error { items = append(items, it); return nil })
	if err != nil {
		return nil, err
	}
	p.Items = items
	return p, nil
}

// listEach reads one page as list does, but hands each item to fn as it is
// decoded and keeps none: memory stays at one item, whatever the page's
// size. The page it returns has no Items. An error of fn ends the read and
// is returned as it is.
func (c *client) listEach(ctx context.Context, req listRequest, timeout time.Duration, fn func(Item) error) (*page, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// No client-side retries: the loop's backoff decides, and a page that
	// fails is never half-applied.
	r := c.selectors(c.rc.Get().AbsPath(c.path()...)).MaxRetries(0).Param("limit", strconv.FormatInt(req.limit, 10))
	switch {
	case req.cont != "":
		r = r.Param("continue", req.cont)
	case req.exactRV != "":
		r = r.Param("resourceVersion", req.exactRV).Param("resourceVersionMatch", "Exact")
	}
	if req.meta {
		r = r.SetHeader("Accept", metaAccept)
	}
	body, err := r.Stream(ctx)
	if err != nil {
		// Stream decodes the server's Status (reason, message, continue
		// token) into the error, as Do does.
		return nil, err
	}
	defer body.Close()
	p, kind, err := c.decodePage(body, req.meta, fn)
	if err != nil {
		return nil, err
	}
	if req.meta && kind != "PartialObjectMetadataList" {
		return nil, errNoMetadataLists
	}
	return p, nil
}

// errNoMetadataLists is returned by list when the server answered a
// metadata-only request with full objects.
var errNoMetadataLists = errors.New("reconcile: the apiserver does not serve metadata-only lists")

// jsonAPI reads list pages: json-iterator reads a page from the stream in
// one pass, the metadata field by field, skipping the rest, and returns an
// item's bytes when the object is kept; encoding/json would validate the
// page, then scan it again to decode, then validate and scan each item
// once more.
var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

// pageBuffer is the read buffer of a streamed page, in bytes.
const pageBuffer = 32 << 10

// decodePage reads a list page as it streams in, in one pass, and calls fn
// with each item: with meta, the item's key, UID and resourceVersion only,
// and nothing of the body is kept; otherwise the item also keeps its object
// (item). It returns the page without items and the list's kind. An error
// of fn is returned as it is; others say "decode list".
func (c *client) decodePage(r io.Reader, meta bool, fn func(Item) error) (*page, string, error) {
	p := &page{}
	var kind, apiVersion string
	var early [][]byte // full items that came before kind and apiVersion
	var bad, stop error
	it := jsoniter.Parse(jsonAPI, r, pageBuffer)
	it.ReadObjectCB(func(it *jsoniter.Iterator, field string) bool {
		switch field {
		case "kind":
			kind = it.ReadString()
		case "apiVersion":
			apiVersion = it.ReadString()
		case "metadata":
			it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
				switch f {
				case "resourceVersion":
					p.ResourceVersion = it.ReadString()
				case "continue":
					p.Continue = it.ReadString()
				default:
					it.Skip()
				}
				return true
			})
		case "items":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				var item Item
				switch {
				case meta:
					item, bad = readItemMeta(it, true)
				case kind == "" || apiVersion == "":
					early = append(early, it.SkipAndReturnBytes())
					return it.Error == nil
				default:
					item, bad = c.item(it.SkipAndReturnBytes(), strings.TrimSuffix(kind, "List"), apiVersion)
				}
				if bad == nil && it.Error == nil {
					stop = fn(item)
				}
				return bad == nil && stop == nil && it.Error == nil
			})
		default:
			it.Skip()
		}
		return bad == nil && stop == nil && it.Error == nil
	})
	switch {
	case stop != nil:
		return nil, "", stop
	case bad != nil:
		return nil, "", fmt.Errorf("reconcile: decode list: %w", bad)
	case it.Error != nil && it.Error != io.EOF:
		return nil, "", fmt.Errorf("reconcile: decode list: %w", it.Error)
	case kind == "Status":
		return nil, "", fmt.Errorf("reconcile: decode list: the server answered with a Status")
	}
	for _, raw := range early {
		item, err := c.item(raw, strings.TrimSuffix(kind, "List"), apiVersion)
		if err != nil {
			return nil, "", fmt.Errorf("reconcile: decode list: %w", err)
		}
		if err := fn(item); err != nil {
			return nil, "", err
		}
	}
	return p, kind, nil
}

// itemMeta reads the key, UID and resourceVersion of an object, keeping no
// Object.
func itemMeta(raw []byte) (Item, error) {
	it, err := readItemMeta(jsoniter.ParseBytes(jsonAPI, raw), false)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %.200s", err, raw)
	}
	return it, nil
}

// readItemMeta reads metadata.name, namespace, uid and resourceVersion of
// the object at it, field by field. With all, it reads to the object's end
// (a stream goes on after it); without, it stops after metadata.
func readItemMeta(it *jsoniter.Iterator, all bool) (Item, error) {
	var md struct{ name, namespace, uid, rv string }
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		if f != "metadata" {
			it.Skip()
			return it.Error == nil
		}
		it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
			switch f {
			case "name":
				md.name = it.ReadString()
			case "namespace":
				md.namespace = it.ReadString()
			case "uid":
				md.uid = it.ReadString()
			case "resourceVersion":
				md.rv = it.ReadString()
			default:
				it.Skip()
			}
			return it.Error == nil
		})
		return all && it.Error == nil
	})
	if it.Error != nil && it.Error != io.EOF {
		return Item{}, fmt.Errorf("reconcile: decode object: %w", it.Error)
	}
	if md.name == "" || md.uid == "" || md.rv == "" {
		return Item{}, fmt.Errorf("reconcile: object without name, uid or resourceVersion (%s/%s)", md.namespace, md.name)
	}
	key := md.name
	if md.namespace != "" {
		key = md.namespace + "/" + md.name
	}
	return Item{Key: key, UID: md.uid, ResourceVersion: md.rv}, nil
}

// item reads an object's metadata and keeps the object as served. List items
// come without kind and apiVersion; they are put back so that every stored
// object decodes on its own.
func (c *client) item(raw json.RawMessage, kind, apiVersion string) (Item, error) {
	it, err := itemMeta(raw)
	if err != nil {
		return Item{}, err
	}
	it.Object = withKind(raw, kind, apiVersion)
	if c.metadataOnly {
		obj, err := metadataOnly(it.Object)
		if err != nil {
			return Item{}, err
		}
		it.Object = obj
	}
	return it, nil
}

// lastApplied is the annotation kubectl apply writes; it holds the whole
// object, data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// metadataOnly keeps kind, apiVersion and metadata (without the
// last-applied annotation) of an object: for Secrets, nothing of the data.
func metadataOnly(obj []byte) ([]byte, error) {
	var full map[string]json.RawMessage
	if err := json.Unmarshal(obj, &full); err != nil {
		return nil, fmt.Errorf("reconcile: decode object: %w", err)
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(full["metadata"], &md); err != nil {
		return nil, fmt.Errorf("reconcile: decode metadata: %w", err)
	}
	if raw, ok := md["annotations"]; ok {
		var ann map[string]string
		if json.Unmarshal(raw, &ann) == nil {
			if _, found := ann[lastApplied]; found {
				delete(ann, lastApplied)
				md["annotations"], _ = json.Marshal(ann)
			}
		}
	}
	out := map[string]any{"metadata": md}
	for _, k := range []string{"kind", "apiVersion"} {
		if v, ok := full[k]; ok {
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// withKind returns a copy of obj with kind and apiVersion set when missing.
func withKind(obj json.RawMessage, kind, apiVersion string) []byte {
	trimmed := bytes.TrimLeft(obj, " \t\r\n")
	if kind == "" || len(trimmed) < 2 || trimmed[0] != '{' || bytes.Contains(trimmed[:min(len(trimmed), 64)], []byte(`"kind"`)) {
		return append([]byte(nil), obj...)
	}
	head := fmt.Sprintf(`{"kind":%q,"apiVersion":%q`, kind, apiVersion)
	out := make([]byte, 0, len(head)+len(trimmed)+1)
	out = append(out, head...)
	rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// watchEvent is one frame of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// stream is an open watch.
type stream struct {
	body   io.ReadCloser
	dec    *json.Decoder
	cancel context.CancelFunc
}

// watch opens a watch from resourceVersion rv with bookmarks allowed. The
// server ends it after timeout (a watch should not live forever; reflector
// uses 5 to 10 minutes).
// The request must answer (headers) within open, or it is abandoned.
func (c *client) watch(ctx context.Context, rv string, timeout, open time.Duration) (*stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(open, cancel)
	r := c.selectors(c.watchRC.Get().AbsPath(c.path()...)).MaxRetries(0).
		Param("watch", "true").
		Param("resourceVersion", rv).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.Itoa(int(timeout/time.Second)))
	body, err := r.Stream(ctx)
	if !timer.Stop() {
		if err == nil {
			_ = body.Close()
		}
		cancel()
		return nil, fmt.Errorf("watch request got no answer within %v", open)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &stream{body: body, dec: json.NewDecoder(body), cancel: cancel}, nil
}

// next reads the next frame; io.EOF when the server ended the watch.
func (s *stream) next() (watchEvent, error) {
	var ev watchEvent
	err := s.dec.Decode(&ev)
	return ev, err
}

func (s *stream) close() {
	s.cancel()
	_ = s.body.Close()
}

// decodeStatus reads the Status of an ERROR watch event.
func decodeStatus(obj json.RawMessage) *metav1.Status {
	var st metav1.Status
	if err := json.Unmarshal(obj, &st); err != nil {
		return &metav1.Status{Code: http.StatusInternalServerError, Message: fmt.Sprintf("undecodable ERROR event: %.200s", obj)}
	}
	return &st
}

var jsonUnmarshal = json.Unmarshal
