// Package layers holds no code, only a test of the import direction
// between the module's packages: each layer imports only those below it.
//
//	cmd/..., bench/..., examples/...     programs
//	jcache/..., shards/..., metrics/...  on top of the loop (jcache/internal/delivery
//	                                     and jcache/internal/position: Exact's commit
//	                                     tracker and warm standby, under the layer they serve)
//	reconcile/...                        the list/watch loop
//	journal, journal/...                 the journal (its reader and its Writer), storage and socket
//	internal/hashrange, internal/suggest, pure arithmetic, name suggestions,
//	internal/storage, internal/protofields, the storage interface journal holds,
//	internal/clientrate                  protobuf field walking, client rate defaults
//
// Library internals sit under the layer they serve, so internal/ itself
// holds only the bottom layer; test and demo support (the control plane,
// the recorder, the demo and cluster helpers) is under internal/testing,
// which no library package imports outside its tests.
//
// A package may import one of its own layer or below, never above:
// journal/inspect reports the loop through an interface of its own
// (inspect.Loop) that reconcile implements, as raft owns the LogStore
// that raft-boltdb implements. The test reads the import graph from
// `go list -json`; packages the table does not name (internal/testing,
// internal/layers) are not checked.
//
// A second test (issuerefs_test.go) reads every non-test Go file of the
// module and fails for a comment or string that cites an issue number:
// comments state the invariant, history is in git.
package layers
