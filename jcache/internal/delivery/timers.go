package delivery

// Timers: the RequeueAfter timers a controller has pending, kept in a small
// file so that a restart re-arms them.
//
// A reconcile that returns (Result{RequeueAfter: d}, nil) completes its
// events (the commit may pass them: Completes), so the timer is the only
// memory of "look again at t". It is recorded (Set) when the reconcile
// returns, and written (Save) by the committer before each commit: the
// file holds the timer of every request whose events a commit passed
// (changes without a commit are written every timersSaveInterval, 10 s). At
// start the sources re-arm each stored timer (AddAfter(due - now), at once
// when due). A reconcile that completes without RequeueAfter clears its
// key's timer; an error or Requeue leaves it as it was.
//
// The file is JSON, replaced whole (a temporary file, fsync, rename, fsync
// of the directory), so a crash leaves the old or the new version.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Timers are a controller's durable RequeueAfter timers (see the top of
// the file). Safe for concurrent use.
type Timers struct {
	path string

	mu    sync.Mutex
	due   map[reconcile.Request]time.Time
	dirty bool
}

type timerFile struct {
	Version int          `json:"version"`
	Timers  []timerEntry `json:"timers"`
}

type timerEntry struct {
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	Due       time.Time `json:"due"`
}

// timersFix is what an unreadable timers file's error tells the operator.
const timersFix = "the file is replaced atomically, so only a disk fault or a hand edit breaks it; " +
	"removing it starts without the stored timers: keys waiting on a RequeueAfter are then reconciled again only when they change"

// LoadTimers reads the timers file at path; a missing file holds no
// timers. An unreadable file's error says what removing it costs; the
// timers returned with it hold none (EmptyTimers).
func LoadTimers(path string) (*Timers, error) {
	t := EmptyTimers(path)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("requeue timers: %w", err)
	}
	var f timerFile
	if err := json.Unmarshal(b, &f); err != nil {
		return t, fmt.Errorf("requeue timers %s: %w (%s)", path, err, timersFix)
	}
	if f.Version != 1 {
		return t, fmt.Errorf("requeue timers %s: version %d, want 1 (%s)", path, f.Version, timersFix)
	}
	for _, e := range f.Timers {
		t.due[reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Namespace, Name: e.Name}}] = e.Due
	}
	return t, nil
}

// EmptyTimers returns timers without any, saved to path.
func EmptyTimers(path string) *Timers {
	return &Timers{path: path, due: map[reconcile.Request]time.Time{}}
}

// Path returns the timers file.
func (t *Timers) Path() string { return t.path }

// Set records that req is to be reconciled again at due.
func (t *Timers) Set(req reconcile.Request, due time.Time) {
	t.mu.Lock()
	t.due[req] = due
	t.dirty = true
	t.mu.Unlock()
}

// Clear forgets req's timer.
func (t *Timers) Clear(req reconcile.Request) {
	t.mu.Lock()
	if _, ok := t.due[req]; ok {
		delete(t.due, req)
		t.dirty = true
	}
	t.mu.Unlock()
}

// Pending returns a copy of the timers.
func (t *Timers) Pending() map[reconcile.Request]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.due)
}

// Rearm adds every timer to add: after due - now, or at once when due.
func (t *Timers) Rearm(now time.Time, add func(req reconcile.Request, after time.Duration)) {
	for req, due := range t.Pending() {
		add(req, max(due.Sub(now), 0))
	}
}

// Save writes the timers when they changed since the last Save.
func (t *Timers) Save() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil
	}
	f := timerFile{Version: 1, Timers: make([]timerEntry, 0, len(t.due))}
	for req, due := range t.due {
		f.Timers = append(f.Timers, timerEntry{Namespace: req.Namespace, Name: req.Name, Due: due.UTC()})
	}
	slices.SortFunc(f.Timers, func(a, b timerEntry) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(t.path, b); err != nil {
		return fmt.Errorf("requeue timers: %w", err)
	}
	t.dirty = false
	return nil
}

// writeFileAtomic replaces path with b: a temporary file beside it,
// fsynced, renamed over it, and the directory fsynced.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename, no such file
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
