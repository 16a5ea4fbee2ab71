package reconcile_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Keep a journal of the ConfigMaps in namespace "demo" until SIGINT or
// SIGTERM. A restart on the same file resumes from the stored
// resourceVersion; a 410 Gone is closed by a relist diff.
func ExampleNew() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"}
	j, err := journal.Open("configmaps.db", &journal.Options{Resource: &res})
	if err != nil {
		log.Fatal(err) // errors.Is(err, journal.ErrLocked): another writer has the file
	}
	defer j.Close()

	loop, err := reconcile.New(cfg, j, reconcile.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := loop.Run(ctx); err != nil {
		log.Fatal(err) // only when the journal cannot be written
	}
}

// Keep journals of the ConfigMaps and Secrets (metadata only) in namespace
// "demo", one file each in /var/lib/demo, under one lifecycle; start
// consuming once both are synced.
func ExampleOpenGroup() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	g, err := reconcile.OpenGroup(cfg, "/var/lib/demo", []journal.Resource{
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "demo", MetadataOnly: true},
	}, reconcile.GroupOptions{})
	if err != nil {
		log.Fatal(err) // errors.Is(err, reconcile.ErrUnknownResource): a typo, with a suggestion
	}
	defer g.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	if err := g.WaitForSync(ctx); err != nil {
		log.Print(err)
	}
	for _, m := range g.Files() {
		log.Printf("%s in %s: synced at offset %d", m.Resource, m.Path, m.Loop.Status().SyncedOffset)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}
