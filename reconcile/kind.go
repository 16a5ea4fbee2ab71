package reconcile

// The kind of the journaled objects, recorded in the file: a tombstone (a
// DELETED inferred by a relist) carries no object in a file that does not keep
// objects, so a consumer in a fresh process can label it only from the file.
// New asks discovery once per file, the way client-go's RESTMapper does
// (/api/v1, /apis/<group>/<version>), and records the answer with
// journal.Writer.SetKind; a file that has it skips the request.
//
// The same request tells a mistyped resource from a real one: when
// discovery answers and does not serve the resource (its group version is
// not served, or its list lacks the name), New returns an
// *UnknownResourceError instead of a Loop that would retry a 404 forever.
// A resource that existed once keeps the loop's retry: a file that records
// a kind, or a resourceVersion, was written from a served resource, and a
// CRD deleted and created again is served again (the loop then lists). A
// discovery request that fails (network, 5xx, 403) decides nothing: New
// logs it, goes on, and Run retries it in the background (retryKind), so an
// apiserver that is down at start neither stops nor stalls the loop.
//
// The retry lives within Run: Run starts it, it waits
// on Options.Clock and Run's context, and Run returns only after it has
// exited. A Loop that is never run, or whose Run returned, sends no
// discovery request; the next Run retries again until the kind is
// recorded.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/suggest"
	"github.com/watchjournal/watchjournal/journal"
)

// discoveryTimeout bounds New's discovery request, so that an apiserver
// that is down or stalled delays New by this much at most.
const discoveryTimeout = 2 * time.Second

// Backoff of the background retries after New's attempt failed: the wait
// doubles from kindRetryMin up to kindRetryMax, without jitter.
const (
	kindRetryMin = time.Second
	kindRetryMax = time.Minute
)

// ErrUnknownResource is returned by New (and OpenGroup) when discovery
// answers and does not serve the journal's resource, in a file never
// written from a served resource (it records no kind and no
// resourceVersion): a mistyped name, version or group. The error is an
// *UnknownResourceError. A resource that was served once and is gone later
// (a CRD deleted) is not this error: Run retries it with backoff, and
// Status.LastError shows the 404.
var ErrUnknownResource = errors.New("reconcile: unknown resource")

// UnknownResourceError is the error New returns for a resource that
// discovery does not serve. It matches ErrUnknownResource with errors.Is.
type UnknownResourceError struct {
	// GVR is the resource asked for.
	GVR schema.GroupVersionResource
	// GroupVersionServed is false when discovery does not serve the group
	// version at all (/apis/<group>/<version> answers 404).
	GroupVersionServed bool
	// Suggestions are resources of the same group version, by their plural
	// names, within two edits of GVR.Resource (and at most a third of the
	// name's length: the rule journalctl watch's suggestion follows too),
	// closest first; nil when none is that close.
	Suggestions []string
}

// Error names the resource, and the closest suggestion when there is one.
func (e *UnknownResourceError) Error() string {
	msg := fmt.Sprintf("reconcile: unknown resource %q: discovery of %s does not serve it", e.GVR.Resource, e.GVR.GroupVersion())
	if !e.GroupVersionServed {
		msg = fmt.Sprintf("reconcile: unknown resource %q: the apiserver does not serve group version %s", e.GVR.Resource, e.GVR.GroupVersion())
	}
	if len(e.Suggestions) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", e.Suggestions[0])
	}
	return msg
}

// Is reports whether target is ErrUnknownResource.
func (e *UnknownResourceError) Is(target error) bool { return target == ErrUnknownResource }

// recordKind fills the journal's Kind and APIVersion from discovery when
// the file records none. It returns an *UnknownResourceError when
// discovery answers without the resource, and any other discovery failure
// as it is; New decides which of them ends it (see the top of this file).
func recordKind(cfg *rest.Config, j *journal.Journal, res journal.Resource) error {
	if res.Kind != "" {
		return nil
	}
	c := rest.CopyConfig(cfg)
	c.Timeout = discoveryTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	gv := res.GVR.GroupVersion().String()
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return &UnknownResourceError{GVR: res.GVR}
	}
	if err != nil {
		return fmt.Errorf("reconcile: discovery of %s: %w", gv, err)
	}
	var names []string
	for _, r := range list.APIResources {
		if r.Name == res.GVR.Resource {
			return j.Writer().SetKind(r.Kind, gv)
		}
		if !strings.Contains(r.Name, "/") { // not a subresource
			names = append(names, r.Name)
		}
	}
	return &UnknownResourceError{GVR: res.GVR, GroupVersionServed: true, Suggestions: suggest.Closest(res.GVR.Resource, names)}
}

// checkKind runs recordKind for New: it returns the error that ends New
// (an *UnknownResourceError for a file never written from a served
// resource), and logs any other failure.
func (l *Loop) checkKind(cfg *rest.Config, res journal.Resource) error {
	err := recordKind(cfg, l.j, res)
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnknownResource) {
		rv, rerr := l.j.ResourceVersion()
		if rerr == nil && rv == "" {
			return err
		}
		// Written from a served resource before: gone since (a CRD
		// deleted); Run retries until it is served again.
	}
	l.log.Info("kind not recorded yet: Run retries it in the background", "error", err)
	l.kindRetry = &kindRetry{cfg: cfg, res: res}
	return nil
}

// kindRetry is what Run needs to retry New's failed discovery request.
type kindRetry struct {
	cfg *rest.Config
	res journal.Resource
	// done is set once the kind is recorded (or cannot be: the journal
	// closed); later Runs do not retry.
	done atomic.Bool
}

// startKindRetry starts retryKind for Run when New could not record the
// kind, and returns the function that waits for it to exit (after ctx
// ends); a no-op when there is nothing to retry.
func (l *Loop) startKindRetry(ctx context.Context) (wait func()) {
	k := l.kindRetry
	if k == nil || k.done.Load() {
		return func() {}
	}
	var wg sync.WaitGroup
	// exits when the kind is recorded, the journal closed, or ctx ends
	wg.Go(func() { l.retryKind(ctx, k) })
	return wg.Wait
}

// retryKind calls recordKind with backoff, waiting on Options.Clock, until
// it succeeds, the journal is closed, or ctx (Run's) ends.
func (l *Loop) retryKind(ctx context.Context, k *kindRetry) {
	b := wait.Backoff{Duration: kindRetryMin, Factor: 2, Steps: math.MaxInt32, Cap: kindRetryMax}
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.opts.Clock.After(b.Step()):
		}
		if _, err := l.j.Head(); errors.Is(err, journal.ErrClosed) {
			k.done.Store(true)
			return
		}
		err := recordKind(k.cfg, l.j, k.res)
		if err == nil || errors.Is(err, journal.ErrClosed) {
			k.done.Store(true)
			l.checkProto()
			return
		}
		l.log.V(1).Info("kind not recorded yet", "error", err)
	}
}
