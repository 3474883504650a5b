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
