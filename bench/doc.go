// Package bench measures watchjournal at scale. It holds no library code.
//
// # In process
//
// journal_bench_test.go has standard Go benchmarks that need no apiserver:
// journal append with group commit, replay with Journal.Read, the relist diff
// against an index of N objects (reconcile.Diff over ScanIndex pages, and the
// staged path BeginRelist/Stage/Commit), the index's size on disk per
// object, bbolt's settings for append-only keys, and how much heap a Journal
// keeps after taking in N objects; lister_bench_test.go the Reader's Get and
// List against an informer lister's; queue_bench_test.go what
// controller-runtime's work queue keeps after it drained. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// Each reports its rate as a custom metric (events/s, objects/s, B/obj).
//
// # Against a local control plane
//
// cmd/benchharness starts etcd and kube-apiserver (internal/testing/controlplane),
// creates N ConfigMaps of about 1 KiB and runs each subject (watchjournal,
// journalctl, four client-go informers, a bare paginated list, two bare
// watch-lists, the Reader against a lister, and an operator process on
// controller-runtime's cache and on jcache) in a child process of its own,
// so that memory is never mixed, and the jcache operator as three sharded
// replicas, one of them then killed; then the workloads of real shapes (Pods,
// a custom resource, sealed Secrets). It prints its tables and writes
// BENCHMARKS.md. `make bench` runs both.
package bench
