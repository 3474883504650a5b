// Command hub is the Flotilla hub: it runs on a host cluster and keeps member
// clusters' workloads placed, healthy and failed over.
package main

import (
	"os"

	"k8s.io/klog/v2"
	// The image (hack/image) has no CA bundle: with no system roots,
	// crypto/x509 falls back to these Mozilla roots, so TLS to public
	// endpoints (an OIDC issuer, a cloud API, a webhook in front of the
	// hub) still verifies. Only used when the system has no roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/flotilla-io/flotilla/hub/app"
)

func main() {
	defer klog.Flush()
	if err := app.NewHubCommand().Execute(); err != nil {
		klog.Flush()
		os.Exit(1)
	}
}
