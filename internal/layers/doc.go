// Package layers holds no code, only a test of the import direction
// between the module's packages: each layer imports only those below it.
//
//	cmd/..., bench/..., examples/...    programs
//	jcache/..., shards/..., metrics/...  on top of the loop
//	reconcile/...                       the list/watch loop
//	journal, journal/...,               the journal (its reader and its Writer), storage and socket,
//	internal/position                   a consumer's position across replicas (warm standby)
//	internal/hashrange, internal/suggest pure arithmetic, name suggestions,
//	internal/storage,                   the storage interface journal holds,
//	internal/delivery                   restart-exact bookkeeping of jcache.Exact
//
// A package may import one of its own layer or below, never above:
// journal/inspect reports the loop through an interface of its own
// (inspect.Loop) that reconcile implements, as raft owns the LogStore
// that raft-boltdb implements. The test reads the import graph from
// `go list -json`; packages the table does not name (test support under
// internal/) are not checked.
package layers
