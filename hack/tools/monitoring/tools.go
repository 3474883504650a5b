//go:build tools

// Package tools pins Prometheus: promtool checks and unit-tests the alert
// rules of the monitoring mixin (monitoring/), and `make up MONITORING=1`
// runs a real prometheus scraping the local hub and agents.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
