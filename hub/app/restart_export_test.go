package app

// What the hub restart report (restart_integration_test.go, package
// app_test: it needs e2e/framework, which imports this package) borrows from
// the hub memory report: the filled fleet.
var (
	FillFleet        = fillFleet
	HubMemoryCluster = hubMemoryCluster
)

const HubMemoryNamespace = hubMemoryNamespace
