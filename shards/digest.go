package shards

// Takeover.
//
// Whoever takes a dead member's range over must learn what it held, or a
// key deleted while no journal watched it is never journaled DELETED: the
// survivor never had it. So every member publishes its
// index (key, UID, resourceVersion of each key its file holds) after its
// loop synced and whenever its journal moved, at most every IndexInterval,
// in Leases of the group's namespace: the format and the write order that
// keeps a reader's snapshot consistent follow "Takeover".
//
// A member whose range grows into a dead member's published range (the
// dead member's Lease is expired, not leaving, and no live member holds
// that part) reads that index, for the part it takes (the newest index
// where two overlap, by their Leases' resourceVersions), and its first list
// at the grown range diffs against it (reconcile.Options.Inherited): a key
// the dead member held as listed is journaled ADDED, reason moved; one
// listed at another resourceVersion MODIFIED; one no longer listed DELETED
// (the reason asked of the server, gone for a deleted object); one listed
// that it did not hold ADDED without a reason. Once the live members'
// published ranges cover the dead member's, any of them deletes its Lease
// and its index. A member that stops with LeaveTimeout negative while
// others are live publishes its final index and leaves its Lease to expire,
// so its range is taken over the same way; one that leaves cleanly, or
// alone, deletes its Lease and index.
//
// Exactness rests on the index being current when the member died: what
// it journaled after its last publication is journaled again by the new
// owner (a MODIFIED or DELETED twice, in two journals), and a key it added
// after that publication and that is deleted before the takeover is never
// journaled DELETED. IndexInterval (default RenewInterval) bounds that
// window; a publication scans the whole index (one read transaction) and
// writes the chunks that changed.
//
// A member that comes back on its old file after others took (part of)
// its range over hands that part back at once: its keys there are
// journaled DELETED, reason moved, and its next list brings them back as
// ADDED, moved; so it does not journal again the changes the others
// journaled while it was away. A member that had handed its range over on
// leaving does the same when it comes back: it lists its range instead of
// resuming its watch.
//
// The index (key, UID, resourceVersion of every key the member's file
// holds) is cut into chunks by the FNV-1a hash of the key, so that each
// holds at most chunkBytes once compressed, and every chunk is one Lease,
// <group>-<member>-idx-<16 hex digits of the chunk's SHA-256>, labelled
// LabelIndexGroup=<group> and LabelIndexOf=<member>, whose annotation
// AnnotationIndexData holds the chunk: base64 of gzip'd lines
// "<key> <uid> <resourceVersion>\n". Leases, not ConfigMaps: the group
// needs no other permission than the Leases it holds already, and a
// member that journals the ConfigMaps of its own namespace does not
// journal its index (a Lease's annotations may hold 256 KiB). The chunks
// carry no LabelGroup, so that view does not read them.
//
// Chunks are named by their content, so they are written once and never
// changed: a republication creates the chunks that changed, then renews
// the member's Lease with a new manifest (AnnotationIndex: the range, the
// journal's head offset, the number of keys, the chunk names), and only
// then deletes the chunks the manifest no longer names. A reader that
// follows the manifest on a Lease reads one consistent snapshot, whenever
// the writer died.
//
// When a member republishes, and what a takeover misses: "Takeover",
// above. A publication takes at most a tenth of the time (indexDuty)
// and holds the index's entries in memory, some 100 bytes each; so does
// the taker, for the part it takes, for its loop's life
// (reconcile.Inheritance).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// indexDuty bounds the time a member spends publishing its index: the
// next publication waits at least indexDuty times as long as the last one
// took (a tenth of the time, at most): a large index takes seconds to
// encode.
const indexDuty = 10

// chunkBytes bounds a chunk's compressed size: with base64 (4/3) some
// 170 KiB of annotation, under the 256 KiB a Lease's annotations may hold.
// About 3,000 entries at some 40 compressed bytes each.
const chunkBytes = 128 << 10

// manifest is a member's published index, on its Lease (AnnotationIndex).
type manifest struct {
	// Range is the range the index holds, a KEP-5866 selector.
	Range string `json:"range"`
	// Head is the journal's last offset the index reflects.
	Head uint64 `json:"head"`
	// Keys is the number of entries.
	Keys int `json:"keys"`
	// Chunks names the Leases that hold the entries.
	Chunks []string `json:"chunks"`
}

func (mf *manifest) encode() string {
	if mf == nil {
		return ""
	}
	b, _ := json.Marshal(mf)
	return string(b)
}

// manifestOf returns the manifest l carries, nil when none or unreadable.
func manifestOf(l *coordinationv1.Lease) *manifest {
	s := l.Annotations[AnnotationIndex]
	if s == "" {
		return nil
	}
	var mf manifest
	if json.Unmarshal([]byte(s), &mf) != nil {
		return nil
	}
	return &mf
}

// chunk is one encoded chunk.
type chunk struct {
	name string
	data []byte // gzip'd lines
}

// encodeChunks cuts entries (sorted by key) into chunks by key hash, as
// few as keep each under chunkBytes; each chunk keeps key order. Empty
// chunks are left out.
func encodeChunks(prefix string, entries []journal.IndexEntry) ([]chunk, error) {
	// Start from some 40 compressed bytes an entry (more than ConfigMaps
	// with 36-byte UIDs take), so that one pass does in most cases.
	n := 1
	for n*chunkBytes < len(entries)*40 {
		n *= 2
	}
	for ; ; n *= 2 {
		out, fits, err := encodeChunksN(prefix, entries, n)
		if err != nil || fits || n >= len(entries) {
			return out, err
		}
	}
}

// encodeChunksN cuts entries into n chunks (n a power of two) and reports
// whether all fit in chunkBytes.
func encodeChunksN(prefix string, entries []journal.IndexEntry, n int) ([]chunk, bool, error) {
	lines := make([]bytes.Buffer, n)
	for _, e := range entries {
		h := fnv.New32a()
		_, _ = h.Write([]byte(e.Key))
		b := &lines[int(h.Sum32())&(n-1)]
		fmt.Fprintf(b, "%s %s %s\n", e.Key, e.UID, e.ResourceVersion)
	}
	var out []chunk
	fits := true
	for i := range lines {
		if lines[i].Len() == 0 {
			continue
		}
		sum := sha256.Sum256(lines[i].Bytes())
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		if _, err := w.Write(lines[i].Bytes()); err != nil {
			return nil, false, err
		}
		if err := w.Close(); err != nil {
			return nil, false, err
		}
		fits = fits && z.Len() <= chunkBytes
		out = append(out, chunk{name: fmt.Sprintf("%s-idx-%x", prefix, sum[:8]), data: z.Bytes()})
	}
	return out, fits, nil
}

// decodeChunk returns the entries of a chunk whose UID hashes into in.
func decodeChunk(data []byte, in hashrange.Set) ([]journal.IndexEntry, error) {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var out []journal.IndexEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed line %q", sc.Text())
		}
		if in.ContainsUID(f[1]) {
			out = append(out, journal.IndexEntry{Key: f[0], UID: f[1], ResourceVersion: f[2]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, r)
	return out, err
}

// publishIndex republishes the member's index if its journal moved since
// the last publication (or the range changed): it writes the chunks that
// changed, renews the Lease with the new manifest and deletes the chunks
// no manifest names. Called with the loop synced at the range pub.
func (m *Member) publishIndex(ctx context.Context, pub hashrange.Set) error {
	if m.opts.IndexInterval < 0 {
		return nil
	}
	head, err := m.j.Head()
	if err != nil {
		return err
	}
	if old := m.index; old != nil && old.Head == head && old.Range == pub.Selector() {
		return nil
	}
	if !m.indexAt.IsZero() && time.Since(m.indexAt) < max(m.opts.IndexInterval, indexDuty*m.indexTook) {
		return nil
	}
	start := time.Now()
	var entries []journal.IndexEntry
	own := m.ownChunks()
	if head, err = m.j.Snapshot(func(e journal.IndexEntry) error {
		if !own(e.Key) {
			entries = append(entries, e)
		}
		return nil
	}); err != nil {
		return err
	}
	chunks, err := encodeChunks(m.lease, entries)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.requestTimeout()*time.Duration(1+len(chunks)/8))
	defer cancel()
	mf := &manifest{Range: pub.Selector(), Head: head, Keys: len(entries)}
	for _, c := range chunks {
		mf.Chunks = append(mf.Chunks, c.name)
		if m.index != nil && slices.Contains(m.index.Chunks, c.name) {
			continue // published already: a chunk's name is its content's hash
		}
		cl := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: m.opts.Namespace,
			Labels:      map[string]string{LabelIndexGroup: m.opts.Group, LabelIndexOf: m.opts.Member},
			Annotations: map[string]string{AnnotationIndexData: base64.StdEncoding.EncodeToString(c.data)}}}
		if _, err := m.leases.Create(ctx, cl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("shards: publish index chunk %s: %w", c.name, err)
		}
	}
	prev := m.index
	m.index = mf
	if err := m.renew(ctx, time.Now()); err != nil {
		m.index = prev
		return err
	}
	m.indexAt = time.Now()
	m.indexTook = m.indexAt.Sub(start)
	return m.deleteChunks(ctx, m.opts.Member, mf.Chunks)
}

// ownChunks returns whether a key is one of the group's index chunks, for
// a member that journals the Leases of the group's namespace: its index
// leaves them out, or each publication would change the index it
// publishes, and publish again.
func (m *Member) ownChunks() func(key string) bool {
	if gvr := m.res.GVR; gvr.Group != "coordination.k8s.io" || gvr.Resource != "leases" {
		return func(string) bool { return false }
	}
	prefix := m.opts.Namespace + "/" + m.opts.Group + "-"
	return func(key string) bool { return strings.HasPrefix(key, prefix) && strings.Contains(key, "-idx-") }
}

// deleteChunks deletes the index chunks of member that keep does not name.
func (m *Member) deleteChunks(ctx context.Context, member string, keep []string) error {
	list, err := m.leases.List(ctx, metav1.ListOptions{LabelSelector: LabelIndexGroup + "=" + m.opts.Group + "," + LabelIndexOf + "=" + member})
	if err != nil {
		return fmt.Errorf("shards: list index chunks: %w", err)
	}
	for _, cl := range list.Items {
		if slices.Contains(keep, cl.Name) {
			continue
		}
		if err := m.leases.Delete(ctx, cl.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("shards: delete index chunk %s: %w", cl.Name, err)
		}
	}
	return nil
}

// dead is the Lease of a member that is not live, as view last saw it.
type dead struct {
	member string
	lease  *coordinationv1.Lease
	index  *manifest
}

// newerFirst orders dead members' Leases by their last write, newest first:
// their resourceVersions, compared as the API allows (CompareResourceVersion;
// by name when it refuses). The holders' clocks are not compared.
func newerFirst(a, b dead) int {
	if c, err := resourceversion.CompareResourceVersion(a.lease.ResourceVersion, b.lease.ResourceVersion); err == nil && c != 0 {
		return -c
	}
	return strings.Compare(a.member, b.member)
}

// inheritance reads what dead members held of the journal's pending range
// that no live member holds (others): the newest index first for a hash
// that several cover. Nil when nothing is pending, when a list has
// committed since the range grew (the journal's resourceVersion is set),
// or when no dead member published an index there. A chunk that cannot be
// found (deleted by hand) leaves its member's part uninherited, logged.
func (m *Member) inheritance(ctx context.Context, gone []dead, others hashrange.Set) (*reconcile.Inheritance, error) {
	sel, err := m.j.Writer().ShardPending()
	if err != nil || sel == "" {
		return nil, err
	}
	pending, err := hashrange.ParseOrEmpty(sel)
	if err != nil {
		return nil, err
	}
	if rv, err := m.j.ResourceVersion(); err != nil || rv != "" {
		return nil, err
	}
	gone = slices.Clone(gone)
	slices.SortFunc(gone, newerFirst)
	var in reconcile.Inheritance
	var rng hashrange.Set // in.Range
	for _, d := range gone {
		if d.index == nil {
			continue
		}
		had, err := hashrange.Parse(d.index.Range)
		if err != nil {
			continue
		}
		part := had.Intersect(pending).Minus(others).Minus(rng)
		if part.Empty() {
			continue
		}
		entries, err := m.readIndex(ctx, d.index, part)
		if apierrors.IsNotFound(err) {
			m.log.Info("a dead member's index is incomplete: its range is taken over without it", "dead", d.member, "error", err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("shards: read the index of %s: %w", d.member, err)
		}
		in.Entries = append(in.Entries, entries...)
		rng = rng.Union(part)
		m.log.Info("taking over a dead member's range with its index", "dead", d.member, "keys", len(entries),
			"share", fmt.Sprintf("%.1f%%", 100*part.Share()))
	}
	if rng.Empty() {
		return nil, nil
	}
	in.Range = rng.Selector()
	slices.SortStableFunc(in.Entries, func(a, b journal.IndexEntry) int { return strings.Compare(a.Key, b.Key) })
	in.Entries = slices.CompactFunc(in.Entries, func(a, b journal.IndexEntry) bool { return a.Key == b.Key })
	return &in, nil
}

// readIndex reads a manifest's chunks and returns the entries in part.
func (m *Member) readIndex(ctx context.Context, mf *manifest, part hashrange.Set) ([]journal.IndexEntry, error) {
	var out []journal.IndexEntry
	for _, name := range mf.Chunks {
		rctx, cancel := context.WithTimeout(ctx, m.requestTimeout())
		cl, err := m.leases.Get(rctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return nil, err
		}
		data, err := base64.StdEncoding.DecodeString(cl.Annotations[AnnotationIndexData])
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", name, err)
		}
		es, err := decodeChunk(data, part)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", name, err)
		}
		out = append(out, es...)
	}
	return out, nil
}

// collect deletes the index and the Lease of dead members whose published
// range the live members' published ranges (held) cover: their lists at
// the grown ranges have committed, so no one needs the index any more.
func (m *Member) collect(ctx context.Context, gone []dead, held map[string]hashrange.Set) {
	var all hashrange.Set
	for _, s := range held {
		all = all.Union(s)
	}
	for _, d := range gone {
		had, err := hashrange.Parse(d.lease.Annotations[AnnotationSelector])
		if err != nil || (!had.Empty() && !all.Covers(had)) {
			continue
		}
		if d.index != nil {
			if r, err := hashrange.Parse(d.index.Range); err != nil || !all.Covers(r) {
				continue
			}
		}
		// The Lease first, as last seen: if the member renewed it since,
		// it is back, and keeps its index.
		err = m.ms.DeleteGone(ctx, d.lease)
		if errors.Is(err, ErrLeaseChanged) {
			continue
		}
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, m.requestTimeout())
			err = m.deleteChunks(cctx, d.member, nil)
			cancel()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			m.log.Info("could not delete a dead member's index", "dead", d.member, "error", err.Error())
			continue
		}
		m.log.Info("deleted a dead member's Lease and index: the live members hold its range", "dead", d.member)
	}
}
