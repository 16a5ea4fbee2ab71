package reconcile

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/journal"
)

// Errors, grouped by when they happen:
//
//   - From New, before any request of the loop: ErrInvalidSelector,
//     ErrSecretPayloads, and ErrUnknownResource (kind.go). Nothing runs.
//   - Retried by Run with backoff, shown in Status.LastError and the log,
//     never returned by Run: ErrList, ErrWatchStart, ErrWatch (ErrDecode
//     and ErrTransform inside it), ErrNoResponse, ErrNoProgress and ErrFrameTooLarge
//     (transfer.go: a request that does not answer, a page that stalls, a
//     watch frame past 16 MiB), and ErrJournal when it wraps
//     journal.ErrNoSpace (a full disk).
//   - Returned by Run, which stops: ErrRejected (the apiserver refuses
//     the request itself) and ErrJournal for any other journal error.
//     WaitForSync returns them too, and ErrStopped when Run ended with its
//     context before the loop synced.
var (
	// ErrList is returned when a list page cannot be read. Run retries it.
	ErrList = errors.New("reconcile: list failed")
	// ErrWatchStart is returned when a watch request fails. Run retries it.
	ErrWatchStart = errors.New("reconcile: watch start failed")
	// ErrWatch is returned when an open watch fails or sends an ERROR event
	// other than 410. Run retries it.
	ErrWatch = errors.New("reconcile: watch failed")
	// ErrDecode is returned, inside ErrWatch, when a watch frame is not
	// valid JSON or its object lacks name, uid or resourceVersion. The
	// watch is retried from the same resourceVersion with backoff, as any
	// other watch failure.
	ErrDecode = errors.New("reconcile: undecodable watch frame")
	// ErrTransform is returned, inside the phase's error, when
	// Options.Transform fails on an object or its result changes the
	// object's name, namespace, UID or resourceVersion (which the journal
	// keys on). The object is not stored; the request is retried with
	// backoff, as an undecodable one is.
	ErrTransform = errors.New("reconcile: transform before the disk failed")
	// ErrRejected is returned by Run, which stops, when the apiserver
	// rejects the list or watch request itself (400 Bad Request, 422
	// Invalid, 405 Method Not Allowed, 406 Not Acceptable): retrying the
	// same request cannot help. It wraps the server's Status, so
	// apierrors.IsBadRequest and the message work on it.
	ErrRejected = errors.New("reconcile: request rejected by the apiserver")
	// ErrInvalidSelector is returned by New for a label or field selector,
	// or an Options.Inherited.Range, that does not parse.
	ErrInvalidSelector = errors.New("reconcile: invalid selector")
	// ErrSecretPayloads is returned by New for a journal of Secrets, or of
	// another sensitive resource (journal.Options.SealResources), that would
	// keep their data unsealed: set journal.Resource.MetadataOnly, or opt
	// in with Options.SecretPayloads (Secrets) and open the journal with a
	// journal.Options.Keyring so that the data is stored sealed. The
	// returned error wraps it with which of the two is missing.
	ErrSecretPayloads = errors.New("reconcile: a journal of Secrets keeps metadata only unless SecretPayloads opts in")
	// ErrJournal is returned when the journal cannot be written. A full
	// disk (journal.ErrNoSpace) is retried with backoff, nothing of the
	// failed write kept (Status.LastError); any other journal error is
	// returned by Run, which stops.
	ErrJournal = errors.New("reconcile: journal write failed")
)

// isGone reports whether err says the requested resourceVersion or continue
// token is no longer served: HTTP 410 with reason Expired (watch from a
// compacted RV with the watch cache, expired continue token) or Gone (older
// servers, watch cache "too old resource version"). Both mean: relist.
func isGone(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s) && statusIsGone(ptr.To(s.Status()))
}

// statusIsGone is isGone for the Status of a watch ERROR event, a 410:
// with the watch cache off the server answers a watch from a compacted RV
// with HTTP 200 and then {"type":"ERROR","object":{"kind":"Status",
// "code":410,"reason":"Expired"}} (checked against kube-apiserver v1.37).
func statusIsGone(s *metav1.Status) bool {
	return s.Code == http.StatusGone || s.Reason == metav1.StatusReasonExpired || s.Reason == metav1.StatusReasonGone
}

// compactedRevisionMessage is what kube-apiserver's etcd3 watcher says when
// the first event after a watch's resourceVersion is a modification whose
// previous value etcd has compacted away (k8s.io/apiserver
// pkg/storage/etcd3/event.go, parseEvent): a watch from the revision just
// below the compaction revision, watch cache off. The watch answers HTTP 200
// and then an ERROR event with code 500 and this message, on every try: the
// server will never serve that resourceVersion again, and yet it says 500,
// not 410 (its own storage tests accept both, "we should unify here").
const compactedRevisionMessage = "etcd event received with PrevKv=nil"

// isCompactedRevision reports whether err is the apiserver's 500 for a
// watch from the revision just below etcd's compaction revision
// (compactedRevisionMessage): a 410 in all but its code. It is recognised
// by what it is, code 500 with that message, not by how often it repeats.
func isCompactedRevision(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s) && s.Status().Code == http.StatusInternalServerError && strings.Contains(s.Status().Message, compactedRevisionMessage)
}

// serverDelay returns how long the server asked the client to wait before
// it tries again, and whether it asked: the Retry-After header of a 429 or
// 503 (client-go puts it in the Status's details.retryAfterSeconds), or
// details.retryAfterSeconds of a Status the server sent (API conventions,
// "HTTP Status codes": 429 and 504 ServerTimeout carry it). It follows
// apierrors.SuggestsClientDelay; a ServerTimeout that names no delay
// asks for none.
func serverDelay(err error) (time.Duration, bool) {
	secs, ok := apierrors.SuggestsClientDelay(err)
	if !ok || secs <= 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// isWatchEnd reports whether a watch stream's read error is a normal end of
// the watch rather than a failure: EOF (the server's timeoutSeconds), and
// what client-go's StreamWatcher also treats as a normal end, a probable
// EOF (connection reset, closed, broken pipe: utilnet.IsProbableEOF) or a
// network timeout (utilnet.IsTimeout). The loop watches again from the last
// resourceVersion at once; a new watch that cannot connect backs off then.
func isWatchEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
}

// failureKey names the kind of a failure for log-once: the phase that
// failed and the cause's HTTP code and reason, or its network operation and
// errno, or its Go type. Never the message: messages hold URLs with a
// randomised timeoutSeconds, addresses and ports, which differ on every try.
func failureKey(err error) string {
	phase := "other"
	for _, p := range []error{ErrJournal, ErrList, ErrWatchStart, ErrWatch} {
		if errors.Is(err, p) {
			phase = p.Error()
			break
		}
	}
	var s apierrors.APIStatus
	var op *net.OpError
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrDecode):
		return phase + ": decode"
	case errors.As(err, &s):
		return fmt.Sprintf("%s: %d %s", phase, s.Status().Code, s.Status().Reason)
	case errors.As(err, &op):
		key := phase + ": net " + op.Op
		if errors.As(err, &errno) {
			key += " " + errno.Error()
		}
		return key
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return phase + ": " + reflect.TypeOf(err).String()
		}
		err = next
	}
}

// isForbidden reports whether err is a 403: RBAC does not allow the request.
func isForbidden(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

// countBackoff counts one backoff after err in b, by its cause, and
// returns the cause for the log, in words an operator acts on.
func countBackoff(b *BackoffReasons, err error) string {
	var s apierrors.APIStatus
	network := errors.As(err, new(*net.OpError)) || utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
	switch {
	case errors.Is(err, journal.ErrNoSpace):
		b.Other++
		return "no space left for the journal: free disk space (nothing is lost; the watch resumes from the last committed resourceVersion)"
	case isForbidden(err):
		b.Forbidden++
		return "forbidden: RBAC does not allow list/watch of this resource (or the credentials are invalid)"
	case apierrors.IsNotFound(err):
		b.NotFound++
		return "not found: the resource type (CRD) or its API group does not exist"
	case isGone(err):
		b.Other++
		return "gone (410)"
	case apierrors.IsTooManyRequests(err):
		b.Throttled++
		return "throttled: the apiserver is shedding load (429); waiting at least as long as it asks"
	case errors.Is(err, ErrDecode):
		if network {
			b.Network++ // a read that broke mid-frame
		} else {
			b.Other++
		}
		return "undecodable watch frame: watching again from the last applied resourceVersion"
	case errors.As(err, &s) && s.Status().Code >= 500:
		b.Server++
		return fmt.Sprintf("apiserver error (%d %s)", s.Status().Code, s.Status().Reason)
	case network:
		b.Network++
		return "network: the apiserver cannot be reached"
	}
	b.Other++
	return "request failed"
}

// isRejected reports whether the server refused the request as malformed:
// a permanent answer for this request.
func isRejected(err error) bool {
	return apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err)
}
