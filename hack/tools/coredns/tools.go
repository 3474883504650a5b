//go:build tools

// Package tools pins CoreDNS, the real in-cluster DNS each member runs.
package tools

import _ "github.com/coredns/coredns"
