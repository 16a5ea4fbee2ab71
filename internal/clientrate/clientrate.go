// Package clientrate holds the client-side rate limits that journalctl
// and the benchmark harness (make bench) give client-go, so that the
// benchmark measures the journal the way the CLI runs it.
//
// client-go's own default is 5 requests/s with a burst of 10
// (rest.DefaultQPS, rest.DefaultBurst): a list of 2,000 objects at page
// size 5 (400 requests) then waits about 80 s on the client alone, and
// every relist of a large resource is throttled. The defaults here turn
// client-side limiting off and leave flow control to the apiserver's API
// Priority and Fairness (GA since Kubernetes 1.29), which queues or
// rejects (429 with Retry-After) what it cannot serve. Sources:
//
//   - SIG API Machinery's advice, as controller-runtime implements it
//     (kubernetes-sigs/controller-runtime#3119, merged February 2025,
//     "Config: Disable client-side ratelimiter by default": QPS -1 in
//     pkg/client/config), and kubernetes/kubernetes#111880 ("Disable
//     client-side rate-limiting when AP&F is enabled").
//   - kubectl v1.37 (k8s.io/kubectl pkg/cmd/cmd.go defaultConfigFlags:
//     WithDiscoveryBurst(300).WithDiscoveryQPS(50.0); k8s.io/cli-runtime
//     pkg/genericclioptions/config_flags.go toDiscoveryClient) raises the
//     limit to 50/s, burst 300, for discovery, where it sends bursts, and
//     keeps client-go's default elsewhere, since a kubectl command sends
//     a handful of requests. A journal's relists send hundreds: Burst
//     here is kubectl's 300, used when --qps turns limiting back on.
package clientrate

import "k8s.io/client-go/rest"

const (
	// QPS is the default client-side limit in requests per second: -1
	// turns client-side rate limiting off (rest.Config.QPS: a negative
	// value disables it), relying on the apiserver's API Priority and
	// Fairness. 0 would mean client-go's default, 5.
	QPS float32 = -1
	// Burst is the default burst, in requests, for a positive QPS:
	// kubectl's discovery burst. It has no effect while QPS is negative.
	Burst = 300
)

// Apply sets cfg's client-side rate limit to qps requests per second with
// burst, and clears a RateLimiter that would override them. qps < 0 turns
// client-side limiting off; qps 0 and burst 0 mean client-go's defaults
// (5 and 10).
func Apply(cfg *rest.Config, qps float32, burst int) {
	cfg.QPS, cfg.Burst, cfg.RateLimiter = qps, burst, nil
}
