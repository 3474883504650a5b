package main

import "testing"

// The hub collects at defaultGCPercent unless GOGC is set, even to the Go
// default or "off": an operator's GOGC always wins.
func TestGCPercentFor(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	if got, set := gcPercentFor(env(nil)); !set || got != defaultGCPercent {
		t.Errorf("no GOGC: got %d, %v; want %d, true", got, set, defaultGCPercent)
	}
	for _, v := range []string{"100", "off", "", "25"} {
		if _, set := gcPercentFor(env(map[string]string{"GOGC": v})); set {
			t.Errorf("GOGC=%q: the hub overrides it", v)
		}
	}
}
