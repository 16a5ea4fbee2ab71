package journal_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// Open a journal for ConfigMaps in one namespace, append what a watch saw
// in one transaction, and read it back from offset 1.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"}
	j, err := journal.Open(filepath.Join(dir, "configmaps.db"), &journal.Options{Resource: &res})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()

	// Package reconcile does this for you; index, journal and
	// resourceVersion change together.
	err = j.Writer().Update(func(tx *journal.Tx) error {
		for _, e := range []journal.Event{
			{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "101", Origin: journal.OriginWatch},
			{Type: journal.Deleted, Key: "demo/a", UID: "u-1", ResourceVersion: "102", Origin: journal.OriginRelist},
		} {
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("102")
	})
	if err != nil {
		log.Fatal(err)
	}

	evs, _ := j.Read(1, 100)
	for _, e := range evs {
		fmt.Println(e.Offset, e.Type, e.Key, e.Origin, "synthesized:", e.Synthesized())
	}
	st, _ := j.Stats()
	fmt.Println("objects:", st.Objects, "resourceVersion:", st.ResourceVersion)
	// Output:
	// 1 ADDED demo/a watch synthesized: false
	// 2 DELETED demo/a relist synthesized: true
	// objects: 0 resourceVersion: 102
}

// A durable consumer reads from its committed offset, follows the head and
// commits what it has processed; after a crash it resumes after the commit.
func ExampleConsumers_Open() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	j, err := journal.Open(filepath.Join(dir, "j.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()

	c, err := j.Consumers().Open("audit") // registered in the file; holds retention back
	if err != nil {
		log.Fatal(err)
	}
	go func() { // the writer (package reconcile in real use)
		_ = j.Writer().Update(func(tx *journal.Tx) error {
			e := journal.Event{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "7", Origin: journal.OriginWatch}
			_, err := tx.Append(&e)
			return err
		})
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := c.Next(ctx, 100) // blocks at the head until the writer appends
	if err != nil {
		log.Fatal(err) // errors.Is(err, journal.ErrTrimmed): resync from j.Snapshot
	}
	for _, e := range evs {
		fmt.Println(e.Offset, e.Type, e.Key, e.Origin)
	}
	if err := c.Commit(evs[len(evs)-1].Offset); err != nil {
		log.Fatal(err)
	}
	off, _ := c.Committed()
	fmt.Println("committed", off)
	// Output:
	// 1 ADDED demo/a watch
	// committed 1
}
