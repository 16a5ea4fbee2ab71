package reconcile

// Why a DELETED happened (journal.Reason): gone from the server, or only
// out of the journal's label or field selector. A name taken by a new UID
// gives the old one ReasonGone without asking.
//
// kube-apiserver (v1.37, watch cache off and on; selectorexit_test.go)
// sends a key that leaves a watch's selector as DELETED carrying the object
// as it was BEFORE the change, labels that still match, with the change's
// resourceVersion: the same shape as a real delete. A relist finds both the
// same way too: the key is absent from the list. So the object itself
// cannot tell; the server can. One metadata-only list of the key's name
// (fieldSelector metadata.name, in the key's namespace, no label selector)
// at exactly the resourceVersion the DELETED was seen at (the watch
// event's, or the relist's) answers it race-free: the object existed then
// with the same UID → ReasonLeftSelector; otherwise (absent, or its name
// already another UID's) → ReasonGone. When that resourceVersion is
// compacted (410), the current state answers instead: the same UID still
// exists → left (UIDs never come back), absent or another UID → gone (an
// object that left and was deleted since reads as gone: it is gone now).
//
// Cost: nothing for a journal without a label or field selector, where
// every DELETED is ReasonGone (a namespace or a shard range is no selector
// an object can leave by changing). With a selector, one small request per
// DELETED, through the loop's rate limiter (rest.Config QPS/Burst), at
// most confirmBudget lookups and about confirmTime per watch batch and per
// relist (client-go's default 5 QPS would otherwise hold a batch of 64
// deletes 13 s). A DELETED past the budget, or whose lookup fails (a
// network error, 5xx or 429 after confirmAttempts tries, a 403 or other
// 4xx at once), is journaled with ReasonUnconfirmed: the delete is never
// dropped, nor delayed past the budget. Only a cancelled context stops a
// confirmation; then nothing of the batch or relist is committed.

import (
	"context"
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal"
)

// confirmBudget bounds the lookups of one watch batch and of one relist:
// a mass deletion costs at most this many requests, its other DELETEDs
// being ReasonUnconfirmed.
const confirmBudget = 64

// confirmTime bounds the time the lookups of one watch batch or one
// relist take together (waits for the rate limiter and between retries
// included); the DELETEDs after it are ReasonUnconfirmed.
const confirmTime = 5 * time.Second

// confirmAttempts is how many times one lookup is tried when it fails
// with a transient error (429, 5xx, network), waiting the server's
// Retry-After or Options.MinBackoff doubled between tries, at most
// confirmMaxWait.
const (
	confirmAttempts = 3
	confirmMaxWait  = 2 * time.Second
)

// confirmer gives the DELETEDs of one watch batch or one relist their
// reason, spending at most confirmBudget lookups.
type confirmer struct {
	l           *Loop
	left        int
	spent       time.Duration // in lookups and their retries' waits
	unconfirmed int
}

func (l *Loop) newConfirmer() *confirmer { return &confirmer{l: l, left: confirmBudget} }

// selective reports whether the journal has a selector an object can leave
// while it exists.
func (l *Loop) selective() bool {
	return l.c.res.LabelSelector != "" || l.c.res.FieldSelector != ""
}

// reasons sets the Reason of every DELETED in evs that has none, as of
// resourceVersion rv: a list's, or, when empty, the server's current state
// (for the DELETEDs a streaming list finds before its bookmark gives its
// resourceVersion, stream.go: an object that left and came back in between
// reads as left-selector, as it would after etcd compaction, reason's
// fallback). Only ctx's end is an error.
func (cf *confirmer) reasons(ctx context.Context, evs []journal.Event, rv string) error {
	for i := range evs {
		e := &evs[i]
		if e.Type != journal.Deleted || e.Reason != "" {
			continue
		}
		r, err := cf.reason(ctx, e.Key, e.UID, rv)
		if err != nil {
			return err
		}
		e.Reason = r
	}
	return nil
}

// reason returns why key (of uid) left the journal at resourceVersion rv.
func (cf *confirmer) reason(ctx context.Context, key, uid, rv string) (journal.Reason, error) {
	l := cf.l
	if !l.selective() {
		return journal.ReasonGone, nil
	}
	if cf.left <= 0 || cf.spent > confirmTime {
		cf.unconfirmed++
		return journal.ReasonUnconfirmed, nil
	}
	cf.left--
	start := l.opts.Clock.Now()
	defer func() { cf.spent += l.opts.Clock.Since(start) }()
	b := wait.Backoff{Duration: l.opts.MinBackoff, Factor: 2, Steps: confirmAttempts}
	for try := 1; ; try++ {
		found, err := l.c.lookup(ctx, key, rv, l.opts.RequestTimeout)
		if err == nil {
			if found != "" && found == uid {
				return journal.ReasonLeftSelector, nil
			}
			return journal.ReasonGone, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if rv != "" && isGone(err) {
			rv = "" // compacted: the current state answers (see above)
			continue
		}
		if try >= confirmAttempts || !transient(err) {
			l.log.V(1).Info("could not confirm a delete: journaling it as unconfirmed", "key", key, "resourceVersion", rv, "error", err)
			cf.unconfirmed++
			return journal.ReasonUnconfirmed, nil
		}
		asked, _ := serverDelay(err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-l.opts.Clock.After(min(max(b.Step(), asked), confirmMaxWait)):
		}
	}
}

// done logs how many DELETEDs stayed unconfirmed, once per batch or relist.
func (cf *confirmer) done() {
	if cf.unconfirmed > 0 {
		cf.l.log.Info("journaled deletes without confirming whether the objects are gone or left the selector",
			"unconfirmed", cf.unconfirmed, "budget", confirmBudget, "time", confirmTime)
	}
}

// transient reports whether a failed lookup may succeed if tried again:
// throttling, a server error, a timeout, or no HTTP answer at all.
func transient(err error) bool {
	if apierrors.IsTooManyRequests(err) {
		return true
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code >= 500
	}
	return true // network: no Status
}

// lookup returns the UID of the object named by key, "" when there is none:
// at exactly resourceVersion rv, or the current state (a consistent read)
// when rv is empty. It lists the name with fieldSelector metadata.name,
// which every resource serves, in the key's namespace and without the
// journal's selectors, metadata only (full objects from a server that
// cannot, unless the journal is metadata-only); timeout bounds the
// request.
func (c *client) lookup(ctx context.Context, key, rv string, timeout time.Duration) (string, error) {
	ns, name, namespaced := strings.Cut(key, "/")
	if !namespaced {
		ns, name = "", key
	}
	accept := metaListAccept // full objects if need be: only UIDs are read
	if c.res.MetadataOnly {
		accept = onlyMetaListAccept // never a Secret's data
	}
	r := c.get(c.rc, ns).
		Param("fieldSelector", "metadata.name="+name).
		SetHeader("Accept", accept)
	if rv != "" {
		r = r.Param("resourceVersion", rv).Param("resourceVersionMatch", "Exact")
	}
	var list metav1.PartialObjectMetadataList // of full objects too: only metadata is read
	if err := getJSON(ctx, r, timeout, &list); err != nil {
		return "", err
	}
	for _, it := range list.Items {
		if it.Name == name {
			return string(it.UID), nil
		}
	}
	return "", nil
}
