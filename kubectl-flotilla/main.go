// Command kubectl-flotilla is the kubectl plugin `kubectl flotilla`: where
// workloads run across the fleet and why, read from the hub's objects.
// kubectl runs it for `kubectl flotilla ...` when it is in PATH.
package main

import (
	"os"

	"github.com/flotilla-io/flotilla/kubectl-flotilla/app"
)

func main() {
	if err := app.NewCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}
