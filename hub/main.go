// Command hub is the Flotilla hub: it runs on a host cluster and keeps member
// clusters' workloads placed, healthy and failed over.
package main

import (
	"os"

	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/hub/app"
)

func main() {
	defer klog.Flush()
	if err := app.NewHubCommand().Execute(); err != nil {
		klog.Flush()
		os.Exit(1)
	}
}
