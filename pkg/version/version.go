// Package version reports the build of the hub and agent binaries; the
// Makefile sets Version and GitCommit with -ldflags -X.
package version

import "runtime"

var (
	// Version is the release (or `git describe`) the binary was built from.
	Version = "v0.0.0-dev"
	// GitCommit is the commit the binary was built from.
	GitCommit = "unknown"
)

// String is the one-line form printed by `--version` and logged at start-up.
func String() string {
	return Version + " (commit " + GitCommit + ", " + runtime.Version() + ")"
}
