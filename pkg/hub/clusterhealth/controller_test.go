package clusterhealth

import (
	"testing"
	"time"
)

func TestRenewObservedAt(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		renew time.Time
		want  time.Time
	}{
		{"renewal seen at once", now, now},
		{"watch event late by 2s: the renewal counts from renewTime", now.Add(-2 * time.Second), now.Add(-2 * time.Second)},
		{"agent clock far behind: clamped to the trust window", now.Add(-time.Minute), now.Add(-renewTrustWindow)},
		{"agent clock ahead: counts from now", now.Add(time.Minute), now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewObservedAt(tc.renew, now); !got.Equal(tc.want) {
				t.Errorf("renewObservedAt(%v) = %v, want %v", tc.renew, got, tc.want)
			}
		})
	}
}

// Only a renewal is a heartbeat: a Lease that vanished or was made again
// (no renewTime) does not restart the grace period; a cluster first seen
// without a Lease starts its startup grace at once.
func TestObserveCountsOnlyRenewals(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &Controller{opts: Options{GracePeriod: 40 * time.Second, StartupGracePeriod: 60 * time.Second}, seen: map[string]*observation{}}

	if obs := c.observe("nolease", time.Time{}, time.Time{}, start); obs.reported || !obs.observedAt.Equal(start) {
		t.Fatalf("first sight without a Lease: %+v, want unreported, counting from now", obs)
	}

	renewed := start.Add(time.Second)
	obs := c.observe("m", renewed, start.Add(-time.Hour), renewed)
	if !obs.reported || !obs.observedAt.Equal(renewed) {
		t.Fatalf("first sight of a renewed Lease: %+v", obs)
	}
	later := renewed.Add(20 * time.Second)
	for _, step := range []struct {
		name          string
		renew, create time.Time
	}{
		{"Lease deleted", time.Time{}, time.Time{}},
		{"Lease made again by the hub, not renewed", time.Time{}, later},
	} {
		obs = c.observe("m", step.renew, step.create, later)
		if !obs.observedAt.Equal(renewed) || !obs.reported {
			t.Errorf("%s: observedAt %v reported %v, want the last renewal %v", step.name, obs.observedAt, obs.reported, renewed)
		}
	}
	// The agent renews the new Lease with a clock an hour behind: counts
	// as a renewal seen now (clamped to the trust window), not an hour ago.
	agentRenew := later.Add(-time.Hour)
	obs = c.observe("m", agentRenew, later, later)
	if want := later.Add(-renewTrustWindow); !obs.observedAt.Equal(want) {
		t.Errorf("renewal of the remade Lease: observedAt %v, want %v", obs.observedAt, want)
	}
}
