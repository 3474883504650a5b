// Command hub is the Flotilla hub: it runs on a host cluster and keeps member
// clusters' workloads placed, healthy and failed over.
package main

import (
	"os"
	"runtime/debug"

	"k8s.io/klog/v2"
	// The image (hack/image) has no CA bundle: with no system roots,
	// crypto/x509 falls back to these Mozilla roots, so TLS to public
	// endpoints (an OIDC issuer, a cloud API, a webhook in front of the
	// hub) still verifies. Only used when the system has no roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/flotilla-io/flotilla/hub/app"
)

// defaultGCPercent is the hub's GOGC when the environment sets none. Most
// of the hub's heap is its informers' caches, which live as long as the
// hub; Go's default (100) lets garbage grow as large as all of them before
// collecting, so the hub's memory peaks near twice its caches. At 40 it
// peaks near 1.4 times, for about a quarter more of the hub's (small) CPU:
// 10,000 templates over 100 clusters peaked at 230 MiB instead of ~400 MiB
// (docs/benchmarks.md, issue 20). Prometheus lowered its default for the
// same reason (40 in 2017, 75 since v2.53). GOGC in the environment wins.
const defaultGCPercent = 40

func main() {
	defer klog.Flush()
	if gcPercent, set := gcPercentFor(os.LookupEnv); set {
		debug.SetGCPercent(gcPercent)
	}
	if err := app.NewHubCommand().Execute(); err != nil {
		klog.Flush()
		os.Exit(1)
	}
}

// gcPercentFor returns defaultGCPercent and true when the environment
// (lookup) sets no GOGC; the Go runtime has applied one that is set.
func gcPercentFor(lookup func(string) (string, bool)) (int, bool) {
	if _, ok := lookup("GOGC"); ok {
		return 0, false
	}
	return defaultGCPercent, true
}
