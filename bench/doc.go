// Package bench measures watchjournal at scale. It holds no library code.
//
// # In process
//
// journal_bench_test.go has standard Go benchmarks that need no apiserver:
// journal append with group commit, replay with Journal.Read, the relist diff
// against an index of N objects (reconcile.Diff over ScanIndex pages, and the
// staged path BeginRelist/Stage/Commit), the index's size on disk per
// object, bbolt's settings for append-only keys, and how much heap a Journal
// keeps after taking in N objects. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// Each reports its rate as a custom metric (events/s, objects/s, B/obj).
//
// # Against a local control plane
//
// cmd/benchharness starts etcd and kube-apiserver (internal/controlplane),
// creates N ConfigMaps of about 1 KiB and runs each subject (watchjournal,
// three client-go informers, a bare paginated list, a bare watch-list) in a
// child process of its own, so that memory is never mixed. It prints one
// table and writes BENCHMARKS.md. `make bench` runs both.
package bench
