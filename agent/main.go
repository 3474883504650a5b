// Command agent is the Flotilla agent: a leader-elected Deployment per member
// cluster that keeps the hub informed and applies the member's Works, and, as
// `agent dns-probe`, the DaemonSet that probes each node's DNS.
package main

import (
	"os"

	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/agent/app"
)

func main() {
	defer klog.Flush()
	if err := app.NewAgentCommand().Execute(); err != nil {
		klog.Flush()
		os.Exit(1)
	}
}
