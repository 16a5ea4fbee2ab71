package main

// Resolving watch's RESOURCE argument through discovery, retried while the
// apiserver is unreachable.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/watchjournal/watchjournal/internal/suggest"
)

// discoveryBackoff is how discovery at watch start backs off, as the
// reconcile loop does: each wait is in [b/2, b) for b doubling from min up
// to max.
type discoveryBackoff struct {
	min, max time.Duration
}

// defaultDiscoveryBackoff returns watch's backoff: 200ms doubling to 30s,
// as watch --help says.
func defaultDiscoveryBackoff() discoveryBackoff {
	return discoveryBackoff{min: 200 * time.Millisecond, max: 30 * time.Second}
}

// resolve maps a resource argument to its GVR as kubectl does, through
// memory-cached discovery: a fully specified resource.version.group first,
// then resource[.group] with short names (cm) and singulars (configmap)
// expanded, then resource.version of the core group (configmaps.v1, as
// journal.Resource.String prints it). It also reports whether the resource
// is namespaced.
//
// While the apiserver is unreachable or answers 5xx or 429, resolve retries
// discovery (discover) until ctx is done, and then returns ctx's error.
// Errors retrying cannot fix (401, 403, a certificate the client refuses,
// a name the apiserver does not serve) it returns at once. conf gives the
// backoff and how often a lasting failure is logged again.
func resolve(ctx context.Context, cfg *rest.Config, arg string, log *zap.Logger, conf *settings) (schema.GroupVersionResource, bool, error) {
	cached, err := newDiscovery(cfg)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	failed, err := discover(ctx, cached, log, conf)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	warn := func(msg string) { log.Warn(msg, zap.String("resource", arg)) }
	mapper := restmapper.NewShortcutExpanderWithContext(restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached), cached, warn)

	full, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if full != nil {
		gvk, err = mapper.KindForWithContext(ctx, *full)
	}
	if gvk.Empty() {
		gvk, err = mapper.KindForWithContext(ctx, gr.WithVersion(""))
	}
	if gvk.Empty() && gr.Group != "" && !strings.Contains(gr.Group, ".") {
		// resource.version: a core resource with its version.
		var cerr error
		if gvk, cerr = mapper.KindForWithContext(ctx, schema.GroupVersionResource{Version: gr.Group, Resource: gr.Resource}); cerr == nil {
			err = nil
		}
	}
	if gvk.Empty() {
		if err == nil || meta.IsNoMatchError(err) {
			return schema.GroupVersionResource{}, false, unknownResource(ctx, cached, arg, failed)
		}
		return schema.GroupVersionResource{}, false, fmt.Errorf("resource %q: %w", arg, err)
	}
	m, err := mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("resource %q: %w", arg, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// newDiscovery returns the CLI's one discovery client: client-go's, cached
// in memory for the command's life (kubectl caches on disk; a journalctl
// command resolves one argument), for resolve and for the completion of
// watch's RESOURCE argument.
func newDiscovery(cfg *rest.Config) (discovery.CachedDiscoveryInterfaceWithContext, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClientWithContext(dc), nil
}

// discover fills dc's cache with the apiserver's groups and resources. It
// retries errors that may go away by themselves (transientDiscovery) with
// capped, jittered backoff until ctx is done, logging one line per
// distinct error, not one per retry, and "still retrying" at most every
// conf.stillRetryingEvery while the failure lasts; it backs off as
// conf.discovery says. It returns the group versions whose
// discovery failed when the others succeeded (a broken aggregated API,
// say), ctx's error once ctx is done, and at once any other error.
func discover(ctx context.Context, dc discovery.CachedDiscoveryInterfaceWithContext, log *zap.Logger, conf *settings) (map[schema.GroupVersion]error, error) {
	// wait.Backoff jitters above Duration: half of b.
	backoff := wait.Backoff{Duration: conf.discovery.min / 2, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: conf.discovery.max / 2}
	var lastLogged string
	still := retrying{every: conf.stillRetryingEvery} // "still retrying" lines (retrying.go)
	backoffs := 0
	for {
		_, _, err := dc.ServerGroupsAndResourcesWithContext(ctx)
		var partial *discovery.ErrGroupDiscoveryFailed
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err == nil || errors.As(err, &partial):
			if lastLogged != "" {
				log.Info("apiserver discovery succeeded")
				still.recover(log, time.Now())
			}
			if partial != nil {
				log.Debug("apiserver discovery incomplete", zap.Error(err))
				return partial.Groups, nil
			}
			return nil, nil
		case !transientDiscovery(err):
			return nil, discoveryError(err)
		}
		d := backoff.Step()
		logf := log.Debug
		if msg := err.Error(); msg != lastLogged {
			lastLogged, logf = msg, log.Warn
		}
		logf("apiserver discovery failed; retrying until it answers or interrupted", zap.Duration("delay", d), zap.Error(err))
		still.fail(log, err, backoffs, time.Now())
		backoffs++
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d): // collected once unreferenced (Go 1.23)
		}
	}
}

// transientDiscovery reports whether a discovery error may go away by
// itself: the apiserver unreachable (connection refused or reset, a
// timeout, a name that does not resolve yet, a connection cut mid-answer)
// or answering 5xx or 429 Too Many Requests. A 401, a 403, any other 4xx,
// a certificate the client refuses, a malformed server URL or an answer
// that is not discovery are not.
func transientDiscovery(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 || code == http.StatusTooManyRequests
	}
	// *url.Error is a net.Error itself: look at what it wraps.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var cert *tls.CertificateVerificationError
	var nerr net.Error
	switch {
	case errors.As(err, &cert):
		return false
	case errors.As(err, &nerr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	return false
}

// discoveryError returns a discovery error that retrying cannot fix, with
// what 401 and 403 mean for the user.
func discoveryError(err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("apiserver discovery: 401 Unauthorized: the kubeconfig's credentials were refused: %w", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("apiserver discovery: 403 Forbidden: the kubeconfig's user may not read discovery: %w", err)
	}
	return fmt.Errorf("apiserver discovery: %w", err)
}

// unknownResource returns the error for a resource argument the apiserver
// does not serve, with the closest served name when one is close
// (closestResource). When discovery failed for some group versions the
// resource may be among them, and the error says so instead.
func unknownResource(ctx context.Context, dc discovery.CachedDiscoveryInterfaceWithContext, arg string, failed map[schema.GroupVersion]error) error {
	var msg string
	if len(failed) == 0 {
		msg = fmt.Sprintf("unknown resource %q: the apiserver serves no such resource "+
			"(names look like configmaps, cm, deployments.apps, widgets.example.com)", arg)
	} else {
		gvs := make([]string, 0, len(failed))
		for gv := range failed {
			gvs = append(gvs, gv.String())
		}
		slices.Sort(gvs)
		msg = fmt.Sprintf("unknown resource %q: not among the resources discovered; discovery failed for %s",
			arg, strings.Join(gvs, ", "))
	}
	_, lists, _ := dc.ServerGroupsAndResourcesWithContext(ctx) // cached by discover
	if s := closestResource(arg, lists); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return errors.New(msg)
}

// closestResource returns the served resource whose plural, singular or
// short name (bare, or the plural and singular with .group) is closest to
// arg by edit distance, when it is close (suggest.Distance: at most 2
// edits and at most a third of the name's length, as reconcile's
// suggestions); else "". It names the resource by its plural, with .group
// outside the core group. Ties go to the plural, then to discovery order.
func closestResource(arg string, lists []*metav1.APIResourceList) string {
	best, bestDist, bestRank := "", 3, 0
	consider := func(name, suggestion string, rank int) {
		d, close := suggest.Distance(arg, name)
		if !close {
			return
		}
		if d < bestDist || (d == bestDist && rank < bestRank) {
			best, bestDist, bestRank = suggestion, d, rank
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // a subresource
				continue
			}
			plural := r.Name
			if gv.Group != "" {
				plural += "." + gv.Group
				consider(r.Name+"."+gv.Group, plural, 0)
				if r.SingularName != "" {
					consider(r.SingularName+"."+gv.Group, plural, 1)
				}
			}
			consider(r.Name, plural, 0)
			if r.SingularName != "" {
				consider(r.SingularName, plural, 1)
			}
			for _, s := range r.ShortNames {
				consider(s, plural, 2)
			}
		}
	}
	return best
}
