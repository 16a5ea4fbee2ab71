package journal_test

import (
	"reflect"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that Journal shows a reader what a reader needs, that the
// writer's machinery is reached only through Writer (j.Writer()), and that
// the file check has one name.
func TestJournal_Surface_WriterMachineryOnWriter(t *testing.T) {
	reader := reflect.TypeOf((*journal.Journal)(nil))
	writer := reflect.TypeOf((*journal.Writer)(nil))
	for _, m := range []string{"Update", "BeginRelist", "Trim", "SetKind", "Store"} {
		if _, ok := reader.MethodByName(m); ok {
			t.Errorf("*journal.Journal has %s; want it only on *journal.Writer", m)
		}
		if _, ok := writer.MethodByName(m); !ok {
			t.Errorf("*journal.Writer lacks %s", m)
		}
	}
	for _, m := range []string{"Read", "Wait", "Head", "Lookup", "ScanIndex", "Snapshot", "Stats", "Check", "Consumer", "TypeMeta", "Resource", "ResourceVersion", "Close", "Writer"} {
		if _, ok := reader.MethodByName(m); !ok {
			t.Errorf("*journal.Journal lacks %s", m)
		}
	}
	// Verify is the anti-entropy relist's word (reconcile.Loop.Verify); the
	// offline file check is Check only.
	if _, ok := reader.MethodByName("Verify"); ok {
		t.Errorf("*journal.Journal has Verify; want the file check named Check only")
	}
}
