// Command etcd is the upstream etcd server, built from the Go module proxy so
// that watchjournal's tests and demo run against a real control plane. It is
// a separate module so that etcd's server never enters the library's go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
