// Command write adds the journal file of today's schema version to
// testdata/journal: v<N>.db written by schemafile.Write and v<N>.json, what
// schemafile.Dump reads back from it. It refuses to replace an existing
// file: a released version's file is never rewritten (testdata/README.md).
//
//	go run ./internal/testing/schemafile/write [-dir testdata/journal]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/watchjournal/watchjournal/internal/testing/schemafile"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

func main() {
	dir := flag.String("dir", "testdata/journal", "directory of the schema files")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	name := filepath.Join(dir, fmt.Sprintf("v%d", bolt.SchemaVersion))
	for _, p := range []string{name + ".db", name + ".json"} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists: the file of a released schema version is never rewritten", p)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := schemafile.Write(name + ".db"); err != nil {
		return err
	}
	j, err := journal.Open(name+".db", &journal.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	c, err := schemafile.Dump(j)
	_ = j.Close()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(name+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s.db and %s.json\n", name, name)
	return nil
}
