// Command agent is the Flotilla agent: a leader-elected Deployment per member
// cluster that keeps the hub informed and applies the member's Works, and, as
// `agent dns-probe`, the DaemonSet that probes each node's DNS.
package main

import (
	"os"

	"k8s.io/klog/v2"
	// The image (hack/image) has no CA bundle: with no system roots,
	// crypto/x509 falls back to these Mozilla roots, so TLS to public
	// endpoints (an OIDC issuer, a cloud API, a webhook in front of the
	// hub) still verifies. Only used when the system has no roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/flotilla-io/flotilla/agent/app"
)

func main() {
	defer klog.Flush()
	if err := app.NewAgentCommand().Execute(); err != nil {
		klog.Flush()
		os.Exit(1)
	}
}
