package shards_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/shards"
)

// Run one replica of group "mirror": its share of the ConfigMaps of
// namespace "demo" goes to its own file; start the same program with
// another Member name elsewhere and the two split the ConfigMaps, and take
// over each other's share when one stops.
func ExampleOpen() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"}
	m, err := shards.Open(cfg, "configmaps.db", res, shards.Options{
		Group: "mirror", Member: "replica-a", LeaseDuration: 15 * time.Second,
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, journal.ErrResourceMismatch): the file records another resource
	}
	defer m.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		c, err := m.Journal().Consumers().Open("mirror")
		if err != nil {
			log.Fatal(err)
		}
		for {
			evs, err := c.Next(ctx, 100)
			if err != nil {
				return
			}
			for _, e := range evs {
				_ = e // a DELETED whose Reason says moved is not a deletion: another replica has the key now
			}
			_ = c.Commit(evs[len(evs)-1].Offset)
		}
	}()
	if err := m.Run(ctx); err != nil {
		log.Fatal(err) // only when the journal cannot be written
	}
}
