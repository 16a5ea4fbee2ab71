package reconcile

// The resume check. Before a watch resumes from a stored resourceVersion
// (at start, and again after a watch could not be opened because the
// server was unreachable), the loop asks the server two cheap questions,
// each a one-item metadata-only list:
//
//  1. Where is the server now? A consistent list (resourceVersion unset,
//     limit=1) answers with the server's current list resourceVersion. If
//     it compares below the stored one (CompareResourceVersion, KEP-5504),
//     the server's history went backwards, as after etcd was restored from
//     an older backup: a watch from the stored resourceVersion would wait
//     for a future that never comes, and the objects the restore rolled
//     back or brought back would never be journaled. The loop relists
//     (origin restart at start) and counts a rewind in Status.Rewinds.
//     Where either resourceVersion is not a well-formed integer, the two
//     stay opaque and this question is skipped.
//  2. Is the stored resourceVersion still served? When it differs from the
//     current one, a list at exactly it (resourceVersionMatch=Exact,
//     limit=1) answers 410 once etcd has compacted it: the loop relists at
//     once instead of opening a watch that the server will end with a 410.
//     An answer that the resourceVersion is in the server's future ("Too
//     large resource version") is a rewind too, for opaque ones.
//
// What the check cannot see: a restore whose revisions have since passed
// the stored resourceVersion (the server's current resourceVersion is
// higher again, and the stored one is served, but names a different
// history). The periodic verify (VerifyInterval) finds what that hides;
// etcd's own remedy, a restore with `etcdutl snapshot restore
// --bump-revision --mark-compacted`, turns it into a 410.

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkResume runs the resume check for the watch s. It returns the watch
// (check cleared, current set) when it may go on, or the state to go to
// instead: a relist, or a backoff to s when the check itself failed
// (wrapped in ErrWatchStart: to the loop it is part of opening the watch).
func (l *Loop) checkResume(ctx context.Context, s stateWatch) (state, error) {
	p, err := l.listOne(ctx, "")
	if err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		return l.fail(s, fmt.Errorf("%w: resume check: current resourceVersion: %w", ErrWatchStart, err))
	}
	cur := p.ResourceVersion
	if below(cur, s.rv) {
		return l.rewound(s, cur), nil
	}
	if cur != s.rv {
		_, err = l.listOne(ctx, s.rv)
		switch {
		case ctx.Err() != nil:
			return s, nil
		case isGone(err):
			return l.gone(s, fmt.Errorf("resume check: list at exactly the stored resourceVersion: %w", err)), nil
		case isTooLargeRV(err):
			return l.rewound(s, cur), nil
		case err != nil:
			return l.fail(s, fmt.Errorf("%w: resume check: list at the stored resourceVersion: %w", ErrWatchStart, err))
		}
	}
	s.check, s.current = false, cur
	return s, nil
}

// rewound records a rewind of the server's history and returns the relist
// it leads to.
func (l *Loop) rewound(s stateWatch, current string) state {
	l.log.Info("the server's history went backwards (etcd restored from an older backup?): relisting",
		"resourceVersion", s.rv, "serverResourceVersion", current,
		"origin", string(s.goneOrigin))
	l.update(func(x *Status) { x.Rewinds++ })
	return stateList{origin: s.goneOrigin}
}

// listOne reads a one-item list, metadata only where the server serves it:
// consistent when exact is empty, at exactly exact otherwise (410 when that
// is no longer served).
func (l *Loop) listOne(ctx context.Context, exact string) (*page, error) {
	for {
		req := listRequest{limit: 1, exactRV: exact, meta: !l.fullPages}
		p, err := l.c.list(ctx, req, l.timeouts())
		if req.meta && (errors.Is(err, errNoMetadataLists) || apierrors.IsNotAcceptable(err)) {
			l.fullPages = true
			continue
		}
		return p, err
	}
}

// afterOutage reports whether a failed watch request never reached the
// server (no API Status came back: connection refused or cut, no answer):
// the next resume runs the resume check, as the server may have been
// restored meanwhile.
func afterOutage(err error) bool {
	var answered apierrors.APIStatus
	return !errors.As(err, &answered)
}

// isTooLargeRV reports whether err says a resourceVersion is newer than
// any the server has (504 with cause ResourceVersionTooLarge, as
// k8s.io/apiserver's storage.NewTooLargeResourceVersionError builds it).
func isTooLargeRV(err error) bool {
	return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}
