package jcache

// Label-selected and limited Lists: only the objects a List returns are
// decoded.
//
// controller-runtime's reader (CacheReader.List) asks the informer's
// indexer for every object of the List's scope (List, or ByIndex of the
// namespace), decoded, and only then drops those the label selector does
// not match and stops at Limit: a List that keeps ten objects of a
// thousand decodes a thousand. The indexer cannot see the selector or the
// Limit: the reader does not pass them. So Cache.List passes them itself,
// as a read plan: it registers the List's label selector and Limit in the
// cache under a token for the duration of the call, and hands the List
// on with one exact field requirement, planField=<token>, in place of its
// (empty) field selector. controller-runtime routes that List as any
// other (the informer of the type and scope, multi-namespace and per-type
// caches, which pass the options on, ReaderFailOnMissingInformer, a cache
// not started, the wait for sync), and its reader asks the indexer for
// the index "field:"+planField with the value "<namespace>/<token>", or
// "__all_namespaces/<token>" for all namespaces
// (internal.KeyToNamespacedKey). The indexer walks the scope's stored
// objects in key order, reads each one's labels alone from its bytes
// (cache.LabelSet: of protobuf, the labels field of its metadata), decodes
// only those the selector matches, and stops once Limit of them are
// decoded. The reader then applies the selector and Limit again, to
// objects that pass both, and sets the list and its Continue
// ("continue-not-supported") as for any List.
//
// Invariant: a planned List returns what controller-runtime's reader
// returns over the same journal (the same objects in the same order, key
// order; the same Continue, errors and Limit), decoding only the objects
// it returns. Lists with a field selector or a Continue, and Lists
// without a label selector or Limit, are handed on unchanged: their
// errors and index lookups are the reader's own.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jc "github.com/watchjournal/watchjournal/journal/cache"
)

// planField is the field a planned List's field selector names; no
// object has it. The reader asks for the index planIndex.
const (
	planField = "jcache.watchjournal.io/read-plan"
	planIndex = "field:" + planField
)

// readPlan is what a planned List selects: the objects whose labels
// match, at most limit of them (0: all).
type readPlan struct {
	labels labels.Selector // nil: every object
	limit  int64
}

// readPlans are a cache's planned Lists in flight, by token.
type readPlans struct {
	mu    sync.Mutex
	next  uint64
	plans map[string]*readPlan
}

// add registers p and returns its token.
func (r *readPlans) add(p *readPlan) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.plans == nil {
		r.plans = map[string]*readPlan{}
	}
	r.next++
	token := strconv.FormatUint(r.next, 10)
	r.plans[token] = p
	return token
}

// remove forgets token's plan.
func (r *readPlans) remove(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.plans, token)
}

// get returns token's plan; nil when none is registered.
func (r *readPlans) get(token string) *readPlan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plans[token]
}

// List is controller-runtime's cache List (client.Reader). A List with a
// label selector or a Limit, and neither a field selector nor a
// Continue, decodes only the objects it returns (see the top of this
// file); every other List is the embedded cache's.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	selects := lo.LabelSelector != nil && !lo.LabelSelector.Empty()
	if (!selects && lo.Limit <= 0) || lo.FieldSelector != nil || lo.Continue != "" {
		return c.Cache.List(ctx, list, opts...)
	}
	p := &readPlan{limit: max(lo.Limit, 0)}
	if selects {
		p.labels = lo.LabelSelector
	}
	token := c.plans.add(p)
	defer c.plans.remove(token)
	lo.FieldSelector = fields.OneTermEqualSelector(planField, token)
	return c.Cache.List(ctx, list, &lo)
}

// errPlanDone ends a planned read's walk once its Limit is reached.
var errPlanDone = errors.New("jcache: the read plan's limit is reached")

// planned returns the plan and key prefix of the planned index value
// "<namespace>/<token>" (all namespaces: "__all_namespaces/<token>").
func (x *indexer) planned(value string) (*readPlan, string, error) {
	ns, token, ok := strings.Cut(value, "/")
	var p *readPlan
	if ok && x.inf.plans != nil {
		p = x.inf.plans.get(token)
	}
	if p == nil {
		return nil, "", fmt.Errorf("jcache: no List in flight has the read plan %q (field %s is the cache's own)", value, planField)
	}
	if ns == strings.TrimSuffix(allNamespacesPrefix, "/") {
		return p, "", nil
	}
	return p, ns + "/", nil
}

// selects reports whether the stored object b is one p keeps; ls holds
// its labels (reused across the objects of a read).
func (p *readPlan) selects(b []byte, ls *jc.LabelSet) (bool, error) {
	if p == nil || p.labels == nil {
		return true, nil
	}
	if err := ls.Read(b); err != nil {
		return false, err
	}
	return p.labels.Matches(ls), nil
}
