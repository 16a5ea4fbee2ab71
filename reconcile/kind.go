package reconcile

// The kind of the journaled objects, recorded in the file (issue 10, item
// 1): a tombstone (a DELETED inferred by a relist) carries no object, so a
// consumer in a fresh process can label it only from the file. New asks
// discovery once per file, the way client-go's RESTMapper does
// (/api/v1, /apis/<group>/<version>), and records the answer with
// journal.SetKind; a file that has it skips the request.

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// discoveryTimeout bounds New's discovery request, so that an apiserver
// that is down or stalled delays New by this much at most.
const discoveryTimeout = 2 * time.Second

// Backoff of the background retries after New's attempt failed.
const (
	kindRetryMin = time.Second
	kindRetryMax = time.Minute
)

// recordKind fills the journal's Kind and APIVersion from discovery when
// the file records none. A failure is returned; New logs it, goes on, and
// retries in the background (retryKind): the objects themselves carry their
// kind and journal.TypeMeta falls back to them meanwhile, so an apiserver
// that is down at start neither stops nor stalls the loop.
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
	if err != nil {
		return fmt.Errorf("reconcile: discovery of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == res.GVR.Resource {
			return j.SetKind(r.Kind, gv)
		}
	}
	return fmt.Errorf("reconcile: discovery of %s: no resource %q", gv, res.GVR.Resource)
}

// retryKind calls recordKind with backoff until it succeeds or the journal
// is closed.
func retryKind(cfg *rest.Config, j *journal.Journal, res journal.Resource, log *zap.Logger) {
	wait := kindRetryMin
	for {
		time.Sleep(wait)
		if _, err := j.Head(); errors.Is(err, journal.ErrClosed) {
			return
		}
		err := recordKind(cfg, j, res)
		if err == nil || errors.Is(err, journal.ErrClosed) {
			return
		}
		log.Debug("kind not recorded yet", zap.Error(err))
		wait = min(2*wait, kindRetryMax)
	}
}
