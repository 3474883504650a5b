package clustertaint

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// The built-in taints' timers count from the hub's own record (the
// NoSchedule taint's timeAdded), never from the agent-written
// lastTransitionTime; the state lives in the Cluster, so a restarted hub
// (a fresh call) continues the same timer.
func TestBuiltinTaintTimersUseTheHubClock(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	const timeout = 5 * time.Minute
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	cond := func(status metav1.ConditionStatus, ltt time.Time) *metav1.Condition {
		return &metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: status, LastTransitionTime: metav1.NewTime(ltt)}
	}
	notReadyNS := func(added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule, TimeAdded: added}
	}
	notReadyNE := func(added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: added}
	}
	unreachNS := func(added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: added}
	}
	unreachNE := func(added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: added}
	}
	for _, tc := range []struct {
		name    string
		taints  []corev1.Taint
		ready   *metav1.Condition
		guardOK bool
		want    []corev1.Taint
		wantDue time.Time
	}{
		{name: "agent clock an hour behind: NoSchedule now, NoExecute only after the timeout",
			ready: cond(metav1.ConditionFalse, now.Add(-time.Hour)), guardOK: true,
			want: []corev1.Taint{notReadyNS(at(0))}, wantDue: now.Add(timeout)},
		{name: "agent clock an hour ahead: same",
			ready: cond(metav1.ConditionFalse, now.Add(time.Hour)), guardOK: true,
			want: []corev1.Taint{notReadyNS(at(0))}, wantDue: now.Add(timeout)},
		{name: "restarted hub mid-timer: keeps counting from timeAdded, not from now",
			taints: []corev1.Taint{notReadyNS(at(-4 * time.Minute))}, ready: cond(metav1.ConditionFalse, now.Add(time.Hour)), guardOK: true,
			want: []corev1.Taint{notReadyNS(at(-4 * time.Minute))}, wantDue: now.Add(time.Minute)},
		{name: "timer ran out: NoExecute, even with an agent clock an hour ahead",
			taints: []corev1.Taint{notReadyNS(at(-timeout))}, ready: cond(metav1.ConditionFalse, now.Add(time.Hour)), guardOK: true,
			want: []corev1.Taint{notReadyNS(at(-timeout)), notReadyNE(at(0))}},
		{name: "fleet guard holds NoExecute",
			taints: []corev1.Taint{notReadyNS(at(-timeout))}, ready: cond(metav1.ConditionFalse, now), guardOK: false,
			want: []corev1.Taint{notReadyNS(at(-timeout))}},
		{name: "False to Unknown: the timer keeps running (a flapping agent cannot hold off failover)",
			taints: []corev1.Taint{notReadyNS(at(-4 * time.Minute))}, ready: cond(metav1.ConditionUnknown, now), guardOK: true,
			want: []corev1.Taint{unreachNS(at(-4 * time.Minute))}, wantDue: now.Add(time.Minute)},
		{name: "False to Unknown after NoExecute: NoExecute moves with its timeAdded",
			taints: []corev1.Taint{notReadyNS(at(-10 * time.Minute)), notReadyNE(at(-5 * time.Minute))}, ready: cond(metav1.ConditionUnknown, now), guardOK: true,
			want: []corev1.Taint{unreachNS(at(-10 * time.Minute)), unreachNE(at(-5 * time.Minute))}},
		{name: "a built-in NoSchedule taint without timeAdded (added by hand) gets one, so its timer can start",
			taints: []corev1.Taint{unreachNS(nil)}, ready: cond(metav1.ConditionUnknown, now.Add(-time.Hour)), guardOK: true,
			want: []corev1.Taint{unreachNS(at(0))}, wantDue: now.Add(timeout)},
		{name: "Ready again: both keys go, other taints stay",
			taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}, unreachNS(at(-time.Hour)), unreachNE(at(-time.Minute))},
			ready:  cond(metav1.ConditionTrue, now), guardOK: true,
			want: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "no Ready condition, built-in taints already there (status wiped): nothing changes",
			taints: []corev1.Taint{unreachNS(at(-time.Hour))}, guardOK: true,
			want: []corev1.Taint{unreachNS(at(-time.Hour))}},
		{name: "never reported: not-ready NoSchedule at once, no timer, no NoExecute",
			taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}, guardOK: true,
			want: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}, notReadyNS(nil)}},
		{name: "never reported, then Unknown: the timer starts now, not at registration",
			taints: []corev1.Taint{notReadyNS(nil)}, ready: cond(metav1.ConditionUnknown, now.Add(-time.Hour)), guardOK: true,
			want: []corev1.Taint{unreachNS(at(0))}, wantDue: now.Add(timeout)},
		{name: "never reported, then False: the timer starts now",
			taints: []corev1.Taint{notReadyNS(nil)}, ready: cond(metav1.ConditionFalse, now.Add(-time.Hour)), guardOK: true,
			want: []corev1.Taint{notReadyNS(at(0))}, wantDue: now.Add(timeout)},
		{name: "never reported, then Ready: the taint goes",
			taints: []corev1.Taint{notReadyNS(nil)}, ready: cond(metav1.ConditionTrue, now), guardOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, due := builtinTaints(tc.taints, tc.ready, now, timeout, tc.guardOK)
			if !taintsEqual(got, tc.want) {
				t.Errorf("taints = %v, want %v", got, tc.want)
			}
			if !due.Equal(tc.wantDue) {
				t.Errorf("due = %v, want %v", due, tc.wantDue)
			}
		})
	}
}

// With --failover-eviction-timeout=0 no NoExecute taint is ever added.
func TestBuiltinTaintsNoExecuteDisabled(t *testing.T) {
	now := time.Now()
	ready := &metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown}
	old := []corev1.Taint{{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: now.Add(-time.Hour)}}}
	got, due := builtinTaints(old, ready, now, 0, true)
	if !taintsEqual(got, old) || !due.IsZero() {
		t.Errorf("got %v due %v, want %v and no due time", got, due, old)
	}
}

func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Effect != b[i].Effect || a[i].Value != b[i].Value ||
			(a[i].TimeAdded == nil) != (b[i].TimeAdded == nil) || a[i].TimeAdded != nil && !a[i].TimeAdded.Equal(b[i].TimeAdded) {
			return false
		}
	}
	return true
}

// The pass that first sees Ready leave True writes NoSchedule and, when
// --failover-eviction-timeout has already passed (the failover benchmark's
// 1ms) and the guard admits it, NoExecute with it: one write, no second
// pass. Not when the guard refuses, nor before the timeout.
func TestBuiltinTaintsNoExecuteInTheSamePass(t *testing.T) {
	now := time.Date(2026, 12, 7, 1, 2, 36, 500_000_000, time.UTC)
	ready := &metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown}
	sec := &metav1.Time{Time: now.Truncate(time.Second)}
	ns := corev1.Taint{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: sec}
	ne := corev1.Taint{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: sec}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		guardOK bool
		want    []corev1.Taint
		due     time.Time
	}{
		{"timeout passed, guard admits", time.Millisecond, true, []corev1.Taint{ns, ne}, time.Time{}},
		{"timeout passed, guard refuses", time.Millisecond, false, []corev1.Taint{ns}, time.Time{}},
		{"timeout not passed", 5 * time.Minute, true, []corev1.Taint{ns}, sec.Add(5 * time.Minute)},
	} {
		got, due := builtinTaints(nil, ready, now, tc.timeout, tc.guardOK)
		if !taintsEqual(got, tc.want) || !due.Equal(tc.due) {
			t.Errorf("%s: got %v due %v, want %v due %v", tc.name, got, due, tc.want, tc.due)
		}
	}
}
