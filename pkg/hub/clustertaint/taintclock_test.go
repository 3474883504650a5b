package clustertaint

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// Issue 31 item 2: a taint written without timeAdded (kubectl, most tools)
// is stamped with when the hub first saw it, and keeps that time across
// passes and hand edits; a stamped one is authoritative.
func TestStampTaints(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	maint := func(value string, added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: "maintenance", Value: value, Effect: corev1.TaintEffectNoExecute, TimeAdded: added}
	}
	noSchedule := corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoSchedule}

	// First sight: both effects stamped with now (to the second).
	got, seen := stampTaints([]corev1.Taint{maint("", nil), noSchedule}, nil, t0.Add(300*time.Millisecond), nil)
	if !got[0].TimeAdded.Equal(at(0)) || !got[1].TimeAdded.Equal(at(0)) {
		t.Fatalf("first sight: %+v", got)
	}
	// A later pass, the stamp not written yet: the same time, not now.
	got, seen = stampTaints([]corev1.Taint{maint("", nil), noSchedule}, seen, t0.Add(time.Minute), nil)
	if !got[0].TimeAdded.Equal(at(0)) || !got[1].TimeAdded.Equal(at(0)) {
		t.Fatalf("second pass moved the time: %+v", got)
	}
	// Edited by hand: the value changes and timeAdded is lost on the way.
	got, seen = stampTaints([]corev1.Taint{maint("v2", nil)}, seen, t0.Add(2*time.Minute), nil)
	if !got[0].TimeAdded.Equal(at(0)) || got[0].Value != "v2" {
		t.Fatalf("a hand edit reset the time: %+v", got)
	}
	// A stamped taint is authoritative (and what a restarted hub reads).
	got, seen = stampTaints([]corev1.Taint{maint("v2", at(-time.Hour))}, seen, t0.Add(3*time.Minute), nil)
	if !got[0].TimeAdded.Equal(at(-time.Hour)) {
		t.Fatalf("the stamp was overridden: %+v", got)
	}
	// Removed, then added again: a new taint, a new time.
	_, seen = stampTaints(nil, seen, t0.Add(4*time.Minute), nil)
	got, _ = stampTaints([]corev1.Taint{maint("", nil)}, seen, t0.Add(5*time.Minute), nil)
	if !got[0].TimeAdded.Equal(at(5 * time.Minute)) {
		t.Fatalf("a re-added taint kept an old time: %+v", got)
	}
	// keep leaves a taint unstamped.
	got, seen = stampTaints([]corev1.Taint{noSchedule}, nil, t0, func(corev1.Taint) bool { return true })
	if got[0].TimeAdded != nil || len(seen) != 0 {
		t.Fatalf("keep: %+v %v", got, seen)
	}
}

// The never-reported cluster's not-ready NoSchedule taint stays without
// timeAdded (its failover timer starts when Ready is first reported);
// every other taint of it is stamped. The input is never changed.
func TestTaintClockLeavesTheNeverReportedPlaceholder(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	tc := NewTaintClock(clk)
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "m1"}, Spec: clusterv1alpha1.ClusterSpec{Taints: []corev1.Taint{
		{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
	}}}
	got := tc.Taints(cl)
	if got[0].TimeAdded != nil || got[1].TimeAdded == nil || cl.Spec.Taints[1].TimeAdded != nil {
		t.Fatalf("never reported: %+v (input %+v)", got, cl.Spec.Taints)
	}
	cl.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown}}
	clk.Step(time.Minute)
	got = tc.Taints(cl)
	if got[0].TimeAdded == nil || !got[0].TimeAdded.Equal(&metav1.Time{Time: clk.Now()}) || got[1].TimeAdded.Time.Equal(clk.Now()) {
		t.Fatalf("reported: %+v", got)
	}
	tc.Forget("m1")
	if len(tc.seen) != 0 {
		t.Fatalf("Forget left %v", tc.seen)
	}
}
