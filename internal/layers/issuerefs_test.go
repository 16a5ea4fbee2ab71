package layers

// No comment and no string of the module's code cites one of the
// project's issues ("issue 12", "issues 23 and 25", "Issue #7"). A comment
// states what holds and why; history belongs in git and figures in
// BENCHMARKS.md, and an issue number read later means nothing without the
// tracker. Strings are checked too, since the benchmark harness writes
// BENCHMARKS.md's generated sections from them.
//
// The pattern is the word "issue" or "issues" right before a number, so
// an upstream reference written owner/repo#N (kubernetes/kubernetes#123072,
// which names the server behaviour a predicate covers) is not matched.
// Test files are not checked, nor the nested modules under tools/ (go list
// of the module does not reach them).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// issueRef matches a citation of an issue number.
var issueRef = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+\b`)

// srcPkg is the part of `go list -json` that names a package's files.
type srcPkg struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string // other platforms' files (lock_other.go), tests of other platforms
}

// sourceFiles returns the module's non-test Go files, those of every
// platform, by path relative to the module's root, and that root.
func sourceFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root = strings.TrimSpace(string(out))
	for _, p := range goList[srcPkg](t, "-e", module+"/...") {
		for _, f := range slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles) {
			if strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") {
				path, err := filepath.Rel(root, filepath.Join(p.Dir, f))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, path)
			}
		}
	}
	slices.Sort(files)
	return root, slices.Compact(files)
}

// issueRefs returns, as "file:line: text", each comment line and each
// string literal of the Go source src that cites an issue number.
func issueRefs(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var refs []string
	add := func(pos token.Pos, text string) {
		for i, line := range strings.Split(text, "\n") {
			if issueRef.MatchString(line) {
				refs = append(refs, name+":"+strconv.Itoa(fset.Position(pos).Line+i)+": "+strings.TrimSpace(line))
			}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			add(c.Slash, c.Text)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			add(lit.ValuePos, lit.Value)
		}
		return true
	})
	return refs, nil
}

// TestNoIssueNumbers fails for a comment or string of a non-test file of
// the module that cites an issue number.
func TestNoIssueNumbers(t *testing.T) {
	root, files := sourceFiles(t)
	if len(files) < 100 {
		t.Fatalf("only %d source files listed: is go list failing?", len(files))
	}
	for _, path := range files {
		src, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		refs, err := issueRefs(path, src)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, r := range refs {
			t.Errorf("cites an issue number (state the invariant; history is in git): %s", r)
		}
	}
}

// TestIssueRefs pins what the pattern matches: citations of the project's
// issues, in comments and strings, and not upstream owner/repo#N
// references or words that merely follow "issue".
func TestIssueRefs(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"// The loop relists (issue 12).\n", 1},
		{"// Issues 23 and 25 ask for it.\n", 1},
		{"// see issue #7\n", 1},
		{"/* block\n   issue 40 */\n", 1},
		{"var s = \"## A section (issue 25)\"\n", 1},
		{"// kubernetes/kubernetes#123072 names the lost event.\n", 0},
		{"// A get issues one request.\n", 0},
		{"// tissue 12 is no citation.\n", 0},
		{"var s = \"no issue here\"\n", 0},
	} {
		refs, err := issueRefs("x.go", []byte("package x\n"+tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if len(refs) != tc.want {
			t.Errorf("%q: got %d matches %q; want %d", tc.src, len(refs), refs, tc.want)
		}
	}
}
