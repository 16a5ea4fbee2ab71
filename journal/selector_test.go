package journal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// reopenWith opens a file recorded with first, closes it, and opens it again
// asking for second; it returns the second Open's error.
func reopenWith(t *testing.T, first, second journal.Resource) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &first, NoSync: true})
	if err != nil {
		t.Fatalf("first Open with %v = %v", first, err)
	}
	_ = j.Close()
	j, err = journal.Open(path, &journal.Options{Resource: &second, NoSync: true})
	if err == nil {
		_ = j.Close()
	}
	return err
}

// selectorCase is a file recorded with cm under label and field selectors,
// opened again asking for label2 and field2.
type selectorCase struct{ name, label, field, label2, field2 string }

// reopen runs reopenWith on the case and returns the second Open's error.
func (c selectorCase) reopen(t *testing.T) error {
	t.Helper()
	first, second := cm, cm
	first.LabelSelector, first.FieldSelector = c.label, c.field
	second.LabelSelector, second.FieldSelector = c.label2, c.field2
	return reopenWith(t, first, second)
}

// String describes the reopen for failure messages.
func (c selectorCase) String() string {
	return fmt.Sprintf("reopen recorded with -l %q --field-selector %q asking for -l %q --field-selector %q", c.label, c.field, c.label2, c.field2)
}

// Ensure that a selector spelled another way that selects the same objects
// opens the file recording the first spelling.
func TestOpen_EquivalentSelectorIsTheSameResource(t *testing.T) {
	for _, tc := range []selectorCase{
		{"requirements in another order", "app=x,tier=web", "", "tier=web,app=x", ""},
		{"spaces", "app=x,tier=web", "", " app = x , tier = web ", ""},
		{"== for =", "app=x,tier=web", "", "app==x,tier==web", ""},
		{"in with one value for =", "app=x,tier=web", "", "app in (x),tier=web", ""},
		{"notin with one value for !=", "app!=x", "", "app notin (x)", ""},
		{"set values in another order", "env in (a,b),app", "", "app,env in (b, a)", ""},
		{"a requirement repeated", "app=x", "", "app=x,app=x", ""},
		{"field requirements in another order", "", "metadata.name=a,metadata.namespace=wj", "", "metadata.namespace=wj,metadata.name=a"},
		{"field ==", "", "metadata.name=a", "", "metadata.name==a"},
		{"field != reordered", "", "metadata.name!=a,metadata.namespace=wj", "", "metadata.namespace==wj,metadata.name!=a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.reopen(t); err != nil {
				t.Errorf("%v = %v; want nil", tc, err)
			}
		})
	}
}

// Ensure that a selector that selects other objects is still another
// resource.
func TestOpen_DifferentSelectorIsAnotherResource(t *testing.T) {
	for _, tc := range []selectorCase{
		{"another value", "app=x", "", "app=y", ""},
		{"one requirement more", "app=x", "", "app=x,tier=web", ""},
		{"none", "app=x", "", "", ""},
		{"!= for =", "app=x", "", "app!=x", ""},
		{"in with two values for =", "app=x", "", "app in (x,y)", ""},
		{"exists for =", "app=x", "", "app", ""},
		{"another field value", "", "metadata.name=a", "", "metadata.name=b"},
		{"label text as a field selector", "app=x", "", "", "app=x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.reopen(t); !errors.Is(err, journal.ErrResourceMismatch) {
				t.Errorf("%v = %v; want ErrResourceMismatch", tc, err)
			}
		})
	}
}

// Ensure that a selector that does not parse (reconcile.New refuses it) is
// the same resource only as the same text.
func TestOpen_UnparsableSelectorComparesAsText(t *testing.T) {
	first, second := cm, cm
	first.LabelSelector, second.LabelSelector = "app in (x", "app in (x"
	if err := reopenWith(t, first, second); err != nil {
		t.Errorf("reopen with the same unparsable selector = %v; want nil", err)
	}
	second.LabelSelector = "app in (x "
	if err := reopenWith(t, first, second); !errors.Is(err, journal.ErrResourceMismatch) {
		t.Errorf("reopen with another unparsable selector = %v; want ErrResourceMismatch", err)
	}
}
