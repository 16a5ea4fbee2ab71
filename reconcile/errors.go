package reconcile

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/journal"
)

// Errors that name the phase that failed. The loop retries all of them with
// backoff; they reach callers through Status.LastError and the log.
var (
	// ErrList is returned when a list page cannot be read.
	ErrList = errors.New("reconcile: list failed")
	// ErrWatchStart is returned when a watch request fails.
	ErrWatchStart = errors.New("reconcile: watch start failed")
	// ErrWatch is returned when an open watch fails or sends an ERROR event
	// other than 410.
	ErrWatch = errors.New("reconcile: watch failed")
	// ErrRejected is returned by Run when the apiserver rejects the list or
	// watch request itself (400 Bad Request, 422 Invalid, 405): retrying
	// the same request cannot help. It wraps the server's Status, so
	// apierrors.IsBadRequest and the message work on it.
	ErrRejected = errors.New("reconcile: request rejected by the apiserver")
	// ErrInvalidSelector is returned by New for a label or field selector
	// that does not parse.
	ErrInvalidSelector = errors.New("reconcile: invalid selector")
	// ErrSecretPayloads is returned by New for a journal of Secrets that
	// would keep their data: set journal.Resource.MetadataOnly, or opt in
	// with Options.SecretPayloads.
	ErrSecretPayloads = errors.New("reconcile: a journal of Secrets keeps metadata only unless SecretPayloads opts in")
	// ErrJournal is returned when the journal cannot be written. A full
	// disk (journal.ErrNoSpace) is retried with backoff, nothing of the
	// failed write kept; any other journal error stops the loop.
	ErrJournal = errors.New("reconcile: journal write failed")
)

// isGone reports whether err says the requested resourceVersion or continue
// token is no longer served: HTTP 410 with reason Expired (watch from a
// compacted RV with the watch cache, expired continue token) or Gone (older
// servers, watch cache "too old resource version"). Both mean: relist.
func isGone(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return true
	}
	var s apierrors.APIStatus
	return errors.As(err, &s) && s.Status().Code == http.StatusGone
}

// statusIsGone reports whether the Status of a watch ERROR event is a 410:
// with the watch cache off the server answers a watch from a compacted RV
// with HTTP 200 and then {"type":"ERROR","object":{"kind":"Status",
// "code":410,"reason":"Expired"}} (checked against kube-apiserver v1.37).
func statusIsGone(s *metav1.Status) bool {
	return s.Code == http.StatusGone || s.Reason == metav1.StatusReasonExpired || s.Reason == metav1.StatusReasonGone
}

// isForbidden reports whether err is a 403: RBAC does not allow the request.
func isForbidden(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

// isNotFound reports whether err is a 404: the resource, its CRD, or the
// namespace's API path does not exist.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// reason names the cause of err for the log, in words an operator acts on.
func reason(err error) string {
	switch {
	case errors.Is(err, journal.ErrNoSpace):
		return "no space left for the journal: free disk space (nothing is lost; the watch resumes from the last committed resourceVersion)"
	case isForbidden(err):
		return "forbidden: RBAC does not allow list/watch of this resource (or the credentials are invalid)"
	case isNotFound(err):
		return "not found: the resource type (CRD) or its API group does not exist"
	case isGone(err):
		return "gone (410)"
	}
	return "request failed"
}

// isRejected reports whether the server refused the request as malformed:
// a permanent answer for this request.
func isRejected(err error) bool {
	return apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err)
}
