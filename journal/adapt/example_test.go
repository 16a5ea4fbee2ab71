package adapt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// demoJournal returns a journal holding an ADDED, a MODIFIED seen live and
// a DELETED inferred by a relist, as package reconcile would write them.
func demoJournal() (*journal.Journal, func()) {
	dir, _ := os.MkdirTemp("", "adapt-example")
	// reconcile.New records Kind and APIVersion from discovery; set here as
	// it would: tombstones are labelled with them.
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo",
		Kind: "ConfigMap", APIVersion: "v1"}
	j, err := journal.Open(filepath.Join(dir, "j.db"), &journal.Options{Resource: &res})
	if err != nil {
		log.Fatal(err)
	}
	obj := func(rv string) []byte {
		return []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"demo","uid":"u-1","resourceVersion":"` + rv + `"}}`)
	}
	_ = j.Writer().Update(func(tx *journal.Tx) error {
		for _, e := range []journal.Event{
			{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "10", Object: obj("10"), Origin: journal.OriginRelist},
			{Type: journal.Modified, Key: "demo/a", UID: "u-1", ResourceVersion: "11", PrevResourceVersion: "10", Object: obj("11"), Origin: journal.OriginWatch},
			{Type: journal.Deleted, Key: "demo/a", UID: "u-1", ResourceVersion: "11", Origin: journal.OriginRestart},
		} {
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("12")
	})
	return j, func() { j.Close(); os.RemoveAll(dir) }
}

// Code written for client-go's RetryWatcher ranges over ResultChan; only
// the constructor changes.
func ExampleNewWatcher() {
	j, cleanup := demoJournal()
	defer cleanup()

	w, err := adapt.NewWatcher(j, 1, nil) // from offset 1; adapt.FromNow: from now on
	if err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 3; i++ {
		ev := <-w.ResultChan()
		m, _ := meta.Accessor(ev.Object)
		fmt.Println(ev.Type, m.GetNamespace()+"/"+m.GetName(), m.GetResourceVersion())
	}
	// Output:
	// ADDED demo/a 10
	// MODIFIED demo/a 11
	// DELETED demo/a 11
}

// A Watcher on a named consumer resumes after a restart where the last one
// stopped: here a first "process" takes two events and stops; a second one
// opens the same file and gets only the third.
func ExampleWatchConsumer() {
	j, cleanup := demoJournal()
	defer cleanup()
	path := j.Path()

	run := func(j *journal.Journal, n int) {
		c, err := j.Consumers().Open("my-watcher")
		if err != nil {
			log.Fatal(err)
		}
		w, err := adapt.WatchConsumer(c, nil)
		if err != nil {
			log.Fatal(err)
		}
		for i := 0; i < n; i++ {
			ev := <-w.ResultChan()
			m, _ := meta.Accessor(ev.Object)
			fmt.Println(ev.Type, m.GetName(), m.GetResourceVersion())
		}
		w.Stop()
		<-w.Done() // the events handed over are committed
	}
	run(j, 2)
	j.Close() // the "process" ends

	j, err := journal.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	fmt.Println("restart")
	run(j, 1)
	// Output:
	// ADDED a 10
	// MODIFIED a 11
	// restart
	// DELETED a 11
}

// Informer-style handlers move over with Handle, fed by a durable consumer
// that commits after each batch.
func ExampleHandle() {
	j, cleanup := demoJournal()
	defer cleanup()

	c, err := j.Consumers().Open("my-controller")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { fmt.Println("add", objName(obj)) },
		UpdateFunc: func(old, new any) {
			o, _ := meta.Accessor(old)
			fmt.Println("update", objName(new), "from resourceVersion", o.GetResourceVersion())
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				fmt.Println("delete found by relist", d.Key)
				cancel()
				return
			}
			fmt.Println("delete", objName(obj))
		},
	}
	_ = adapt.Handle(ctx, c, h, nil)
	off, _ := c.Committed()
	fmt.Println("committed", off)
	// Output:
	// add a
	// update a from resourceVersion 10
	// delete found by relist demo/a
	// committed 3
}

func objName(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "?"
	}
	return m.GetName()
}
