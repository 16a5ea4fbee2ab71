// Package mainbin builds the main package a test package exercises as a
// process, once for all its tests: TestMain calls RunBuilt, and the tests
// start the binary it names.
package mainbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunBuilt builds the main package in the working directory (the test's
// own package) into a new temporary directory as name, sets *bin to its
// path, runs m and removes the directory. It returns m's exit code, or 1
// without running m when the build fails, its output written to stderr.
// It panics when it cannot make the directory.
func RunBuilt(m *testing.M, name string, bin *string) int {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", *bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
