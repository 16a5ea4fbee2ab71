package main

// journalctl watch RESOURCE --db FILE --shard-group NAME runs as one
// member of a shard group (package shards): it holds its Lease, journals
// its share of the resource into FILE, and follows the group, serving
// FILE.sock as any watch (stats shows the shard mode and the range).

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
	"github.com/watchjournal/watchjournal/shards"
)

// shardFlags are watch's --shard-* flags.
type shardFlags struct {
	group, member, namespace string
	lease, renew, leave      time.Duration
	index                    time.Duration
}

func addShardFlags(fl *pflag.FlagSet, f *shardFlags) {
	fl.StringVar(&f.group, "shard-group", "", "run as one member of shard group `NAME`: journal only this member's share of the resource's UID hash space (coordination.k8s.io Leases; needs --db)")
	fl.StringVar(&f.member, "shard-member", "", "this member's `NAME` in the group, stable across restarts (default: host name and pid)")
	fl.StringVar(&f.namespace, "shard-namespace", "", "`NAMESPACE` of the group's Leases (default: the watched namespace, else \"default\")")
	fl.DurationVar(&f.lease, "shard-lease-duration", shards.DefaultLeaseDuration, "how long a member's Lease lasts without renewal: how long a dead member's range waits before the others take it")
	fl.DurationVar(&f.renew, "shard-renew-interval", 0, "how often a member renews its Lease and looks at the group (0: a third of --shard-lease-duration)")
	fl.DurationVar(&f.index, "shard-index-interval", 0, "how often, at most, a member publishes its index for whoever takes its share over if it dies (0: --shard-renew-interval; negative: never, and deletes made while it is dead are lost)")
	fl.DurationVar(&f.leave, "shard-leave-timeout", shards.DefaultLeaveTimeout, "on SIGINT/SIGTERM, journal at most this long while the other members take this one's share (negative: stop at once)")
}

// openShard opens resources[0] into f.db as a member of f.shard.group.
func openShard(ctx context.Context, cfg *rest.Config, resources []journal.Resource, opts reconcile.Options, jopts journal.Options, lg logr.Logger, f watchFlags) (*shards.Member, error) {
	switch {
	case f.db == "" || len(resources) != 1:
		return nil, errors.New("watch --shard-group: one resource into --db FILE")
	case f.metricsAddr != "":
		return nil, errors.New("watch --shard-group: --metrics-addr is not supported with --shard-group yet")
	}
	m, err := shards.Open(cfg, f.db, resources[0], shards.Options{
		Group: f.shard.group, Member: f.shard.member, Namespace: f.shard.namespace,
		LeaseDuration: f.shard.lease, RenewInterval: f.shard.renew, LeaveTimeout: f.shard.leave, IndexInterval: f.shard.index,
		Loop: opts, Journal: jopts, Logger: lg,
	})
	if err != nil {
		return nil, fileError{lockedBy(ctx, err, f.db)}
	}
	return m, nil
}
