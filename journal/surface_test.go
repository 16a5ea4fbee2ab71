package journal_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that Journal shows a reader what a reader needs, that the
// writer's machinery is on Writer only (j.Writer()), that consumers,
// indexes and settings are on their own types, and that the file check
// has one name.
func TestJournal_Surface_WriterMachineryOnWriter(t *testing.T) {
	reader := reflect.TypeOf((*journal.Journal)(nil))
	writer := reflect.TypeOf((*journal.Writer)(nil))
	for _, m := range []string{"Update", "BeginRelist", "Trim", "TrimRetained", "SetKind", "Meta", "Reshard", "ShardPending", "MarkShardPending", "ClearShardPending"} {
		if _, ok := reader.MethodByName(m); ok {
			t.Errorf("*journal.Journal has %s; want it only on *journal.Writer", m)
		}
		if _, ok := writer.MethodByName(m); !ok {
			t.Errorf("*journal.Writer lacks %s", m)
		}
	}
	for _, m := range []string{"Read", "Wait", "Head", "Lookup", "ScanIndex", "Snapshot", "Stats", "Check", "TypeMeta", "Resource", "ResourceVersion", "Close", "Writer", "Consumers", "Indexes", "Settings"} {
		if _, ok := reader.MethodByName(m); !ok {
			t.Errorf("*journal.Journal lacks %s", m)
		}
	}
	// The roles hold the rest: each type's method set stays short enough
	// to read on one screen.
	roles := map[reflect.Type][]string{
		reflect.TypeOf(journal.Consumers{}): {"Open", "Create", "Commit", "Reset", "Committed", "Delete", "List"},
		reflect.TypeOf(journal.Indexes{}):   {"Add", "Names", "Values", "Lookup", "Reindex", "Hashed"},
		reflect.TypeOf(journal.Settings{}):  {"Retention", "SetRetention", "KeepObjects", "Seals", "Sensitive", "KeyIDs", "SealKeyUse", "ReleaseMapped", "JournalBytes"},
	}
	for ty, ms := range roles {
		for _, m := range ms {
			if _, ok := ty.MethodByName(m); !ok {
				t.Errorf("journal.%s lacks %s", ty.Name(), m)
			}
		}
	}
	for _, m := range []string{"Consumer", "CreateConsumer", "CommitConsumer", "ResetConsumer", "ConsumerCommitted", "DeleteConsumer",
		"AddIndexes", "IndexValues", "LookupIndex", "Reindex", "IndexesHashed",
		"Retention", "SetRetention", "KeepObjects", "Seals", "Sensitive", "KeyIDs", "SealKeyUse", "ReleaseMapped", "JournalBytes"} {
		if _, ok := reader.MethodByName(m); ok {
			t.Errorf("*journal.Journal has %s; want it on its role (Consumers, Indexes, Settings)", m)
		}
	}
	for _, ty := range []reflect.Type{reader, writer, reflect.TypeOf(journal.Consumers{}), reflect.TypeOf(journal.Indexes{}), reflect.TypeOf(journal.Settings{})} {
		if n := ty.NumMethod(); n > 22 {
			t.Errorf("%v has %d methods; want a method set that fits on a screen (at most 22)", ty, n)
		}
	}
	// Verify is the anti-entropy relist's word (reconcile.Loop.Verify); the
	// offline file check is Check only.
	if _, ok := reader.MethodByName("Verify"); ok {
		t.Errorf("*journal.Journal has Verify; want the file check named Check only")
	}
}

// Ensure that package journal exports the writer's types once, as named
// types, and none of the stage file's internals.
func TestJournal_Surface_WriterTypes(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/watchjournal/watchjournal/journal")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, ty := range p.Types {
		exported[ty.Name] = true
	}
	for _, f := range p.Funcs {
		exported[f.Name] = true
	}
	for _, name := range []string{"Writer", "Tx", "Relist", "Meta", "ReshardResult"} {
		if !exported[name] {
			t.Errorf("package journal does not export %s; want the writer's types named in journal", name)
		}
	}
	for _, name := range []string{"ShardSet", "LockWriter", "StageMarkerError", "StageRecordError"} {
		if exported[name] {
			t.Errorf("package journal exports %s; want it kept out (hashrange.Selected, bolt.LockWriter, the stage file's own)", name)
		}
	}
}
