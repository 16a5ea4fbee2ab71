package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/watchjournal/watchjournal"

// rank is the layer of a package of the module, from the bottom; ok is
// false for a package no layer names.
func rank(pkg string) (r int, ok bool) {
	p, found := strings.CutPrefix(pkg, module+"/")
	if !found {
		return 0, false
	}
	under := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	switch {
	case p == "internal/hashrange", p == "internal/suggest", p == "internal/storage", p == "internal/protofields", p == "internal/clientrate":
		return 0, true
	case under("journal"):
		return 1, true
	case under("reconcile"):
		return 2, true
	case under("jcache"), under("shards"), under("metrics"):
		return 3, true
	case under("cmd"), under("bench"), under("examples"):
		return 4, true
	}
	return 0, false
}

// pkg is the part of `go list -json` the test reads.
type pkg struct {
	ImportPath string
	Name       string
	Imports    []string // direct, without tests
}

// listModule returns the module's packages from `go list -json`.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	pkgs := map[string]pkg{}
	for _, p := range goList[pkg](t, module+"/...") {
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// goList runs go list -json with args and returns each package it prints,
// decoded into a T.
func goList[T any](t *testing.T, args ...string) []T {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []T
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p T
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// TestImportsPointDown fails for every package that imports, directly or
// through packages of its own layer or below, a package of a higher layer,
// and prints the chain of imports that does it.
func TestImportsPointDown(t *testing.T) {
	pkgs := listModule(t)
	checked := 0
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		r, ok := rank(name)
		if !ok {
			continue
		}
		checked++
		if chain := upward(pkgs, name, r); chain != nil {
			t.Errorf("%s (layer %d) imports a higher layer: %s", short(name), r, strings.Join(chain, " -> "))
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages in the layer table: is the table out of date?", checked)
	}
}

// upward returns the shortest chain of imports from name to a package of
// the module above layer r, or nil when there is none.
func upward(pkgs map[string]pkg, name string, r int) []string {
	prev := map[string]string{name: ""}
	queue := []string{name}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range pkgs[p].Imports {
			if _, seen := prev[imp]; seen || !strings.HasPrefix(imp, module+"/") {
				continue
			}
			prev[imp] = p
			if ri, ok := rank(imp); ok && ri > r {
				var chain []string
				for q := imp; q != ""; q = prev[q] {
					chain = append([]string{short(q)}, chain...)
				}
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

func short(pkg string) string { return strings.TrimPrefix(pkg, module+"/") }

// TestRank pins the table for the packages the layering is about.
func TestRank(t *testing.T) {
	for p, want := range map[string]int{
		"internal/hashrange": 0, "internal/suggest": 0, "internal/storage": 0, "internal/protofields": 0, "internal/clientrate": 0, "journal": 1, "journal/bolt": 1, "journal/inspect": 1,
		"jcache/internal/delivery": 3, "jcache/internal/position": 3,
		"reconcile": 2, "jcache": 3, "shards": 3, "shards/hashrange": 3, "metrics": 3, "cmd/journalctl": 4,
	} {
		if got, ok := rank(module + "/" + p); !ok || got != want {
			t.Errorf("rank(%s) = %d, %v; want %d", p, got, ok, want)
		}
	}
	if _, ok := rank(module + "/internal/testing/controlplane"); ok {
		t.Error("internal/testing/controlplane has a layer; want none (test support)")
	}
}

// TestPublicAPINamesNoInternalType fails for a declaration in `go doc -all`
// of a public package that names a type of an internal package: a type a
// user cannot name, an alias of one included. Doc text and the
// values of consts and vars (ErrLocked = storage.ErrLocked) are not
// declarations of a type and are not checked.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	// Known, left for the storage design: bolt.Open returns the storage
	// interface journal holds; a user opens a journal with journal.Open.
	known := map[string]bool{"journal/bolt: func Open(path string, o Options) (storage.Store, error)": true}
	pkgs := listModule(t)
	var internal []string
	for name, p := range pkgs {
		if strings.Contains(name, "/internal/") || strings.HasSuffix(name, "/internal") {
			internal = append(internal, regexp.QuoteMeta(p.Name))
		}
	}
	qualified := regexp.MustCompile(`\b(` + strings.Join(internal, "|") + `)\.[A-Z]`)
	checked := 0
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		p, r := pkgs[name], short(name)
		if p.Name == "main" || strings.Contains(name, "/internal") || strings.HasPrefix(r, "cmd/") ||
			strings.HasPrefix(r, "bench/") || strings.HasPrefix(r, "examples/") || strings.HasPrefix(r, "tools/") {
			continue
		}
		out, err := exec.Command("go", "doc", "-all", name).Output()
		if err != nil {
			t.Fatalf("go doc -all %s: %v", r, err)
		}
		checked++
		for _, line := range strings.Split(string(out), "\n") {
			decl := strings.TrimSpace(line)
			if strings.HasPrefix(line, "    ") || strings.HasPrefix(decl, "//") {
				continue // doc text
			}
			if i := strings.Index(decl, " = "); i >= 0 && !strings.HasPrefix(decl, "type ") {
				decl = decl[:i] // a const's or var's value (an alias's type stays)
			}
			if qualified.MatchString(decl) && !known[r+": "+decl] {
				t.Errorf("%s: %q names a type of an internal package", r, decl)
			}
		}
	}
	if checked < 8 {
		t.Fatalf("only %d public packages checked", checked)
	}
}

// TestLibraryImportsNoTestSupport fails when a package of a layer imports,
// outside its tests, a package under internal/testing (the control plane,
// the recorder, the demo and cluster helpers): test and demo support
// serves the tests and the programs, never the library.
func TestLibraryImportsNoTestSupport(t *testing.T) {
	const support = module + "/internal/testing/"
	pkgs := listModule(t)
	checked := 0
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		r, ok := rank(name)
		if !ok || r >= 4 {
			continue
		}
		checked++
		for _, imp := range pkgs[name].Imports {
			if strings.HasPrefix(imp, support) {
				t.Errorf("%s (layer %d) imports test support %s", short(name), r, short(imp))
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d library packages checked: is the table out of date?", checked)
	}
}

// TestInternalIsTheBottomLayer fails for a package under internal/ that
// is neither in the bottom layer nor test support: a library internal
// belongs under the layer it serves (jcache/internal/..., journal/internal/...),
// so that no import runs from internal/ back up.
func TestInternalIsTheBottomLayer(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(listModule(t))) {
		p := short(name)
		if !strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "internal/testing/") || p == "internal/layers" {
			continue
		}
		if r, ok := rank(name); !ok || r != 0 {
			t.Errorf("%s is under internal/ but not in the bottom layer (rank %d, in the table %v): move it under the layer it serves, or into internal/testing if it is test support", p, r, ok)
		}
	}
}
