// Package schemafile writes and reads back the journal files kept in
// testdata/journal: one small file per released schema version
// (journal/bolt.SchemaVersion), written once by the code of that version and
// committed, so that every later build is tested against the files real
// users have on disk (journal/schemafiles_test.go). A file from any
// released version must open with today's code and read back exactly what
// it held (or be migrated on a writable open and then read back the same),
// and a file claiming a newer schema must fail with journal.ErrNewerSchema.
//
// Write puts into a file what a long-running journal accumulates: events of
// every type, origin and reason (a name recreated with a new UID included),
// kept objects (since schema 2, a trimmed one among them; since schema 4,
// the watch events' objects in Kubernetes protobuf, as package reconcile
// stores them),
// retention settings, retention trimming (the first retained offset is not
// 1), two durable consumers, a resource with a namespace and label and field
// selectors, and the last synced resourceVersion. Dump reads all of it back
// through the public API, in a form that is written next to the file as
// JSON (v<N>.json) and compared exactly.
//
// To add the file of a new schema version: go run ./internal/testing/schemafile/write
// (see testdata/README.md).
package schemafile

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/journal"
)

// Resource is the resource the fixture file records: namespaced, with label
// and field selectors in canonical form.
var Resource = journal.Resource{
	GVR:           schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	Namespace:     "wj",
	LabelSelector: "app=web,tier in (a,b)",
	FieldSelector: "metadata.name!=skip",
}

// Retention is the retention the fixture file records.
var Retention = journal.Retention{MaxEvents: 100, MaxBytes: 1 << 20, MaxAge: 24 * time.Hour, HardMaxBytes: 8 << 20}

// base is the time of the first fixture event; the others follow a second
// apart.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func obj(name, uid, rv, v string) []byte {
	return []byte(fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"wj","uid":%q,"resourceVersion":%q,"labels":{"app":"web","tier":"a"},"annotations":{"note":"ünïcode 日本"}},"data":{"v":%q}}`, name, uid, rv, v))
}

// pbObj is obj in Kubernetes protobuf ("k8s\x00" and a runtime.Unknown),
// as a protobuf watch delivers it and package reconcile stores it (since
// schema 4).
func pbObj(name, uid, rv, v string) []byte {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "wj", UID: types.UID(uid), ResourceVersion: rv,
			Labels: map[string]string{"app": "web", "tier": "a"}, Annotations: map[string]string{"note": "ünïcode 日本"}},
		Data: map[string]string{"v": v},
	}
	raw, err := cm.Marshal()
	if err != nil {
		panic(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		panic(err)
	}
	return append([]byte("k8s\x00"), b...)
}

// batches are the fixture's write transactions: the events of each and the
// resourceVersion it records.
var batches = []struct {
	rv     string
	events []journal.Event
}{
	{"10", []journal.Event{
		{Type: journal.Added, Key: "wj/a", UID: "uid-a1", ResourceVersion: "8", Origin: journal.OriginRelist, Object: obj("a", "uid-a1", "8", "0")},
		// Since schema 2: d never changes, so trimming removes its only
		// event, which is its latest object (kept in the objects bucket).
		{Type: journal.Added, Key: "wj/d", UID: "uid-d1", ResourceVersion: "7", Origin: journal.OriginRelist, Object: obj("d", "uid-d1", "7", "0")},
		{Type: journal.Added, Key: "wj/b", UID: "uid-b1", ResourceVersion: "9", Origin: journal.OriginRelist, Object: obj("b", "uid-b1", "9", "0")},
	}},
	{"11", []journal.Event{
		{Type: journal.Modified, Key: "wj/a", UID: "uid-a1", ResourceVersion: "11", PrevResourceVersion: "8", Origin: journal.OriginWatch, Object: pbObj("a", "uid-a1", "11", "1")},
	}},
	{"12", []journal.Event{
		{Type: journal.Deleted, Key: "wj/b", UID: "uid-b1", ResourceVersion: "12", Origin: journal.OriginWatch, Object: pbObj("b", "uid-b1", "12", "0")},
	}},
	{"13", []journal.Event{
		{Type: journal.Added, Key: "wj/c", UID: "uid-c1", ResourceVersion: "13", Origin: journal.OriginWatch, Object: pbObj("c", "uid-c1", "13", "0")},
	}},
	// A relist after a 410: b came back with a new UID, a changed, c gone.
	{"20", []journal.Event{
		{Type: journal.Modified, Key: "wj/a", UID: "uid-a1", ResourceVersion: "18", PrevResourceVersion: "11", Origin: journal.OriginRelist, Object: obj("a", "uid-a1", "18", "2")},
		{Type: journal.Added, Key: "wj/b", UID: "uid-b2", ResourceVersion: "17", Origin: journal.OriginRelist, Object: obj("b", "uid-b2", "17", "0")},
		{Type: journal.Deleted, Key: "wj/c", UID: "uid-c1", ResourceVersion: "13", Origin: journal.OriginRelist},
	}},
	// A restart's relist: the name c recreated.
	{"25", []journal.Event{
		{Type: journal.Added, Key: "wj/c", UID: "uid-c2", ResourceVersion: "24", Origin: journal.OriginRestart, Object: obj("c", "uid-c2", "24", "0")},
	}},
	{"26", []journal.Event{
		{Type: journal.Deleted, Key: "wj/b", UID: "uid-b2", ResourceVersion: "26", Origin: journal.OriginWatch, Object: pbObj("b", "uid-b2", "26", "0")},
		{Type: journal.Added, Key: "wj/b", UID: "uid-b3", ResourceVersion: "26", Origin: journal.OriginWatch, Object: pbObj("b", "uid-b3", "26", "1")},
	}},
	// Reasons (schema 2): a moves out of the selector and back, b is
	// deleted, c's relist delete could not be confirmed, then c arrives
	// from another shard.
	{"30", []journal.Event{
		{Type: journal.Deleted, Key: "wj/a", UID: "uid-a1", ResourceVersion: "30", Origin: journal.OriginWatch, Reason: journal.ReasonLeftSelector, Object: pbObj("a", "uid-a1", "30", "2")},
	}},
	{"31", []journal.Event{
		{Type: journal.Added, Key: "wj/a", UID: "uid-a1", ResourceVersion: "31", Origin: journal.OriginWatch, Object: pbObj("a", "uid-a1", "31", "2")},
		{Type: journal.Deleted, Key: "wj/b", UID: "uid-b3", ResourceVersion: "31", Origin: journal.OriginWatch, Reason: journal.ReasonGone, Object: pbObj("b", "uid-b3", "31", "1")},
	}},
	{"35", []journal.Event{
		{Type: journal.Deleted, Key: "wj/c", UID: "uid-c2", ResourceVersion: "24", Origin: journal.OriginRelist, Reason: journal.ReasonUnconfirmed},
	}},
	{"36", []journal.Event{
		{Type: journal.Added, Key: "wj/c", UID: "uid-c2", ResourceVersion: "24", Origin: journal.OriginRelist, Reason: journal.ReasonMoved, Object: obj("c", "uid-c2", "24", "0")},
	}},
}

// Consumer names and what they commit in the fixture.
const (
	// ConsumerOps commits offset CommittedOps.
	ConsumerOps  = "ops"
	CommittedOps = 6
	// ConsumerLate registers after trimming and commits nothing: its
	// committed offset is the first retained one less one.
	ConsumerLate = "late"
	// TrimBefore is the first offset retention trimming keeps.
	TrimBefore = 3
)

// Write creates the fixture file at path with today's code. path must not
// exist.
func Write(path string) (err error) {
	r := Resource
	j, err := journal.Open(path, &journal.Options{Resource: &r})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := j.Close(); err == nil {
			err = cerr
		}
	}()
	if st, err := j.Stats(); err != nil || st.LastOffset != 0 {
		return fmt.Errorf("schemafile: %s is not a new file (%v)", path, err)
	}
	if err := j.Settings().SetRetention(Retention); err != nil {
		return err
	}
	if err := j.Settings().KeepObjects(); err != nil { // since schema 2
		return err
	}
	i := 0
	for _, b := range batches {
		if err := j.Writer().Update(func(tx *journal.Tx) error {
			for _, e := range b.events {
				e.Time = base.Add(time.Duration(i) * time.Second)
				i++
				if _, err := tx.Append(&e); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion(b.rv)
		}); err != nil {
			return err
		}
	}
	if _, err := j.Consumers().Open(ConsumerOps); err != nil {
		return err
	}
	if err := j.Consumers().Commit(ConsumerOps, CommittedOps); err != nil {
		return err
	}
	if n, _, err := j.Writer().Trim(TrimBefore, 100, 0, 0); err != nil || n != TrimBefore-1 {
		return fmt.Errorf("schemafile: trim: %d events, %v", n, err)
	}
	_, err = j.Consumers().Open(ConsumerLate)
	return err
}

// Content is everything a journal file holds that its users can read.
type Content struct {
	Resource        journal.Resource
	ResourceVersion string
	Retention       journal.Retention
	FirstOffset     uint64
	LastOffset      uint64
	Head            uint64
	Objects         uint64
	JournalBytes    uint64
	Events          []Event
	Index           []journal.IndexEntry
	Consumers       []journal.ConsumerInfo
	// LatestObjects is every live key's object (Journal.ViewObjects), in
	// key order; empty for a file that does not keep objects (schema 1's).
	LatestObjects []Object `json:",omitempty"`
}

// Object is a live key's latest object, in JSON (journal.ObjectJSON), as a
// string for readable JSON.
type Object struct {
	Key    string
	Object string
}

// Event is a journal.Event with the object in JSON (journal.ObjectJSON) as
// a string, for readable JSON.
type Event struct {
	Offset              uint64
	Type                journal.EventType
	Key                 string
	UID                 string
	ResourceVersion     string
	PrevResourceVersion string `json:",omitempty"`
	Origin              journal.Origin
	Reason              journal.Reason `json:",omitempty"`
	PrevOffset          uint64         `json:",omitempty"` // schema 3 on
	Time                time.Time
	Object              string `json:",omitempty"`
}

// Dump reads everything from j through the public API.
func Dump(j *journal.Journal) (Content, error) {
	var c Content
	st, err := j.Stats()
	if err != nil {
		return c, err
	}
	c.Resource, c.ResourceVersion = st.Resource, st.ResourceVersion
	c.FirstOffset, c.LastOffset, c.Objects, c.JournalBytes = st.FirstOffset, st.LastOffset, st.Objects, st.JournalBytes
	if c.Head, err = j.Head(); err != nil {
		return c, err
	}
	if c.Retention, err = j.Settings().Retention(); err != nil {
		return c, err
	}
	for from := uint64(0); ; {
		evs, err := j.Read(from, 100)
		if err != nil {
			return c, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			// Objects as JSON (journal.ObjectJSON: JSON as it is,
			// protobuf converted), so that the .json stays readable.
			if e.Object, err = journal.ObjectJSON(e.Object); err != nil {
				return c, err
			}
			c.Events = append(c.Events, Event{Offset: e.Offset, Type: e.Type, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion,
				PrevResourceVersion: e.PrevResourceVersion, Origin: e.Origin, Reason: e.Reason, PrevOffset: e.PrevOffset,
				Time: e.Time.UTC(), Object: string(e.Object)})
		}
		from = evs[len(evs)-1].Offset + 1
	}
	if _, err := j.Snapshot(func(e journal.IndexEntry) error { c.Index = append(c.Index, e); return nil }); err != nil {
		return c, err
	}
	if c.Consumers, err = j.Consumers().List(); err != nil {
		return c, err
	}
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Scan("", func(k string, o []byte) (bool, error) {
			o, err := journal.ObjectJSON(o)
			if err != nil {
				return false, err
			}
			c.LatestObjects = append(c.LatestObjects, Object{Key: k, Object: string(o)})
			return true, nil
		})
	})
	if errors.Is(err, journal.ErrObjectsNotKept) {
		err = nil
	}
	return c, err
}
