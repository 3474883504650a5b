package main

import (
	"testing"
)

// TestRenderedOutputsAreCurrent fails when monitoring/mixin changed and the
// committed monitoring/prometheus-alerts.yaml, prometheusrule.yaml or
// dashboards/ were not regenerated.
func TestRenderedOutputsAreCurrent(t *testing.T) {
	files, err := render("../..")
	if err != nil {
		t.Fatalf("rendering the mixin: %v", err)
	}
	for _, want := range []string{RulesFile, PrometheusRuleFile, DashboardsDir + "/flotilla-fleet.json"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the mixin does not render %s", want)
		}
	}
	bad, err := stale("../..", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bad {
		t.Errorf("%s is stale: run `make monitoring` and commit the result", p)
	}
}
