package reconcile

// The client speaks to the apiserver with raw JSON: a list page is decoded
// just far enough to read each item's metadata, and each item is kept as the
// bytes the server sent. Nothing builds a map[string]any per object, so a
// relist costs about one page of memory.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// client lists and watches one resource.
type client struct {
	rc  rest.Interface
	res journal.Resource
	// metadataOnly drops each object's payload, keeping metadata only.
	metadataOnly bool
}

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
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("reconcile: rest client: %w", err)
	}
	return &client{rc: rc, res: res, metadataOnly: metadataOnly}, nil
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

type rawList struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
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
	res := r.Do(ctx)
	if err := res.Error(); err != nil {
		// Error, not Raw's error: it decodes the server's Status (reason,
		// message, continue token) instead of a generic one.
		return nil, err
	}
	body, _ := res.Raw()
	l, err := decodeList(body)
	if err != nil {
		return nil, fmt.Errorf("reconcile: decode list: %w", err)
	}
	if req.meta && l.Kind != "PartialObjectMetadataList" {
		return nil, errNoMetadataLists
	}
	p := &page{ResourceVersion: l.Metadata.ResourceVersion, Continue: l.Metadata.Continue, Items: make([]Item, 0, len(l.Items))}
	kind := strings.TrimSuffix(l.Kind, "List")
	for _, raw := range l.Items {
		var it Item
		var err error
		if req.meta {
			it, err = itemMeta(raw)
		} else {
			it, err = c.item(raw, kind, l.APIVersion)
		}
		if err != nil {
			return nil, err
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

// errNoMetadataLists is returned by list when the server answered a
// metadata-only request with full objects.
var errNoMetadataLists = errors.New("reconcile: the apiserver does not serve metadata-only lists")

// jsonAPI reads list pages: json-iterator finds an item's end and returns
// its bytes in one pass, and reads the metadata field by field, skipping the
// rest; encoding/json validates the page, then scans it again to decode,
// then validates and scans each item once more.
var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

// decodeList reads a list page in one pass. Items alias body.
func decodeList(body []byte) (*rawList, error) {
	l := &rawList{}
	it := jsoniter.ParseBytes(jsonAPI, body)
	it.ReadObjectCB(func(it *jsoniter.Iterator, field string) bool {
		switch field {
		case "kind":
			l.Kind = it.ReadString()
		case "apiVersion":
			l.APIVersion = it.ReadString()
		case "metadata":
			it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
				switch f {
				case "resourceVersion":
					l.Metadata.ResourceVersion = it.ReadString()
				case "continue":
					l.Metadata.Continue = it.ReadString()
				default:
					it.Skip()
				}
				return true
			})
		case "items":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				l.Items = append(l.Items, it.SkipAndReturnBytes())
				return it.Error == nil
			})
		default:
			it.Skip()
		}
		return it.Error == nil
	})
	if it.Error != nil && it.Error != io.EOF {
		return nil, it.Error
	}
	return l, nil
}

// itemMeta reads the key, UID and resourceVersion of a listed object,
// keeping no Object.
func itemMeta(raw json.RawMessage) (Item, error) {
	var m rawMeta
	it := jsoniter.ParseBytes(jsonAPI, raw)
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		if f != "metadata" {
			it.Skip()
			return true
		}
		it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
			switch f {
			case "name":
				m.Metadata.Name = it.ReadString()
			case "namespace":
				m.Metadata.Namespace = it.ReadString()
			case "uid":
				m.Metadata.UID = it.ReadString()
			case "resourceVersion":
				m.Metadata.ResourceVersion = it.ReadString()
			default:
				it.Skip()
			}
			return true
		})
		return false // the rest of the object is not needed
	})
	if it.Error != nil && it.Error != io.EOF {
		return Item{}, fmt.Errorf("reconcile: decode object: %w", it.Error)
	}
	md := m.Metadata
	if md.Name == "" || md.UID == "" || md.ResourceVersion == "" {
		return Item{}, fmt.Errorf("reconcile: object without name, uid or resourceVersion: %.200s", raw)
	}
	key := md.Name
	if md.Namespace != "" {
		key = md.Namespace + "/" + md.Name
	}
	return Item{Key: key, UID: md.UID, ResourceVersion: md.ResourceVersion}, nil
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
	r := c.selectors(c.rc.Get().AbsPath(c.path()...)).MaxRetries(0).
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
