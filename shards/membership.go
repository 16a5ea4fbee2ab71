package shards

// Membership: one member's Lease in a shard group, and its view of the
// others'. The journal's shard members (Member) and the disk cache's
// sharded handlers (package jcache) take part in a group the same way, so
// that both kinds of replica can judge each other: one Lease per member,
// <group>-<member>, labelled LabelGroup and annotated AnnotationMember,
// renewed every RenewInterval with the range the member publishes; a
// member is live while its Lease was renewed within leaseDurationSeconds
// as this replica saw it (observe.go); a member that stops deletes its
// Lease if this instance still holds it.
//
// The invariant Renew keeps: an instance never takes a Lease another
// instance holds and renews (the same member name started twice); it
// takes one only after it expired by the local clock. A request that got
// no answer about the Lease (a timeout) keeps the copy last written, so a
// renewal that landed unanswered meets a conflict next time and is read
// again, never blindly overwritten.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// MembershipOptions configure NewMembership. Every field is required.
type MembershipOptions struct {
	// Group names the shard group (LabelGroup); Member this replica in it
	// (AnnotationMember). Both DNS labels; the Lease is <Group>-<Member>.
	Group, Member string
	// Namespace holds the group's Leases.
	Namespace string
	// LeaseDuration is how long a Lease is valid after its last renewal,
	// at least 1 s (leaseDurationSeconds is whole seconds); RenewInterval
	// how often the member renews it, less than LeaseDuration. Together
	// they bound each Lease request (a third of them, see Renew).
	LeaseDuration, RenewInterval time.Duration
}

// Announcement is what a renewal writes on the member's Lease besides its
// holder and times.
type Announcement struct {
	// Selector is the range the member publishes (AnnotationSelector), a
	// KEP-5866 shardSelector; "" for none.
	Selector string
	// Leaving marks the Lease with AnnotationLeaving: the member is
	// stopping, and the others take its range (member.go, "Handover").
	// False removes the mark (a new instance that takes over the Lease of
	// one that left without deleting it).
	Leaving bool
	// Index is the manifest of the member's published index
	// (AnnotationIndex, digest.go); "" removes the annotation.
	Index string
	// Annotations are set on the Lease besides these, by their own keys
	// (the caller's, outside this package's); a key set once stays until
	// the caller sets it again.
	Annotations map[string]string
}

// View is the group as one listing of its Leases showed it.
type View struct {
	// Live is the live members' names, sorted, this member included (it
	// judges itself by Renew, not by the listing). Another member is live
	// while its Lease has a holder, was renewed within its duration as
	// this replica saw it, and is not marked leaving.
	Live []string
	// Selectors maps each live member that publishes a range, this one
	// included, to its AnnotationSelector (non-empty, unparsed).
	Selectors map[string]string
	// Gone is the Leases of the other members that are not live: expired,
	// or without a holder. A leaving member's Lease is in neither list.
	Gone []*coordinationv1.Lease
	// Leases maps each live member other than this one to its Lease as
	// listed (for what its announcement carries besides the selector).
	Leases map[string]*coordinationv1.Lease
}

// Membership is one member's Lease in a shard group: it creates, renews
// and releases the Lease, and lists the group's Leases to tell the live
// members (the file's comment says how). It is not safe for concurrent
// use: the goroutine that runs the member owns it.
type Membership struct {
	opts      MembershipOptions
	leases    coordclient.LeaseInterface
	lease     string                // the Lease's name
	id        string                // holderIdentity: member and instance
	mine      *coordinationv1.Lease // the copy last written; nil: read it again
	previous  *coordinationv1.Lease // the Lease as another instance left it (Previous)
	obs       observer              // the Leases' renewals as seen here
	renewedAt time.Time             // the local time of the last renewal answered
}

// NewMembership returns the membership of opts.Member in opts.Group,
// holding no Lease yet. Its holderIdentity is the member's name and a
// random instance id, so that two processes started with the same name
// tell their Leases apart. It returns an error for a missing name, a
// LeaseDuration under 1 s or a RenewInterval outside (0, LeaseDuration),
// and for a cfg client-go refuses.
func NewMembership(cfg *rest.Config, opts MembershipOptions) (*Membership, error) {
	if opts.Group == "" || opts.Member == "" || opts.Namespace == "" {
		return nil, fmt.Errorf("shards: membership: group %q, member %q, namespace %q: all are required", opts.Group, opts.Member, opts.Namespace)
	}
	if opts.LeaseDuration < time.Second || opts.RenewInterval <= 0 || opts.RenewInterval >= opts.LeaseDuration {
		return nil, fmt.Errorf("shards: membership: LeaseDuration %v, RenewInterval %v: want at least 1s and 0 < RenewInterval < LeaseDuration", opts.LeaseDuration, opts.RenewInterval)
	}
	if cfg == nil {
		return nil, errors.New("shards: membership: no rest.Config")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shards: membership: %w", err)
	}
	var inst [4]byte
	_, _ = rand.Read(inst[:])
	return &Membership{
		opts:   opts,
		leases: cs.CoordinationV1().Leases(opts.Namespace),
		lease:  opts.Group + "-" + opts.Member,
		id:     opts.Member + "_" + hex.EncodeToString(inst[:]),
	}, nil
}

// Renew creates the member's Lease, takes it over once expired, or renews
// it, with a on it, at the local time now. created reports that no Lease
// of the member existed (never created, or deleted as a dead member's by
// another): it is created then without a.Index, whose index chunks are
// presumed gone with it, even when the creation fails. It returns an
// error wrapping ErrLeaseHeld when another instance holds the Lease and
// renews it, and the request's error otherwise; each request is bounded
// by RenewInterval, at least 2 s, at most half the LeaseDuration.
func (m *Membership) Renew(ctx context.Context, now time.Time, a Announcement) (created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.requestTimeout())
	defer cancel()
	secs := int32(m.opts.LeaseDuration / time.Second)
	mt := metav1.NewMicroTime(now)
	fill := func(l *coordinationv1.Lease) {
		metav1.SetMetaDataLabel(&l.ObjectMeta, LabelGroup, m.opts.Group)
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationMember, m.opts.Member)
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationSelector, a.Selector)
		if a.Leaving {
			metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationLeaving, "true")
		} else {
			delete(l.Annotations, AnnotationLeaving)
		}
		for k, v := range a.Annotations {
			metav1.SetMetaDataAnnotation(&l.ObjectMeta, k, v)
		}
		if a.Index != "" {
			metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationIndex, a.Index)
		} else {
			delete(l.Annotations, AnnotationIndex)
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != m.id {
			l.Spec.AcquireTime = &mt
			if l.Spec.LeaseTransitions != nil {
				l.Spec.LeaseTransitions = ptr.To(*l.Spec.LeaseTransitions + 1)
			}
		}
		l.Spec.HolderIdentity = &m.id
		l.Spec.LeaseDurationSeconds = &secs
		l.Spec.RenewTime = &mt
	}
	var l *coordinationv1.Lease
	if m.mine != nil {
		l = m.mine.DeepCopy()
		fill(l)
		if l, err = m.leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			m.mine, m.renewedAt = l, now
			return false, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			// Not an answer about the Lease (a timeout, the context
			// ending): the copy stays, and so does what depends on it.
			return false, fmt.Errorf("shards: renew Lease %s: %w", m.lease, err)
		}
		m.mine = nil
	}
	l, err = m.leases.Get(ctx, m.lease, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		a.Index = ""
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.lease, Namespace: m.opts.Namespace}}
		l.Spec.LeaseTransitions = ptr.To[int32](0)
		fill(l)
		if l, err = m.leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return true, fmt.Errorf("shards: create Lease %s: %w", m.lease, err)
		}
		created = true
	case err != nil:
		return false, fmt.Errorf("shards: get Lease %s: %w", m.lease, err)
	default:
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		if h != "" && h != m.id && !m.obs.expired(l, now) {
			return false, fmt.Errorf("%w: %s holds %s", ErrLeaseHeld, h, m.lease)
		}
		var was *coordinationv1.Lease
		if h != "" && h != m.id && m.previous == nil {
			was = l.DeepCopy()
		}
		fill(l)
		if l, err = m.leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return false, fmt.Errorf("shards: update Lease %s: %w", m.lease, err)
		}
		if was != nil {
			m.previous = was // taken over: the Update that took it succeeded
		}
	}
	m.mine, m.renewedAt = l, now
	return created, nil
}

// Previous returns the member's Lease as another instance of it left it
// (a process restarted under the same name, taking over its expired
// Lease), read before this instance first wrote it; nil when no Renew of
// this instance took one over. The copy is shared: do not modify it.
func (m *Membership) Previous() *coordinationv1.Lease { return m.previous }

// Lapsed reports whether no renewal was answered within LeaseDuration
// before now (or none ever was): the others may have taken the member's
// Lease for expired, so what it holds is no longer its own.
func (m *Membership) Lapsed(now time.Time) bool {
	return m.renewedAt.IsZero() || now.Sub(m.renewedAt) >= m.opts.LeaseDuration
}

// holding reports whether this instance's last Lease request left it a
// copy of its Lease: a renewal answered, or one unanswered after it.
func (m *Membership) holding() bool { return m.mine != nil }

// requestTimeout bounds one Lease request: RenewInterval, at least 2 s
// (a loaded apiserver), at most half the LeaseDuration (a renewal must
// land before the Lease expires).
func (m *Membership) requestTimeout() time.Duration {
	return min(max(m.opts.RenewInterval, 2*time.Second), m.opts.LeaseDuration/2)
}

// View lists the group's Leases and returns what they show at the local
// time now (View's fields say how a member is judged). Leases without
// AnnotationMember (another kind in the group, such as index chunks) are
// skipped. The request is bounded as Renew's; its error is returned
// wrapped.
func (m *Membership) View(ctx context.Context, now time.Time) (View, error) {
	ctx, cancel := context.WithTimeout(ctx, m.requestTimeout())
	defer cancel()
	list, err := m.leases.List(ctx, metav1.ListOptions{LabelSelector: LabelGroup + "=" + m.opts.Group})
	if err != nil {
		return View{}, fmt.Errorf("shards: list Leases: %w", err)
	}
	v := View{Live: []string{m.opts.Member}, Selectors: map[string]string{}, Leases: map[string]*coordinationv1.Lease{}}
	names := map[string]bool{m.lease: true}
	for i := range list.Items {
		names[list.Items[i].Name] = true
	}
	m.obs.forget(names)
	for i := range list.Items {
		l := &list.Items[i]
		name := l.Annotations[AnnotationMember]
		if name == "" {
			continue
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" || m.obs.expired(l, now) {
			if name != m.opts.Member {
				v.Gone = append(v.Gone, l)
			}
			continue
		}
		if name != m.opts.Member && l.Annotations[AnnotationLeaving] == "true" {
			continue // neither in the split nor a holder to hand over to
		}
		if name != m.opts.Member {
			v.Live = append(v.Live, name)
			v.Leases[name] = l
		}
		if sel := l.Annotations[AnnotationSelector]; sel != "" {
			v.Selectors[name] = sel
		}
	}
	slices.Sort(v.Live)
	v.Live = slices.Compact(v.Live)
	return v, nil
}

// Release deletes the member's Lease if this instance holds it, so that
// the others take its range at their next renewal. It reads the Lease
// first (the last renewal may have landed although its answer did not)
// and deletes it with that copy's UID and resourceVersion as
// preconditions, again on a conflict, up to three times. It returns nil
// when the Lease is deleted or was not there, an error wrapping
// ErrLeaseHeld when another instance holds it now, and the request's
// error otherwise (the Lease then expires on its own).
func (m *Membership) Release(ctx context.Context) error {
	m.mine = nil
	var err error
	for range 3 {
		var l *coordinationv1.Lease
		if l, err = m.leases.Get(ctx, m.lease, metav1.GetOptions{}); err != nil {
			break
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != m.id {
			return fmt.Errorf("%w: %s holds %s", ErrLeaseHeld, h, m.lease)
		}
		uid, rv := l.UID, l.ResourceVersion
		err = m.leases.Delete(ctx, m.lease, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("shards: delete Lease %s: %w", m.lease, err)
	}
	return nil
}

// ErrLeaseChanged is returned by DeleteGone when the Lease changed since
// it was listed: its member renewed it (it is back), or another instance
// took it over.
var ErrLeaseChanged = errors.New("shards: the Lease changed since it was listed")

// DeleteGone deletes l, another member's Lease from View.Gone, with its
// UID and resourceVersion as preconditions, so that a renewal since the
// listing keeps it. The caller deletes only a Lease whose range the live
// members publish: once it is gone, no member takes that range over from
// it. It returns nil when the Lease is deleted or was not there, an error
// wrapping ErrLeaseChanged when it changed since l was read, and the
// request's error otherwise, wrapped; the request is bounded as Renew's.
func (m *Membership) DeleteGone(ctx context.Context, l *coordinationv1.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, m.requestTimeout())
	defer cancel()
	uid, rv := l.UID, l.ResourceVersion
	err := m.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %s", ErrLeaseChanged, l.Name)
	default:
		return fmt.Errorf("shards: delete Lease %s: %w", l.Name, err)
	}
}
