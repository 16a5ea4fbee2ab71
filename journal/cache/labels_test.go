package cache

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/watchjournal/watchjournal/journal"
)

// A LabelSet read from a stored object answers as its labels do, a
// selector matches it as it matches them, a later Read replaces them,
// and an object that does not parse leaves it empty.
func TestLabelSet_Read(t *testing.T) {
	var s LabelSet
	if err := s.Read([]byte(`{"kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"web","tier":"front"}},"data":{"app":"db"}}`)); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Lookup("app"); !ok || v != "web" || !s.Has("tier") || s.Has("name") || s.Get("none") != "" {
		t.Errorf("Lookup(app) = %q, %v; Has(tier) = %v; Has(name) = %v", v, ok, s.Has("tier"), s.Has("name"))
	}
	if sel, _ := labels.Parse("app=web,tier in (front,back)"); !sel.Matches(&s) {
		t.Errorf("%v does not match the labels app=web,tier=front", sel)
	}
	if err := s.Read([]byte(`{"metadata":{"name":"b"}}`)); err != nil || s.Has("app") {
		t.Errorf("after a Read of an object without labels: Has(app) = %v, %v", s.Has("app"), err)
	}
	if err := s.Read([]byte(`{"metadata":{"labels":{"app":"web"}}}`)); err != nil || !s.Has("app") {
		t.Fatalf("Read = %v", err)
	}
	if err := s.Read([]byte(`{"metadata":{"labels":[`)); !errors.Is(err, journal.ErrBadObject) || s.Has("app") {
		t.Errorf("Read of broken JSON = %v, Has(app) = %v; want ErrBadObject and no labels", err, s.Has("app"))
	}
}
