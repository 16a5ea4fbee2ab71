// Command cluster starts the local control plane (etcd and kube-apiserver on
// loopback, watch cache off, no automatic compaction) and keeps it running
// until SIGINT or SIGTERM, so that journalctl can be tried against it. Run it
// with `make cluster`. It prints the kubeconfig to use, and compacts etcd at
// its current revision on SIGUSR1 (to make a watch's resourceVersion gone).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

func main() {
	dir := flag.String("dir", "", "working directory (default: a new temporary one, removed at exit)")
	watchCache := flag.Bool("watch-cache", false, "run kube-apiserver with its watch cache")
	flag.Parse()
	if err := run(*dir, *watchCache); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(dir string, watchCache bool) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "watchjournal-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cp, err := controlplane.Start(ctx, dir, controlplane.Options{WatchCache: watchCache})
	cancel()
	if err != nil {
		return err
	}
	defer cp.Stop()
	fmt.Printf("kube-apiserver %s and etcd %s are running.\n\n", cp.URL(), cp.EtcdURL())
	fmt.Printf("  export KUBECONFIG=%s\n", cp.KubeconfigPath())
	fmt.Printf("  .cache/bin/journalctl watch configmaps -n default --db /tmp/cm.db\n\n")
	fmt.Printf("Compact etcd (so a stored resourceVersion is gone): kill -USR1 %d\n", os.Getpid())
	fmt.Println("Stop: Ctrl-C")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	for s := range sig {
		if s != syscall.SIGUSR1 {
			return nil
		}
		rev, err := cp.Compact(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "compact:", err)
			continue
		}
		fmt.Println("compacted etcd at revision", rev)
	}
	return nil
}
