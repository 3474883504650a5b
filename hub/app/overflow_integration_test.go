package app_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
)

// Issue 31 item 4: clusterAffinities[].overflowAffinities with failback.
// The preferred group (member1, on-prem) has no room: nginx overflows to
// member2 (public-cloud) and stays there while member1 is full. member1
// gets room for 2: after the stabilization window 2 replicas come back,
// member2 keeps its old 3 until they are healthy (never fewer than 3
// available), and nothing moves again while the room is gone (no flapping).
// member1 gets room for the last one: it comes back, member2's copy goes.
func TestOverflowThenComeBack(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fbStartHub(t, "member1", "member2")
	sfSetRoom(t, ctx, fc, "member1", 0)
	const window = 2
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-overflow", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "on-prem",
					ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}},
					OverflowAffinities: []policyv1alpha1.OverflowClusterAffinity{{AffinityName: "public-cloud",
						ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}}}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: window}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fbWaitSettled(t, fc, map[string]int32{"member2": 3}, "nginx")
	if rb := fbBinding(t, fc, "nginx"); rb.Status.SchedulerObservedAffinityName != "on-prem" {
		t.Fatalf("scheduled on term %q, want on-prem (its overflow group)", rb.Status.SchedulerObservedAffinityName)
	}
	// Full for more than a window: nothing comes back.
	stayed := fbBinding(t, fc, "nginx").Generation
	time.Sleep(window*time.Second + time.Second)
	if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) || rb.Generation != stayed {
		t.Fatalf("moved while the preferred group is full: %+v", rb.Spec)
	}

	sampler := fbStartSampler(ctx, fc)
	roomAt := time.Now()
	sfSetRoom(t, ctx, fc, "member1", 2)
	waitReplicas(t, fc, "default", fbBindingName("nginx"), map[string]int32{"member1": 2, "member2": 1})
	// The 2 run on member1 now: its agent reports the room taken.
	sfSetRoom(t, ctx, fc, "member1", 0)
	rb := fbBinding(t, fc, "nginx")
	if !fbFailedBack(rb) {
		t.Fatalf("came back without a failback: %+v", rb.Spec)
	}
	if earliest := roomAt.Add(window*time.Second - time.Second); rb.Spec.RescheduleTriggeredAt.Time.Before(earliest) {
		t.Errorf("came back at %s, before the room (from %s) had held for the window", rb.Spec.RescheduleTriggeredAt, roomAt)
	}
	fbWaitEvent(t, kube, failback.EventFailbackStarted, "come back to member1(0→2)")
	fbWaitSettled(t, fc, map[string]int32{"member1": 2, "member2": 1}, "nginx")
	if min := sampler.Stop(); min["nginx"] < 3 {
		t.Fatalf("during the come-back only %d replicas were available at one moment; want at least 3", min["nginx"])
	}

	// No room left: two windows without another move.
	settled := fbBinding(t, fc, "nginx")
	time.Sleep(2 * window * time.Second)
	if rb := fbBinding(t, fc, "nginx"); rb.Generation != settled.Generation {
		t.Fatalf("the binding changed again with no room in the preferred group (flapping): %+v", rb.Spec)
	}

	// Room for the last one: it comes back, member2's copy goes.
	sfSetRoom(t, ctx, fc, "member1", 1)
	fbWaitSettled(t, fc, map[string]int32{"member1": 3}, "nginx")
	waitUntil(t, "member2's Work gone", func() (bool, error) {
		list, err := fc.WorkV1alpha1().Works("flotilla-es-member2").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	rb = fbBinding(t, fc, "nginx")
	if rb.Spec.RescheduleReason != workv1alpha1.EvictionReasonFailback || len(rb.Spec.Clusters) != 1 {
		t.Fatalf("want member1(3) after a second come-back: %+v", rb.Spec)
	}
}
