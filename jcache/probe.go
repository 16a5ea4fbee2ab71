package jcache

// The probe: which resource an informer of controller-runtime's asks for.
//
// controller-runtime builds every informer through cache.Options.NewInformer
// (func(ListerWatcher, objType, resync, Indexers)), after it has resolved
// the namespace (DefaultNamespaces, ByObject.Namespaces, NamespaceAll with
// exclusions) and the label and field selectors (Default*, ByObject,
// per-namespace Config) into the ListerWatcher's closures. The journal needs
// exactly that as a journal.Resource. So New gives controller-runtime an
// HTTP client whose transport recognises one marked request: NewInformer
// calls the ListerWatcher's List once with resourceVersion set to a unique
// marker; the transport records the request's URL (path: group, version,
// namespace, resource; query: labelSelector, fieldSelector) and answers
// with an error, without reaching the server. Every other request passes
// through unchanged.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// probeMarker prefixes the resourceVersion of a probe request.
const probeMarker = "jcache-probe-"

// errProbed is what the transport answers a probe with.
var errProbed = errors.New("jcache: probe answered locally")

// probeTransport passes requests to next, except probes, whose URLs it
// records.
type probeTransport struct {
	next   http.RoundTripper
	prefix string // the path of the rest.Config's Host: see parseResourceURL
	mu     sync.Mutex
	seen   map[string]*url.URL // marker → request URL
	n      atomic.Uint64
}

func (p *probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rv := req.URL.Query().Get("resourceVersion")
	if !strings.HasPrefix(rv, probeMarker) {
		return p.next.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	u := *req.URL
	p.mu.Lock()
	p.seen[rv] = &u
	p.mu.Unlock()
	return nil, errProbed
}

// resource returns the journal.Resource the ListerWatcher lists (not
// MetadataOnly: the caller knows that from the object type).
func (p *probeTransport) resource(lw toolscache.ListerWatcher) (journal.Resource, error) {
	marker := fmt.Sprintf("%s%d", probeMarker, p.n.Add(1))
	opts := metav1.ListOptions{ResourceVersion: marker, Limit: 1}
	if lc, ok := lw.(toolscache.ListerWithContext); ok {
		_, _ = lc.ListWithContext(context.Background(), opts)
	} else {
		_, _ = lw.List(opts) //nolint:staticcheck // the ListerWatcher may only have List
	}
	p.mu.Lock()
	u := p.seen[marker]
	delete(p.seen, marker)
	p.mu.Unlock()
	if u == nil {
		return journal.Resource{}, errors.New("jcache: the informer's list request did not reach the cache's HTTP client (is cache.Options.HTTPClient replaced after New?)")
	}
	return parseResourceURL(p.prefix, u)
}

// parseResourceURL reads a list request's URL: PREFIX/api/V[/namespaces/NS]/RES
// or PREFIX/apis/G/V[/namespaces/NS]/RES, with the labelSelector and
// fieldSelector parameters. PREFIX is the path of the rest.Config's Host
// (a proxy's, say), which client-go puts before every request path. The
// path is read from the front, after PREFIX, segment by segment: a
// namespace or resource named like a path word (api, apis, namespaces,
// watch) is then only ever read as the segment it is in.
func parseResourceURL(prefix string, u *url.URL) (journal.Resource, error) {
	var r journal.Resource
	bad := fmt.Errorf("jcache: cannot read the resource from %q (the rest.Config's host path is %q)", u.Path, prefix)
	prefix = strings.TrimRight(prefix, "/")
	path, ok := strings.CutPrefix(u.Path, prefix+"/")
	if !ok {
		return r, bad
	}
	segs := strings.Split(path, "/")
	var gv schema.GroupVersion
	switch {
	case len(segs) >= 3 && segs[0] == "api" && segs[1] != "":
		gv, segs = schema.GroupVersion{Version: segs[1]}, segs[2:]
	case len(segs) >= 4 && segs[0] == "apis" && segs[1] != "" && segs[2] != "":
		gv, segs = schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:]
	default:
		return r, bad
	}
	switch {
	case len(segs) == 1 && segs[0] != "":
		r.GVR = gv.WithResource(segs[0])
	case len(segs) == 3 && segs[0] == "namespaces" && segs[1] != "" && segs[2] != "":
		r.GVR, r.Namespace = gv.WithResource(segs[2]), segs[1]
	default:
		return r, bad
	}
	q := u.Query()
	r.LabelSelector = q.Get("labelSelector")
	r.FieldSelector = q.Get("fieldSelector")
	return r, nil
}
