//go:build tools

// Package tools pins staticcheck, the linter `make lint` (part of
// `make test`) runs with the repository's staticcheck.conf.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
)
