package app

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The hub line says who decides and since when, and tells a holder that
// stopped renewing (its host apiserver away) from one that decides.
func TestBuildHubView(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	lease := func(renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("hub-7d9f_1"), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: now.Add(-time.Hour)}, RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}, LeaseTransitions: ptr.To[int32](3)}}
	}
	for _, tc := range []struct {
		name    string
		lease   *coordinationv1.Lease
		current bool
		line    string
	}{
		{"leading", lease(2 * time.Second), true, "Hub: hub-7d9f_1 leads, since 60m ago (renewed 2s ago)"},
		{"stopped renewing", lease(time.Minute), false, "Hub: no leader deciding: hub-7d9f_1 last renewed 60s ago, past its Lease"},
		{"no Lease", nil, false, "Hub: no leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildHubView(tc.lease, now)
			if v.Current != tc.current {
				t.Errorf("current %v, want %v", v.Current, tc.current)
			}
			if got := hubLine(v, now); got != tc.line {
				t.Errorf("line %q, want %q", got, tc.line)
			}
			if tc.lease != nil && (v.Transitions != 3 || v.Since == nil || !strings.HasPrefix(v.Leader, "hub-")) {
				t.Errorf("view %+v", v)
			}
		})
	}
	if got := hubLine(HubView{Problem: "forbidden"}, now); !strings.Contains(got, "forbidden") {
		t.Errorf("problem line %q", got)
	}
}
