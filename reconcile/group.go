package reconcile

// Several resources in one process. An operator watches
// a handful of kinds; a Group keeps one journal per resource, each in its
// own file in one directory, and runs their Loops under one lifecycle: one
// Run, one HasSynced and WaitForSync for all, one Status per resource.
//
// One file per resource, not one file with several streams: a journal's
// guarantees are per file (index, journal and resourceVersion change in
// one bbolt transaction; one writer, held by bbolt's file lock), and so
// stay exactly as package journal states them, with no transaction shared
// by resources whose watches are independent. A 410 of one resource
// relists that resource alone and rewrites none of the others' pages;
// retention, consumers, the offline file check and the file rewrite
// (journalctl compact) work per file, as for a lone journal; and
// journalctl's per-file commands (events, index, stats, verify, relist
// --db FILE) read a Group's files unchanged. The cost is one file lock and one fsync per
// resource's commit, which for a handful of kinds is nothing.
//
// Files are named after their resource's GVR (FileName), so a directory
// holds at most one journal per GVR; the same GVR in two namespaces takes
// two directories.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// FileName returns the name of gvr's journal file in a Group's directory:
// resource.version[.group].db, e.g. "configmaps.v1.db" or
// "deployments.v1.apps.db" (the form journal.Resource.String prints).
func FileName(gvr schema.GroupVersionResource) string {
	s := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		s += "." + gvr.Group
	}
	return s + ".db"
}

// GroupOptions configure OpenGroup.
type GroupOptions struct {
	// Loop configures every file's Loop (New).
	Loop Options
	// Journal configures every file's journal.Open; its Resource is
	// ignored: each file records its own.
	Journal journal.Options
}

// GroupFile is one resource of a Group: its journal file, open for the
// Group's life, and the Loop that writes it. Consumers read Journal as
// any journal (Read, Wait, Consumer); Loop gives Status, Verify and the
// file's own WaitForSync. (A shard group's replica is shards.Member.)
type GroupFile struct {
	// Resource is the resource the file records.
	Resource journal.Resource
	// Path is the file's path: the Group's directory joined with
	// FileName(Resource.GVR).
	Path    string
	Journal *journal.Journal
	Loop    *Loop
}

// ResourceStatus is one Group file's Status, with the resource it
// describes.
type ResourceStatus struct {
	Resource journal.Resource
	Status
}

// Group keeps several resources in step, one journal file each in one
// directory, under one lifecycle. Create it with OpenGroup, run it with
// Run, and Close it after Run has returned. Its methods are safe for
// concurrent use.
type Group struct {
	files []GroupFile
}

// OpenGroup opens (creating as needed) one journal file per resource in
// dir, named FileName(resource's GVR), and a Loop for each (New). The
// resources' GVRs must differ. On any error it closes what it opened,
// removes the files it created, and returns the error: journal.Open's
// (ErrLocked for a file another writer holds, ErrResourceMismatch for a
// file that records another namespace or selector) or New's (an
// *UnknownResourceError for a resource discovery does not serve, with
// the resource named in the message).
func OpenGroup(cfg *rest.Config, dir string, resources []journal.Resource, opts GroupOptions) (*Group, error) {
	if len(resources) == 0 {
		return nil, errors.New("reconcile: OpenGroup: no resource")
	}
	seen := map[schema.GroupVersionResource]bool{}
	for _, r := range resources {
		if seen[r.GVR] {
			return nil, fmt.Errorf("reconcile: OpenGroup: %s given twice: a directory holds one journal per resource", r.GVR)
		}
		seen[r.GVR] = true
	}
	g := &Group{}
	var created []string
	fail := func(err error) (*Group, error) {
		_ = g.Close()
		for _, p := range created {
			_ = os.Remove(p)
		}
		return nil, err
	}
	for _, r := range resources {
		path := filepath.Join(dir, FileName(r.GVR))
		_, serr := os.Stat(path)
		jopts := opts.Journal
		jopts.Resource = &r
		j, err := journal.Open(path, &jopts)
		if err != nil {
			return fail(fmt.Errorf("reconcile: %s: %w", path, err))
		}
		if errors.Is(serr, fs.ErrNotExist) {
			created = append(created, path)
		}
		g.files = append(g.files, GroupFile{Resource: r, Path: path, Journal: j})
		l, err := New(cfg, j, opts.Loop)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", r, err))
		}
		g.files[len(g.files)-1].Loop = l
		if got, _, err := j.Resource(); err == nil {
			g.files[len(g.files)-1].Resource = got // with the kind New recorded
		}
	}
	return g, nil
}

// Files returns the group's files, in the order OpenGroup was given their
// resources.
func (g *Group) Files() []GroupFile { return append([]GroupFile(nil), g.files...) }

// Run runs every file's Loop until ctx is done, then returns nil once
// all have returned. When one Loop's Run returns an error (ErrJournal,
// ErrRejected), Run stops the others and returns the errors, each prefixed
// with its resource (errors.Is matches them). It is a whole group's
// lifecycle, as a controller-runtime manager's: one Loop that cannot go on
// stops the group. Run is called once.
func (g *Group) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(g.files))
	var wg sync.WaitGroup
	for i, m := range g.files {
		wg.Go(func() { // exits when its Loop's Run returns: ctx done, or its error
			if err := m.Loop.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", m.Resource, err)
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// HasSynced reports whether every file's Loop has synced
// (Loop.HasSynced): the shape of client-go's cache.InformerSynced.
func (g *Group) HasSynced() bool {
	for _, m := range g.files {
		if !m.Loop.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until every file's Loop has synced (nil), ctx is done
// (ctx.Err()), or a Loop's Run has returned before it synced: then it
// returns their errors (Loop.WaitForSync's: ErrJournal, ErrRejected,
// ErrStopped), each prefixed with its resource.
func (g *Group) WaitForSync(ctx context.Context) error {
	var errs []error
	for _, m := range g.files {
		if err := m.Loop.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("%s: %w", m.Resource, err))
		}
	}
	return errors.Join(errs...)
}

// Status returns each file's Status, in the order of Files.
func (g *Group) Status() []ResourceStatus {
	out := make([]ResourceStatus, len(g.files))
	for i, m := range g.files {
		out[i] = ResourceStatus{Resource: m.Resource, Status: m.Loop.Status()}
	}
	return out
}

// Close closes every file's journal; call it after Run has returned.
func (g *Group) Close() error {
	var errs []error
	for _, m := range g.files {
		if err := m.Journal.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Path, err))
		}
	}
	return errors.Join(errs...)
}
