package reconcile

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Two failures of one kind whose messages differ (a URL with another
// randomised timeoutSeconds, another port) have one log key; another kind
// has another.
func TestFailureKey_StableAcrossMessages(t *testing.T) {
	refused := func(timeout int) error {
		return fmt.Errorf("%w: %w", ErrWatchStart, &url.Error{Op: "Get",
			URL: fmt.Sprintf("https://127.0.0.1:6443/api/v1/configmaps?timeoutSeconds=%d&watch=true", timeout),
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}})
	}
	unavailable := func(msg string) error {
		return fmt.Errorf("%w: %w", ErrWatchStart, apierrors.NewServiceUnavailable(msg))
	}
	same := [][2]error{
		{refused(301), refused(517)},
		{unavailable("at https://x?timeoutSeconds=301"), unavailable("at https://x?timeoutSeconds=517")},
		{fmt.Errorf("%w: %w: %w", ErrWatch, ErrDecode, errors.New("invalid character ']'")),
			fmt.Errorf("%w: %w: %w", ErrWatch, ErrDecode, errors.New("invalid character 'x'"))},
	}
	for _, p := range same {
		if a, b := failureKey(p[0]), failureKey(p[1]); a != b {
			t.Errorf("failureKey(%v) = %q, failureKey(%v) = %q; want one key", p[0], a, p[1], b)
		}
	}
	keys := map[string]error{}
	for _, err := range []error{refused(1), unavailable("m"), fmt.Errorf("%w: %w", ErrList, apierrors.NewServiceUnavailable("m")),
		fmt.Errorf("%w: %w", ErrWatchStart, apierrors.NewTooManyRequests("m", 1)), same[2][0]} {
		k := failureKey(err)
		if prev, ok := keys[k]; ok {
			t.Errorf("failureKey(%v) = failureKey(%v) = %q; want distinct kinds", err, prev, k)
		}
		keys[k] = err
	}
}

// The compaction revision's 500 is recognised by its message; another 500
// is not, nor is the message under another code.
func TestIsCompactedRevision(t *testing.T) {
	msg := `Internal error occurred: etcd event received with PrevKv=nil (key="/registry/configmaps/ns/a", modRevision=9, type=PUT)`
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("watch ERROR event: %w", &apierrors.StatusError{ErrStatus: metav1.Status{Code: 500, Reason: metav1.StatusReasonInternalError, Message: msg}}), true},
		{apierrors.NewInternalError(errors.New("etcdserver: request timed out")), false},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Code: 503, Message: msg}}, false},
		{errors.New(msg), false},
	} {
		if got := isCompactedRevision(tc.err); got != tc.want {
			t.Errorf("isCompactedRevision(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// A Retry-After header on a JSON Status answer reaches the error as
// details.retryAfterSeconds, so the backoff is floored by it; a Status
// that names its own delay keeps it.
func TestKeepRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header, body string
		want         time.Duration
	}{
		{"3", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`, 3 * time.Second},
		{"3", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":5}}`, 5 * time.Second},
		{"", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`, 0},
	} {
		rt := keepRetryAfter(roundTrip(func(req *http.Request) (*http.Response, error) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			return &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(tc.body)), Request: req}, nil
		}))
		req, _ := http.NewRequest(http.MethodGet, "https://x/api/v1/configmaps", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		var st metav1.Status
		if err := jsonAPI.Unmarshal(body, &st); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		got, _ := serverDelay(&apierrors.StatusError{ErrStatus: st})
		if got != tc.want {
			t.Errorf("Retry-After %q, body %s: serverDelay = %v; want %v", tc.header, tc.body, got, tc.want)
		}
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
