package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
)

// Issue 30 item 5: failback never loops. A clusterAffinities workload whose
// first term never fits (it asks for two clusters and the first term has
// one Ready) runs on the backup term from the start: it left nothing, and
// the scheduler would not place it on the first term, so no failback starts
// however many 1 s windows pass (before the fix one started in every
// window, each a hub write and a fresh schedule that landed on the backup
// term again). Once the first term fits (member4 joins it) the scheduler
// confirms it and the workload fails back there once.
func TestFailbackNeverLoopsWhenTheFirstTermDoesNotFit(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fbStartHub(t, "member1", "member2", "member3")
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-terms", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member4"}}},
					{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2", "member3"}}},
				},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: 1}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const name = "nginx-deployment"
	onTerm := func(term string, clusters ...string) func() (bool, error) {
		return func() (bool, error) {
			rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			var got []string
			for _, c := range rb.Spec.Clusters {
				got = append(got, c.Name)
			}
			return rb.Status.SchedulerObservedAffinityName == term && strings.Join(got, ",") == strings.Join(clusters, ","), nil
		}
	}
	waitUntil(t, "nginx on the backup term (member2, member3)", onTerm("backup", "member2", "member3"))
	start, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Eight windows: no failback, no write to the binding's spec.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rb.Spec.RescheduleReason == workv1alpha1.EvictionReasonFailback || rb.Generation != start.Generation {
			t.Fatalf("a failback started (or the spec changed) though the workload left nothing and the first term cannot fit: generation %d -> %d, rescheduleReason %q at %v",
				start.Generation, rb.Generation, rb.Spec.RescheduleReason, rb.Spec.RescheduleTriggeredAt)
		}
		time.Sleep(200 * time.Millisecond)
	}
	events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == failback.EventFailbackStarted {
			t.Fatalf("event %s: %s", e.Reason, e.Message)
		}
	}

	// The first term fits once member4 joins: the scheduler confirms it,
	// and the workload fails back there, once.
	createReadyClusters(t, ctx, fc, "member4")
	fbRunMembers(ctx, fc, []string{"member4"})
	waitUntil(t, "nginx failed back to the first term (member1, member4)", onTerm("primary", "member1", "member4"))
	fbWaitEvent(t, kube, failback.EventFailbackStarted, "member1, member4")
	time.Sleep(3 * time.Second)
	events, err = kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range events.Items {
		if e.Reason == failback.EventFailbackStarted {
			started += int(e.Count)
		}
	}
	if started != 1 {
		t.Fatalf("%d failbacks started, want 1: %s", started, fmt.Sprint(eventsOf(events.Items, failback.EventFailbackStarted)))
	}
}

func eventsOf(items []corev1.Event, reason string) []string {
	var out []string
	for _, e := range items {
		if e.Reason == reason {
			out = append(out, fmt.Sprintf("%s (x%d)", e.Message, e.Count))
		}
	}
	return out
}
