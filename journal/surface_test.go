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

	"github.com/watchjournal/watchjournal/internal/journalwrite"
	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that Journal shows a reader what a reader needs, that the
// writer's machinery is reached only through the module's internal
// journalwrite (journalwrite.Of(j)), and that the file check has one name.
func TestJournal_Surface_WriterMachineryOnWriter(t *testing.T) {
	reader := reflect.TypeOf((*journal.Journal)(nil))
	writer := reflect.TypeOf((*journalwrite.Writer)(nil)).Elem()
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	impl := reflect.TypeOf(journalwrite.Of(j)) // journal's own, with the test-only Store (export_test.go)
	for _, m := range []string{"Update", "BeginRelist", "Trim", "SetKind", "Store", "Meta", "Reshard", "ShardPending", "MarkShardPending", "ClearShardPending", "Writer"} {
		if _, ok := reader.MethodByName(m); ok {
			t.Errorf("*journal.Journal has %s; want it only on journalwrite.Writer", m)
		}
		if m == "Writer" {
			continue
		}
		if _, ok := impl.MethodByName(m); !ok {
			t.Errorf("journalwrite.Of(j) (%v) lacks %s", impl, m)
		}
		if _, ok := writer.MethodByName(m); !ok && m != "Store" {
			t.Errorf("journalwrite.Writer lacks %s", m)
		}
	}
	for _, m := range []string{"Read", "Wait", "Head", "Lookup", "ScanIndex", "Snapshot", "Stats", "Check", "Consumer", "TypeMeta", "Resource", "ResourceVersion", "Close"} {
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

// Ensure that package journal exports none of the writer's machinery:
// its types and functions live in internal/journalwrite.
func TestJournal_Surface_NoWriterTypes(t *testing.T) {
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
	for _, name := range []string{"Writer", "Tx", "Relist", "Meta", "ReshardResult", "ShardSet", "LockWriter", "StageMarkerError", "StageRecordError"} {
		if exported[name] {
			t.Errorf("package journal exports %s; want it under internal/ (journalwrite)", name)
		}
	}
}
