package main

// The sharded subject, jcache-sharded: the cache subjects' operator
// (cache.go) run as shardReplicas processes of one shard group
// (jcache.ShardOptions, docs/sharding.md), each with its own directory,
// against the same ConfigMaps as the jcache subject, which is its
// unsharded reference at the same N.
//
// What is measured, and how the parent knows a replica is done. The
// ConfigMaps have no owner, so each hashes by its own UID into one of the
// hashrange.DefaultBuckets equal buckets of the hash space; a replica's
// range is a union of whole buckets (hashrange.Assign). Before the
// replicas start, the parent lists the objects' UIDs once and counts the
// objects of each bucket (bucketTotals); each replica gets the counts and
// counts, per bucket, the distinct keys it reconciled while it held them
// (shardedchild.go). A replica has reconciled all of its range when the
// group has every replica live, its range is settled (ShardStatus.Settled)
// and, for every bucket of its range, the keys it reconciled are the
// bucket's objects: it reports then, with its heap and RSS after a GC.
//
// Then the parent tells the others which buckets the first replica holds
// (they forget what they reconciled so far), kills it with SIGKILL and
// waits until each survivor has settled with one member less and
// reconciled every object of the killed range it took: the takeover is
// from the kill until the last of those reconciles (as a survivor saw it
// when it polled, every 5 ms). Its Lease is left to expire, as a crash
// leaves it: the survivors take its range LeaseDuration (the library's
// default) after they last saw it renewed.
//
// The parent checks that the settled ranges split the buckets among the
// replicas (each bucket held once) and that the survivors took the whole
// killed range, each bucket once; a failed check fails the row.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/shards"
)

// subjJCacheSharded is the sharded subject.
const subjJCacheSharded = "jcache-sharded"

// shardReplicas is how many replicas the sharded subject runs.
const shardReplicas = 3

// Environment of a sharded replica's child (shardedchild.go).
const (
	envShardGroup    = "BENCH_SHARD_GROUP"    // the shard group's name
	envShardMember   = "BENCH_SHARD_MEMBER"   // this replica's name in it
	envShardReplicas = "BENCH_SHARD_REPLICAS" // how many replicas the group has
	// envShardTotals is the objects of each hash bucket, comma-separated,
	// hashrange.DefaultBuckets numbers (bucketTotals).
	envShardTotals = "BENCH_SHARD_TOTALS"
)

// shardBucketShift turns a UID's hash into its bucket: the top 8 bits, as
// hashrange.Assign cuts the space into hashrange.DefaultBuckets.
const shardBucketShift = 56

// shardBucket returns the bucket of the object whose UID is uid.
func shardBucket(uid string) int { return int(hashrange.Hash(uid) >> shardBucketShift) }

// bucketsOf returns the buckets s holds whole, ascending; partial is true
// when s holds part of a bucket (a range that is no union of buckets,
// which hashrange.Assign never gives).
func bucketsOf(s hashrange.Set) (buckets []int, partial bool) {
	const width = uint64(1) << shardBucketShift
	for b := range hashrange.DefaultBuckets {
		first := uint64(b) * width
		bucket := hashrange.Set{{First: first, Last: first + width - 1}}
		switch {
		case s.Covers(bucket):
			buckets = append(buckets, b)
		case !s.Intersect(bucket).Empty():
			partial = true
		}
	}
	return buckets, partial
}

// shardStart is what one replica measured until all of its range was
// reconciled, and after the kill (a survivor).
type shardStart struct {
	Member string `json:"member"`
	// Buckets are the hash buckets of its settled range; Keys the objects
	// in them.
	Buckets []int `json:"buckets"`
	Keys    int   `json:"keys"`
	// FirstReconcileSeconds and AllSeconds are from the parent's exec of
	// the process to the reconciler's first call and until every object
	// of its range was reconciled; InProcessSeconds from its
	// ctrl.NewManager call to the first call; CPU the process's CPU time
	// until all. Reconciles counts the distinct keys it reconciled while
	// it held them (those of its settled range); NotHeld the reconciles of
	// an object it did not hold then (queued before its key moved away).
	FirstReconcileSeconds float64 `json:"firstReconcileSeconds"`
	InProcessSeconds      float64 `json:"inProcessSeconds"`
	AllSeconds            float64 `json:"allSeconds"`
	CPU                   float64 `json:"cpuSeconds"`
	Reconciles            int64   `json:"reconciles"`
	NotHeld               int64   `json:"notHeld"`
	// Base is the steady memory before the manager was built; Steady once
	// all of its range was reconciled.
	Base   memory `json:"base"`
	Steady memory `json:"steady"`
	// Killed is true for the replica the parent killed.
	Killed bool `json:"killed,omitempty"`
	// Taken (a survivor) are the keys of the killed range it took;
	// TakenSeconds from the kill until it had reconciled all of them;
	// After its steady memory then.
	Taken        int     `json:"taken,omitempty"`
	TakenSeconds float64 `json:"takenSeconds,omitempty"`
	After        memory  `json:"after"`
	// DiskBytes is the size of its directory after its process ended.
	DiskBytes int64 `json:"diskBytes,omitempty"`
}

// shardedRow is the sharded subject's results at one N.
type shardedRow struct {
	N       int    `json:"n"`
	Subject string `json:"subject"`
	Err     string `json:"err,omitempty"`
	Objects int    `json:"objects"` // N + cacheListN
	Load    string `json:"load"`    // 1-minute load average when the replicas started
	// LeaseDuration and RenewInterval are the group's, in seconds: the
	// library's defaults (jcache.ShardOptions).
	LeaseDuration float64      `json:"leaseDurationSeconds"`
	RenewInterval float64      `json:"renewIntervalSeconds"`
	Replicas      []shardStart `json:"replicas"`
	// TakeoverSeconds is from the SIGKILL of the killed replica until the
	// survivors had reconciled every key of its range.
	TakeoverSeconds float64 `json:"takeoverSeconds"`
}

// shardReport is a sharded replica's report: "shard-synced" once all of
// its range was reconciled, "shard-armed" when it forgot its reconciles
// before the kill, "shard-takeover" once it reconciled every key of the
// killed range it took.
type shardReport struct {
	NewManagerUnixNano     int64   `json:"newManagerUnixNano,omitempty"`
	FirstReconcileUnixNano int64   `json:"firstReconcileUnixNano,omitempty"`
	AllUnixNano            int64   `json:"allUnixNano,omitempty"`
	CPU                    float64 `json:"cpuSeconds,omitempty"`
	// Buckets and Keys: the settled range and its objects
	// ("shard-synced"); the part of the killed range taken
	// ("shard-takeover").
	Buckets    []int  `json:"buckets,omitempty"`
	Keys       int    `json:"keys,omitempty"`
	Reconciles int64  `json:"reconciles,omitempty"`
	NotHeld    int64  `json:"notHeld,omitempty"`
	Members    int    `json:"members,omitempty"`
	Base       memory `json:"base"`
	Steady     memory `json:"steady"`
}

// shardCommand is a line from the parent to a sharded replica: "arm"
// (forget the reconciles so far; Buckets are the range about to be
// killed) or "exit".
type shardCommand struct {
	Cmd     string `json:"cmd"`
	Buckets []int  `json:"buckets,omitempty"`
}

// sendShard writes cmd to the replica c.
func sendShard(c *child, cmd shardCommand) error {
	b, err := json.Marshal(cmd)
	if err == nil {
		_, err = c.stdin.Write(append(b, '\n'))
	}
	return err
}

// bucketTotals lists the cache subjects' ConfigMaps (metadata only) and
// returns how many there are in each hash bucket.
func (p *parent) bucketTotals(ctx context.Context) ([]int, error) {
	mc, err := metadata.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	totals := make([]int, hashrange.DefaultBuckets)
	opts := metav1.ListOptions{LabelSelector: cacheLabel + "=true", Limit: 5000}
	for {
		var l *metav1.PartialObjectMetadataList
		err := retry(ctx, func() (err error) {
			l, err = mc.Resource(configMaps).Namespace("").List(ctx, opts)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("listing the ConfigMaps' UIDs: %w", err)
		}
		for i := range l.Items {
			totals[shardBucket(string(l.Items[i].UID))]++
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return totals, nil
		}
	}
}

// runSharded runs the sharded subject at n: shardReplicas replicas until
// each reconciled its range, then the kill of one and the takeover.
func (p *parent) runSharded(ctx context.Context, n int) shardedRow {
	r := shardedRow{N: n, Subject: subjJCacheSharded, Objects: n + cacheListN,
		LeaseDuration: shards.DefaultLeaseDuration.Seconds(), RenewInterval: (shards.DefaultLeaseDuration / 3).Seconds()}
	if err := p.sharded(ctx, &r); err != nil {
		r.Err = err.Error()
		logf("N=%d %s: %s", n, r.Subject, r.Err)
	}
	return r
}

// replica is one running replica of the sharded subject.
type replica struct {
	c     *child
	dir   string
	began time.Time // the parent's exec
	ended bool      // its process was reaped
}

func (p *parent) sharded(ctx context.Context, r *shardedRow) (err error) {
	n := r.N
	totals, err := p.bucketTotals(ctx)
	if err != nil {
		return err
	}
	sum := 0
	strs := make([]string, len(totals))
	for i, t := range totals {
		sum += t
		strs[i] = strconv.Itoa(t)
	}
	if sum != r.Objects {
		return fmt.Errorf("the ConfigMaps' list holds %d objects; want %d", sum, r.Objects)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) > 0 {
		r.Load = strings.Fields(string(b))[0]
	}
	group := fmt.Sprintf("bench-sharded-n%d", n)
	reps := make([]*replica, shardReplicas)
	defer p.deleteLeases(group)
	defer func() {
		for _, x := range reps {
			if x == nil {
				continue
			}
			if !x.ended {
				x.c.stop(err)
			}
			_ = os.RemoveAll(x.dir)
		}
	}()
	logf("N=%d %s: starting %d replicas of group %s (%d objects)", n, r.Subject, shardReplicas, group, r.Objects)
	for i := range reps {
		member := fmt.Sprintf("replica-%d", i)
		dir, err := os.MkdirTemp("", "benchharness-"+r.Subject+"-"+member+"-")
		if err != nil {
			return err
		}
		reps[i] = &replica{dir: dir, began: time.Now()}
		reps[i].c, err = p.startChild(n, r.Subject, p.cp.RESTConfig().Host, dir,
			envShardGroup+"="+group, envShardMember+"="+member, fmt.Sprintf("%s=%d", envShardReplicas, shardReplicas),
			envShardTotals+"="+strings.Join(strs, ","), envTag+"="+fmt.Sprintf("N%d-%s-%s", n, r.Subject, member))
		if err != nil {
			reps[i].ended = true
			return err
		}
		r.Replicas = append(r.Replicas, shardStart{Member: member})
	}
	for i, x := range reps {
		rep, err := x.c.await("shard-synced", syncTimeout(n)+3*time.Minute)
		if err != nil || rep.Shard == nil {
			return fmt.Errorf("%s: waiting for its range to be reconciled: %v", r.Replicas[i].Member, err)
		}
		s, st := rep.Shard, &r.Replicas[i]
		st.Buckets, st.Keys, st.Reconciles, st.NotHeld = s.Buckets, s.Keys, s.Reconciles, s.NotHeld
		st.FirstReconcileSeconds = time.Unix(0, s.FirstReconcileUnixNano).Sub(x.began).Seconds()
		st.InProcessSeconds = time.Duration(s.FirstReconcileUnixNano - s.NewManagerUnixNano).Seconds()
		st.AllSeconds = time.Unix(0, s.AllUnixNano).Sub(x.began).Seconds()
		st.CPU, st.Base, st.Steady = s.CPU, s.Base, s.Steady
		logf("N=%d %s: %s: %d keys in %d buckets; first reconcile %.2f s after exec (%.2f s after NewManager), all of its range %.2f s (CPU %.2f s, %d not held), heap %s, RSS %s",
			n, r.Subject, st.Member, st.Keys, len(st.Buckets), st.FirstReconcileSeconds, st.InProcessSeconds, st.AllSeconds, st.CPU, st.NotHeld,
			mib(st.Steady.HeapInuse), mib(st.Steady.RSS))
	}
	if err := checkSplit(r.Replicas, totals); err != nil {
		return err
	}

	// The kill: the survivors forget what they reconciled, then the first
	// replica dies without a word.
	killed := &r.Replicas[0]
	for _, x := range reps[1:] {
		if err := sendShard(x.c, shardCommand{Cmd: "arm", Buckets: killed.Buckets}); err != nil {
			return err
		}
		if _, err := x.c.await("shard-armed", time.Minute); err != nil {
			return err
		}
	}
	logf("N=%d %s: killing %s (SIGKILL; its %d keys wait for its Lease to expire, %v)", n, r.Subject, killed.Member, killed.Keys, shards.DefaultLeaseDuration)
	killAt := time.Now()
	if err := reps[0].c.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing %s: %w", killed.Member, err)
	}
	reps[0].c.close()
	reps[0].ended, killed.Killed = true, true
	killed.DiskBytes = dirSize(reps[0].dir)
	var taken [][]int
	for i, x := range reps[1:] {
		st := &r.Replicas[i+1]
		rep, err := x.c.await("shard-takeover", shards.DefaultLeaseDuration+syncTimeout(n)+3*time.Minute)
		if err != nil || rep.Shard == nil {
			return fmt.Errorf("%s: waiting for the killed range to be reconciled: %v", st.Member, err)
		}
		s := rep.Shard
		st.Taken, st.TakenSeconds, st.After = s.Keys, time.Unix(0, s.AllUnixNano).Sub(killAt).Seconds(), s.Steady
		r.TakeoverSeconds = max(r.TakeoverSeconds, st.TakenSeconds)
		taken = append(taken, s.Buckets)
		logf("N=%d %s: %s took %d keys of %s's in %d buckets, all reconciled %.2f s after the kill; heap %s, RSS %s",
			n, r.Subject, st.Member, st.Taken, killed.Member, len(s.Buckets), st.TakenSeconds, mib(st.After.HeapInuse), mib(st.After.RSS))
	}
	if err := checkTakeover(killed.Buckets, taken); err != nil {
		return err
	}
	logf("N=%d %s: every key of %s's range reconciled by a survivor %.2f s after the kill", n, r.Subject, killed.Member, r.TakeoverSeconds)
	for i, x := range reps[1:] {
		if err := sendShard(x.c, shardCommand{Cmd: "exit"}); err != nil {
			return err
		}
		if _, err := x.c.await("bye", 2*time.Minute); err != nil {
			return fmt.Errorf("%s: %w", r.Replicas[i+1].Member, err)
		}
		x.c.close()
		x.ended = true
		r.Replicas[i+1].DiskBytes = dirSize(x.dir)
	}
	return nil
}

// deleteLeases deletes the Leases of the shard group, in
// ShardOptions.Namespace's default namespace: the killed replica's, which
// nothing else deletes, so that a later run of the same group starts from
// none.
func (p *parent) deleteLeases(group string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.kube.CoordinationV1().Leases("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: shards.LabelGroup + "=" + group})
	if err != nil {
		logf("deleting the Leases of shard group %s: %v", group, err)
	}
}

// checkSplit returns an error unless the settled ranges of rs hold every
// bucket exactly once and each replica's keys are its buckets' objects.
func checkSplit(rs []shardStart, totals []int) error {
	held := make([]string, len(totals))
	for _, x := range rs {
		keys := 0
		for _, b := range x.Buckets {
			if held[b] != "" {
				return fmt.Errorf("bucket %d is held by %s and %s", b, held[b], x.Member)
			}
			held[b], keys = x.Member, keys+totals[b]
		}
		if keys != x.Keys {
			return fmt.Errorf("%s reports %d keys in its range; its buckets hold %d", x.Member, x.Keys, keys)
		}
	}
	if i := slices.Index(held, ""); i >= 0 {
		return fmt.Errorf("bucket %d is held by no replica", i)
	}
	return nil
}

// checkTakeover returns an error unless the buckets the survivors took,
// taken, are the killed range's, each taken once.
func checkTakeover(killed []int, taken [][]int) error {
	var all []int
	for _, t := range taken {
		all = append(all, t...)
	}
	slices.Sort(all)
	if !slices.Equal(all, killed) {
		return fmt.Errorf("the survivors took buckets %v; the killed range is %v", all, killed)
	}
	return nil
}
