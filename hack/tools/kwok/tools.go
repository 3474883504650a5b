//go:build tools

// Package tools pins kwok and kwokctl, which run the fake member clusters.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
