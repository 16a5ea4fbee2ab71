// Command kube-apiserver is the upstream kube-apiserver, built from the Go
// module proxy so that watchjournal's tests and demo run against a real
// control plane. It is a separate module so that k8s.io/kubernetes never
// enters the library's go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
