package reconcile

// The client reads a list page as it streams in, field by field with
// json-iterator (jsonAPI, the one JSON approach), just far enough to read
// each item's metadata, and keeps each item it keeps as the bytes the
// server sent: nothing builds a map[string]any per object, and a
// metadata-only page costs its items' metadata, not their bodies. A JSON
// object is changed only structurally (typed): kind and apiVersion, which
// list items lack, are written as fields, never by searching its bytes, so
// that every stored object decodes on its own. The transport (encoding,
// compression, HTTP/1.1, timeouts): New says what and why. A metadata-only
// journal (Resource.MetadataOnly, required for Secrets unless
// Options.SecretPayloads with a journal that seals them, seal.go) asks for
// PartialObjectMetadata without a fallback to full objects (onlyMetaAccept).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// res is the resource; a MetadataOnly one is asked for metadata only
	// (PartialObjectMetadata), and its objects keep kind, apiVersion and
	// metadata.
	res journal.Resource
	// shard is the journal's shard range and how it is kept (shard.go).
	shard shard
	// proto asks for protobuf watch streams (wire.go); New and the kind's
	// retry turn it off for a kind the scheme lacks (protoKnown), while a
	// request may read it.
	proto atomic.Bool

	// mu guards kind and apiVersion: the resource's, found by discovery
	// for a metadata-only journal, whose objects come as
	// PartialObjectMetadata.
	mu               sync.Mutex
	kind, apiVersion string

	// requests counts the requests sent, bytes the bytes of their response
	// bodies read (count).
	requests, bytes atomic.Int64

	// transform is Options.Transform (transform.go); nil stores objects
	// as served.
	transform func(obj []byte) ([]byte, error)
}

// count counts each request rt sends and the body bytes read from its
// response.
func (c *client) count(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		c.requests.Add(1)
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
		}
		return resp, err
	})
}

// roundTripper is a function that is an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// countingBody adds the bytes read from a body to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

// Read reads and counts.
func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// newClient returns a client of res through cfg: JSON, HTTP/1.1 unless cfg
// sets a Transport or NextProtos (see New for why), cfg.Timeout on every
// request but watches, one rate limiter for both, and the Retry-After
// header of an error answer kept in its Status (details.retryAfterSeconds).
func newClient(cfg *rest.Config, res journal.Resource, enc Wire, compression bool) (*client, error) {
	sh, err := newShard(res.ShardSelector)
	if err != nil {
		return nil, err
	}
	cl := &client{res: res, shard: sh}
	cl.proto.Store(!res.MetadataOnly && enc != WireJSON && servesProto(res.GVR))
	c := rest.CopyConfig(cfg)
	// No gzip unless asked for (Options.Compression); a config that
	// disables it keeps it disabled.
	c.DisableCompression = cfg.DisableCompression || !compression
	gv := res.GVR.GroupVersion()
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.UserAgent = cmp.Or(c.UserAgent, "watchjournal")
	if c.Transport == nil && len(c.NextProtos) == 0 {
		c.NextProtos = []string{"http/1.1"}
	}
	c.Wrap(keepRetryAfter)
	c.Wrap(cl.count)
	if c.RateLimiter == nil {
		// One limiter for lists and watches, as one rest client would
		// have (rest.RESTClientForConfigAndClient's defaults).
		qps, burst := cmp.Or(c.QPS, rest.DefaultQPS), cmp.Or(c.Burst, rest.DefaultBurst)
		if qps > 0 {
			c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		}
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("reconcile: http client: %w", err)
	}
	if cl.rc, err = rest.RESTClientForConfigAndClient(c, hc); err != nil {
		return nil, fmt.Errorf("reconcile: rest client: %w", err)
	}
	// cfg.Timeout is http.Client.Timeout, which would cut every watch at
	// it. Watches use the same transport (and connections) without it.
	whc := *hc
	whc.Timeout = 0
	if cl.watchRC, err = rest.RESTClientForConfigAndClient(c, &whc); err != nil {
		return nil, fmt.Errorf("reconcile: rest client: %w", err)
	}
	return cl, nil
}

// keepRetryAfter wraps a transport so that an error answer's Retry-After
// header is not lost: client-go keeps it (as details.retryAfterSeconds)
// only when the body is not a Status, as with API Priority and Fairness's
// plain-text 429. For a 4xx or 5xx answer with a Retry-After in whole
// seconds and a JSON Status body without details.retryAfterSeconds, it
// returns the Status with the header's delay in its details.
func keepRetryAfter(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
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
		if rerr != nil || jsonAPI.Unmarshal(body, &st) != nil || st.Kind != "Status" || (st.Details != nil && st.Details.RetryAfterSeconds > 0) {
			return resp, nil
		}
		st.Details = cmp.Or(st.Details, &metav1.StatusDetails{})
		st.Details.RetryAfterSeconds = int32(min(secs, math.MaxInt32))
		if out, merr := jsonAPI.Marshal(&st); merr == nil {
			resp.Body = io.NopCloser(bytes.NewReader(out))
			resp.ContentLength = int64(len(out))
			resp.Header.Del("Content-Length")
		}
		return resp, nil
	})
}

// getJSON sends r, which must answer within timeout, and decodes the JSON
// it answers into v.
func getJSON(ctx context.Context, r *rest.Request, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := r.Do(ctx).Raw()
	if err != nil {
		return err
	}
	return jsonAPI.Unmarshal(raw, v)
}

// get returns a GET of the resource's collection in namespace ns (all
// namespaces, or a cluster-scoped resource, when empty), without
// client-side retries: the loop's backoff decides.
func (c *client) get(rc rest.Interface, ns string) *rest.Request {
	return rc.Get().Namespace(ns).Resource(c.res.GVR.Resource).MaxRetries(0)
}

func (c *client) selectors(r *rest.Request) *rest.Request {
	if c.res.LabelSelector != "" {
		r = r.Param("labelSelector", c.res.LabelSelector)
	}
	if c.res.FieldSelector != "" {
		r = r.Param("fieldSelector", c.res.FieldSelector)
	}
	if sel := c.shard.param(); sel != "" {
		r = r.Param("shardSelector", sel)
	}
	return r
}

// page is one decoded list page.
type page struct {
	Items           []Item
	ResourceVersion string
	Continue        string
	// Bytes is the size of the page's response body as read, in bytes.
	Bytes int64
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

// Accept headers that ask the apiserver for metadata only (API concepts,
// "Receiving resources as metadata-only"; client-go's metadata client asks
// the same). metaListAccept falls back to full objects, which a diff can
// use; a metadata-only journal asks with onlyMetaListAccept and
// onlyMetaAccept, which have no fallback: a server that cannot answer them
// answers 406 Not Acceptable, never with a Secret's data.
const (
	metaListAccept     = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	onlyMetaListAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	onlyMetaAccept     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// list reads one page. resourceVersion is left unset, unless exactRV is
// given, so the read is consistent (served from etcd, or from a watch cache
// proven current): "0" could go back in time (API concepts, "Semantics for
// get and list"). A continue token carries its list's resourceVersion.
// timeouts bound the wait for the response and the gaps in its body, not the
// whole page (transfer.go).
func (c *client) list(ctx context.Context, req listRequest, t timeouts) (*page, error) {
	var items []Item
	p, err := c.listEach(ctx, req, t, func(it Item) error { items = append(items, it); return nil })
	if err != nil {
		return nil, err
	}
	p.Items = items
	return p, nil
}

// listEach reads one page as list does, but hands each item to fn as it is
// decoded and keeps none: memory stays at one item, whatever the page's
// size. The page it returns has no Items. An error of fn ends the read and
// is returned as it is. A response that does not begin within t.response
// fails with ErrNoResponse; a body that breaks once begun (no byte for
// t.progress, cut, or ended early) fails with a *bodyError, which list
// shrinks pages on.
func (c *client) listEach(ctx context.Context, req listRequest, t timeouts, fn func(Item) error) (*page, error) {
	meta := req.meta || c.res.MetadataOnly
	if c.res.MetadataOnly {
		if err := c.resolveKind(ctx, t.response); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A page that fails is never half-applied.
	r := c.selectors(c.get(c.rc, c.res.Namespace)).Param("limit", strconv.FormatInt(req.limit, 10))
	switch {
	case req.cont != "":
		r = r.Param("continue", req.cont)
	case req.exactRV != "":
		r = r.Param("resourceVersion", req.exactRV).Param("resourceVersionMatch", "Exact")
	}
	switch {
	case c.res.MetadataOnly:
		r = r.SetHeader("Accept", onlyMetaListAccept)
	case meta:
		r = r.SetHeader("Accept", metaListAccept)
	}
	// Stream decodes the server's Status (reason, message, continue token)
	// into the error, as Do does.
	body, err := openBody(ctx, cancel, r, t.response)
	if err != nil {
		return nil, err
	}
	pr := newProgressReader(ctx, cancel, body, t.progress)
	defer pr.Close()
	var stop error
	p, kind, err := c.decodePage(pr, meta, func(it Item) error { stop = fn(it); return stop })
	switch {
	case stop != nil:
		return nil, stop
	case err != nil:
		return nil, pr.classify(err, req.limit)
	case meta && kind != "PartialObjectMetadataList":
		return nil, errNoMetadataLists
	}
	p.Bytes = pr.n
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
// and nothing of the body is kept (but a metadata-only journal keeps the
// metadata as the object); otherwise the item also keeps its object
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
				case meta && !c.res.MetadataOnly:
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
	return newItem(md.name, md.namespace, md.uid, md.rv, nil)
}

// newItem returns the Item of an object with this metadata and obj (the
// key is <namespace>/<name>, or <name> without a namespace); an object
// without name, uid or resourceVersion is an error.
func newItem(name, namespace, uid, rv string, obj []byte) (Item, error) {
	if name == "" || uid == "" || rv == "" {
		return Item{}, fmt.Errorf("reconcile: object without name, uid or resourceVersion (%s/%s)", namespace, name)
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	return Item{Key: key, UID: uid, ResourceVersion: rv, Object: obj}, nil
}

// item reads an object's metadata and keeps the object as served, with
// kind and apiVersion (typed). List items come without them; they are put
// back so that every stored object decodes on its own. A metadata-only
// journal keeps kind, apiVersion and metadata only, as the resource's kind:
// the server sends PartialObjectMetadata.
func (c *client) item(raw []byte, kind, apiVersion string) (Item, error) {
	it, err := readItemMeta(jsoniter.ParseBytes(jsonAPI, raw), false)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %.200s", err, raw)
	}
	if c.res.MetadataOnly {
		c.mu.Lock()
		kind, apiVersion = c.kind, c.apiVersion
		c.mu.Unlock()
	}
	if it.Object, err = typed(raw, kind, apiVersion, c.res.MetadataOnly); err != nil {
		return Item{}, err
	}
	return c.transformed(it)
}

// lastApplied is the annotation kubectl apply writes; it holds the whole
// object, data included. A metadata-only request still receives it (it is
// metadata); it is dropped before anything is stored.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// typed returns the JSON object raw with kind and apiVersion set; it may
// return raw itself, which the caller owns. Fields are read structurally,
// at the top level of the object: kind and apiVersion the object carries
// are kept, unless metadataOnly, when the given ones replace them (a
// PartialObjectMetadata becomes the resource's kind); those it lacks are
// written first. With metadataOnly the object keeps metadata only, without
// the lastApplied annotation. An object that is not a JSON object is an
// error.
func typed(raw []byte, kind, apiVersion string, metadataOnly bool) ([]byte, error) {
	type field struct {
		name  string
		value []byte
	}
	var fields []field
	var hasKind, hasAPIVersion, typeFields bool
	members := 0
	it := jsoniter.ParseBytes(jsonAPI, raw)
	if it.WhatIsNext() != jsoniter.ObjectValue {
		return nil, fmt.Errorf("reconcile: decode object: not a JSON object: %.80s", raw)
	}
	// A first pass only skips values: no copy of the object's fields.
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		members++
		switch {
		case f == "kind" && it.WhatIsNext() == jsoniter.StringValue:
			typeFields = true
			hasKind = it.ReadString() != ""
		case f == "apiVersion" && it.WhatIsNext() == jsoniter.StringValue:
			typeFields = true
			hasAPIVersion = it.ReadString() != ""
		case f == "kind", f == "apiVersion":
			typeFields = true
			it.Skip()
		default:
			it.Skip()
		}
		return it.Error == nil
	})
	if it.Error != nil && it.Error != io.EOF {
		return nil, fmt.Errorf("reconcile: decode object: %w", it.Error)
	}
	switch {
	case metadataOnly:
	case hasKind && hasAPIVersion, kind == "" && apiVersion == "":
		return raw, nil
	case !typeFields:
		// Neither field: write them as the object's first members, before
		// the members it has (after its opening brace).
		s := jsonAPI.BorrowStream(nil)
		defer jsonAPI.ReturnStream(s)
		s.WriteObjectStart()
		s.WriteObjectField("kind")
		s.WriteString(kind)
		s.WriteMore()
		s.WriteObjectField("apiVersion")
		s.WriteString(apiVersion)
		if members > 0 {
			s.WriteMore()
		}
		body := bytes.TrimLeft(raw, " \t\r\n")[1:]
		out := make([]byte, 0, len(s.Buffer())+len(body))
		return append(append(out, s.Buffer()...), body...), nil
	}
	// Rebuild the object field by field: a metadata-only object, or one
	// with an empty or odd kind or apiVersion.
	it = jsoniter.ParseBytes(jsonAPI, raw)
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		switch {
		case f == "kind" && !metadataOnly && hasKind:
			kind = it.ReadString()
		case f == "apiVersion" && !metadataOnly && hasAPIVersion:
			apiVersion = it.ReadString()
		case f == "kind", f == "apiVersion", metadataOnly && f != "metadata":
			it.Skip()
		default:
			fields = append(fields, field{f, it.SkipAndReturnBytes()})
		}
		return it.Error == nil
	})
	if it.Error != nil && it.Error != io.EOF {
		return nil, fmt.Errorf("reconcile: decode object: %w", it.Error)
	}
	s := jsonAPI.BorrowStream(nil)
	defer jsonAPI.ReturnStream(s)
	s.WriteObjectStart()
	n := 0
	more := func(name string) {
		if n++; n > 1 {
			s.WriteMore()
		}
		s.WriteObjectField(name)
	}
	if kind != "" {
		more("kind")
		s.WriteString(kind)
	}
	if apiVersion != "" {
		more("apiVersion")
		s.WriteString(apiVersion)
	}
	for _, f := range fields {
		more(f.name)
		if metadataOnly {
			if err := writeMetadata(s, f.value); err != nil {
				return nil, err
			}
			continue
		}
		_, _ = s.Write(f.value)
	}
	s.WriteObjectEnd()
	if s.Error != nil {
		return nil, fmt.Errorf("reconcile: encode object: %w", s.Error)
	}
	return append([]byte(nil), s.Buffer()...), nil
}

// writeMetadata writes the metadata object raw to s without the
// lastApplied annotation.
func writeMetadata(s *jsoniter.Stream, raw []byte) error {
	it := jsoniter.ParseBytes(jsonAPI, raw)
	if it.WhatIsNext() != jsoniter.ObjectValue {
		_, _ = s.Write(raw)
		return nil
	}
	n := 0
	s.WriteObjectStart()
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		if n++; n > 1 {
			s.WriteMore()
		}
		s.WriteObjectField(f)
		if f != "annotations" || it.WhatIsNext() != jsoniter.ObjectValue {
			_, _ = s.Write(it.SkipAndReturnBytes())
			return it.Error == nil
		}
		a := 0
		s.WriteObjectStart()
		it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
			v := it.SkipAndReturnBytes()
			if k != lastApplied {
				if a++; a > 1 {
					s.WriteMore()
				}
				s.WriteObjectField(k)
				_, _ = s.Write(v)
			}
			return it.Error == nil
		})
		s.WriteObjectEnd()
		return it.Error == nil
	})
	s.WriteObjectEnd()
	if it.Error != nil && it.Error != io.EOF {
		return fmt.Errorf("reconcile: decode metadata: %w", it.Error)
	}
	return nil
}

// resolveKind finds, once, the kind of the resource by discovery (the
// APIResourceList of its group version): a metadata-only journal receives
// PartialObjectMetadata and stores its objects as that kind. The request
// must answer within timeout.
func (c *client) resolveKind(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kind != "" {
		return nil
	}
	gv := c.res.GVR.GroupVersion()
	var list metav1.APIResourceList
	if err := getJSON(ctx, c.rc.Get().MaxRetries(0), timeout, &list); err != nil {
		return fmt.Errorf("reconcile: discover the kind of %s: %w", c.res.GVR.Resource, err)
	}
	for _, r := range list.APIResources {
		if r.Name == c.res.GVR.Resource && r.Kind != "" {
			c.kind, c.apiVersion = r.Kind, gv.String()
			return nil
		}
	}
	return fmt.Errorf("reconcile: discover the kind of %s: not in the apiserver's resources of %s", c.res.GVR.Resource, gv)
}

// watchEvent is one frame of a watch stream.
type watchEvent struct {
	Type   string
	Object []byte
	// proto is the object of an ADDED, MODIFIED or DELETED frame of a
	// protobuf stream: Object is nil (protoItem reads it).
	proto *protoObject
}

// size is the bytes of the event's object, in either encoding.
func (ev watchEvent) size() int {
	if ev.proto != nil {
		return len(ev.proto.env)
	}
	return len(ev.Object)
}

// eventItem reads the Item of an ADDED, MODIFIED or DELETED frame, in
// either encoding.
func (c *client) eventItem(ev watchEvent) (Item, error) {
	if ev.proto != nil {
		it, err := protoItem(*ev.proto)
		if err != nil {
			return Item{}, err
		}
		return c.transformed(it)
	}
	return c.item(ev.Object, "", "")
}

// stream is an open watch, in JSON or protobuf (wire.go): the first byte
// of the body tells which.
type stream struct {
	body   io.ReadCloser
	frames *frameReader
	it     *jsoniter.Iterator
	// pb reads a protobuf stream, it a JSON one; both nil until the body's
	// first byte told which (sniff).
	pb *bufio.Reader
	// buf is the size of the read buffer.
	buf int
	// max bounds a protobuf frame, in bytes.
	max    int64
	cancel context.CancelFunc
}

// watch opens a watch from resourceVersion rv with bookmarks allowed. The
// server ends it after timeout (a watch should not live forever; reflector
// uses 5 to 10 minutes). The request must begin its response within open
// (ErrNoResponse).
func (c *client) watch(ctx context.Context, rv string, timeout, open time.Duration) (*stream, error) {
	r, err := c.watchRequest(ctx, timeout, open)
	if err != nil {
		return nil, err
	}
	st, _, err := openStream(ctx, r.Param("resourceVersion", rv), timeouts{response: open})
	return st, err
}

// watchList opens a streaming list (KEP-3157, API concepts "Streaming
// lists"): a watch with sendInitialEvents=true,
// resourceVersionMatch=NotOlderThan and bookmarks allowed, with
// resourceVersion unset, which the apiserver serves as a consistent read:
// it sends an ADDED for every object that exists, then a BOOKMARK
// annotated k8s.io/initial-events-end "true" whose resourceVersion is the
// state those events describe, then the watch goes on from it. The server
// ends it after timeout. The request must begin its response within
// t.response (ErrNoResponse), and its body may pass no byte for
// t.progress (ErrNoProgress) until the caller sets the returned reader's
// timeout to 0.
func (c *client) watchList(ctx context.Context, timeout time.Duration, t timeouts) (*stream, *progressReader, error) {
	r, err := c.watchRequest(ctx, timeout, t.response)
	if err != nil {
		return nil, nil, err
	}
	return openStream(ctx, r.Param("sendInitialEvents", "true").Param("resourceVersionMatch", "NotOlderThan"), t)
}

// openStream sends the watch request r and reads its frames (openBody,
// progressReader: no progress bound when t.progress is 0).
func openStream(ctx context.Context, r *rest.Request, t timeouts) (*stream, *progressReader, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	body, err := openBody(ctx, cancel, r, t.response)
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	pr := newProgressReader(ctx, cancel, body, t.progress)
	return newStream(pr, func() { cancel(nil) }), pr, nil
}

// watchRequest returns a watch request of the resource with bookmarks
// allowed, which the server ends after timeout, asking for metadata only
// or protobuf as the client does. A metadata-only journal's kind is
// resolved first (resolveKind), within open.
func (c *client) watchRequest(ctx context.Context, timeout, open time.Duration) (*rest.Request, error) {
	if c.res.MetadataOnly {
		if err := c.resolveKind(ctx, open); err != nil {
			return nil, err
		}
	}
	r := c.selectors(c.get(c.watchRC, c.res.Namespace)).
		Param("watch", "true").
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.Itoa(int(timeout/time.Second)))
	switch {
	case c.res.MetadataOnly:
		r = r.SetHeader("Accept", onlyMetaAccept)
	case c.proto.Load():
		r = r.SetHeader("Accept", protoWatchAccept)
	}
	return r, nil
}

// newStream reads watch frames from body, each bounded by maxFrameBytes;
// cancel ends the request.
func newStream(body io.ReadCloser, cancel context.CancelFunc) *stream {
	return newStreamSize(body, cancel, maxFrameBytes, pageBuffer)
}

// newStreamSize is newStream with a frame bound of max bytes and a read
// buffer of buf bytes.
func newStreamSize(body io.ReadCloser, cancel context.CancelFunc, max int64, buf int) *stream {
	fr := &frameReader{r: body, max: max}
	return &stream{body: body, frames: fr, buf: buf, cancel: cancel}
}

// sniff reads the body's first byte: 0x00 begins a protobuf frame's
// length (frames are below 16 MiB), anything else is JSON. It returns the
// body's error when there is no byte.
func (s *stream) sniff() error {
	var b [1]byte
	if _, err := io.ReadFull(s.frames, b[:]); err != nil {
		return err
	}
	r := io.MultiReader(bytes.NewReader(b[:]), s.frames)
	if b[0] == 0 {
		// Each frame states its length, which nextProto bounds; the
		// reader's own bound would count the buffer's read-ahead.
		s.max, s.frames.max = s.frames.max, math.MaxInt64
		s.pb = bufio.NewReaderSize(r, s.buf)
		return nil
	}
	s.it = jsoniter.Parse(jsonAPI, r, s.buf)
	return nil
}

// next reads the next frame: io.EOF when the server ended the watch between
// frames, io.ErrUnexpectedEOF when it ended inside one, ErrFrameTooLarge
// for a frame past maxFrameBytes, the connection's error, or a decode
// error.
func (s *stream) next() (watchEvent, error) {
	s.frames.n = 0
	var ev watchEvent
	if s.encoding() == "" {
		if err := s.sniff(); err != nil {
			return ev, err
		}
	}
	if s.pb != nil {
		return s.nextProto()
	}
	if s.it.WhatIsNext() == jsoniter.InvalidValue && s.it.Error == io.EOF {
		return ev, io.EOF
	}
	s.it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		switch f {
		case "type":
			ev.Type = it.ReadString()
		case "object":
			ev.Object = it.SkipAndReturnBytes()
		default:
			it.Skip()
		}
		return it.Error == nil
	})
	if err := s.it.Error; err != nil {
		switch rerr := s.frames.err; {
		case rerr == io.EOF:
			return watchEvent{}, io.ErrUnexpectedEOF
		case rerr != nil:
			return watchEvent{}, rerr
		}
		return watchEvent{}, fmt.Errorf("reconcile: decode watch frame: %w", err)
	}
	return ev, nil
}

// encoding is "protobuf" or "json" once the first frame was read, ""
// before.
func (s *stream) encoding() string {
	switch {
	case s.pb != nil:
		return "protobuf"
	case s.it != nil:
		return "json"
	}
	return ""
}

// nextProto reads the next frame of a protobuf stream; see next.
func (s *stream) nextProto() (watchEvent, error) {
	typ, o, err := readProtoEvent(s.pb, s.max)
	if err != nil {
		return watchEvent{}, err
	}
	ev := watchEvent{Type: typ}
	switch typ {
	case "ADDED", "MODIFIED", "DELETED":
		ev.proto = &o
		return ev, nil
	}
	if ev.Object, err = protoJSON(o); err != nil {
		return watchEvent{}, err
	}
	return ev, nil
}

func (s *stream) close() {
	s.cancel()
	_ = s.body.Close()
}

// decodeStatus reads the Status of an ERROR watch event.
func decodeStatus(obj []byte) *metav1.Status {
	var st metav1.Status
	if err := jsonAPI.Unmarshal(obj, &st); err != nil {
		return &metav1.Status{Code: http.StatusInternalServerError, Message: fmt.Sprintf("undecodable ERROR event: %.200s", obj)}
	}
	return &st
}
