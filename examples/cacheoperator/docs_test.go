package main

import (
	"os"
	"strings"
	"testing"
)

// docs/exact.md's production setup section shows run as it is in main.go:
// the production setup there is the one this example runs and its tests
// check.
func TestDocs_ShowsRun(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/exact.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, "\nfunc run(")
	if i < 0 {
		t.Fatal("main.go has no func run")
	}
	n := strings.Index(s[i+1:], "\n}\n")
	if n < 0 {
		t.Fatal("main.go: func run does not end")
	}
	run := s[i+1 : i+1+n+3]
	if !strings.Contains(string(doc), "```go\n"+run+"```\n") {
		t.Errorf("docs/exact.md has no go block that is main.go's func run as it is:\n%s\n(copy it into its section \"The production setup\")", run)
	}
}
