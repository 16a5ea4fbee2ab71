package journal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// Keep an index of ConfigMaps by a label on disk: registered and reindexed
// before the writer starts (or reindexed beside it), updated with every object in the same transaction, read
// by value without decoding the other objects.
func ExampleIndexes_Add() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	j, err := journal.Open(filepath.Join(dir, "configmaps.db"), &journal.Options{Resource: &res})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	if err := j.Settings().KeepObjects(); err != nil {
		log.Fatal(err)
	}
	byApp := func(obj []byte) ([]string, error) {
		var o struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(obj, &o); err != nil {
			return nil, err
		}
		if app, ok := o.Metadata.Labels["app"]; ok {
			return []string{app}, nil
		}
		return nil, nil
	}
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"app": byApp}); err != nil {
		log.Fatal(err)
	}
	// The file may hold the index from an earlier run, computed by
	// another version of byApp: it answers once reindexed against this one.
	if _, err := j.Indexes().Reindex(context.Background(), []string{"app"}); err != nil {
		log.Fatal(err)
	}

	// Package reconcile writes these; the index changes with them.
	err = j.Writer().Update(func(tx *journal.Tx) error {
		for _, e := range []journal.Event{
			{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "101", Origin: journal.OriginWatch,
				Object: []byte(`{"metadata":{"name":"a","namespace":"demo","labels":{"app":"web"}}}`)},
			{Type: journal.Added, Key: "demo/b", UID: "u-2", ResourceVersion: "102", Origin: journal.OriginWatch,
				Object: []byte(`{"metadata":{"name":"b","namespace":"demo","labels":{"app":"db"}}}`)},
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
	keys, err := j.Indexes().Lookup("app", "web")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(keys)
	// Output: [demo/a]
}
