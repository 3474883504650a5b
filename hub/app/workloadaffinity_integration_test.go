package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// placement.workloadAffinity against the whole hub and a real apiserver
// (issue 39 item 3): anti-affine workloads never fail over onto the same
// cluster, and when that leaves none the workload says so and what runs
// stays. The test plays the member agents and the cluster failure (a
// NoExecute taint nothing tolerates, as sfTaint).

const waGroupKey = "pipeline.id"

// waStartHub is sfStartHub with a Kubernetes client too (events,
// namespaces).
func waStartHub(t *testing.T, clusters ...string) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, clusters...)
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

// waPropagate creates, in ns, a policy placing each selected Deployment on
// one of clusters with anti-affinity by waGroupKey, and one template per
// name labelled waGroupKey=group.
func waPropagate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns, group string, clusters []string, names ...string) {
	t.Helper()
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ha", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ha.enabled": "true"}}}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
				WorkloadAffinity:  &policyv1alpha1.WorkloadAffinity{AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: waGroupKey}},
			}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		manifest := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"labels":{%q:%q,"ha.enabled":"true"}},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},
"spec":{"containers":[{"name":"app","image":"flink:1.17"}]}}}}`, name, waGroupKey, group, name, name)
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, name, manifest), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func waBinding(name string) string { return workobjects.BindingName("Deployment", name) }

// waPlaced waits until each named workload of ns runs on exactly one
// cluster and returns them by workload.
func waPlaced(t *testing.T, fc flotillaclient.Interface, ns string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	waitUntil(t, fmt.Sprintf("%v placed on one cluster each", names), func() (bool, error) {
		for _, n := range names {
			rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), waBinding(n), metav1.GetOptions{})
			if err != nil || len(rb.Spec.Clusters) != 1 {
				return false, nil
			}
			out[n] = rb.Spec.Clusters[0].Name
		}
		return true, nil
	})
	return out
}

func waGet(t *testing.T, fc flotillaclient.Interface, ns, name string) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), waBinding(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

func waOther(clusters []string, not ...string) string {
	for _, c := range clusters {
		if !slices.Contains(not, c) {
			return c
		}
	}
	return ""
}

// Two anti-affine workloads on distinct clusters; the primary's cluster
// fails: it moves to the third cluster, never onto the replica's. A tenant
// of another namespace whose workload carries the same label runs on that
// third cluster, and blocks nothing: groups do not cross namespaces.
func TestWorkloadAntiAffinityFailover(t *testing.T) {
	t.Parallel()
	fleet := []string{"member1", "member2", "member3"}
	ctx, fc, kube := waStartHub(t, fleet...)
	waPropagate(t, ctx, fc, "default", "payments", fleet[:2], "primary", "replica")
	placed := waPlaced(t, fc, "default", "primary", "replica")
	if placed["primary"] == placed["replica"] {
		t.Fatalf("anti-affine workloads share %s", placed["primary"])
	}
	// The other tenant's look-alike, on the cluster left free.
	third := waOther(fleet, placed["primary"], placed["replica"])
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waPropagate(t, ctx, fc, "tenant-b", "payments", []string{third}, "squatter")
	if got := waPlaced(t, fc, "tenant-b", "squatter"); got["squatter"] != third {
		t.Fatalf("squatter on %s, want %s", got["squatter"], third)
	}
	// The policy lets the primary fail over to any cluster now.
	waitUntil(t, "policy widened to the whole fleet", func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies("default").Get(ctx, "ha", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.ClusterAffinity.ClusterNames = fleet
		_, err = fc.PolicyV1alpha1().PropagationPolicies("default").Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitUntil(t, "bindings carry the wider placement", func() (bool, error) {
		rb := waGet(t, fc, "default", "primary")
		return len(rb.Spec.Placement.ClusterAffinity.ClusterNames) == 3, nil
	})
	if placed2 := waPlaced(t, fc, "default", "primary", "replica"); placed2["primary"] != placed["primary"] || placed2["replica"] != placed["replica"] {
		t.Fatalf("a placement change moved what ran: %v, was %v", placed2, placed)
	}

	sfTaint(t, ctx, fc, placed["primary"], true)
	waitUntil(t, "primary failed over", func() (bool, error) {
		rb := waGet(t, fc, "default", "primary")
		if len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Name == placed["replica"] {
			return false, fmt.Errorf("primary failed over onto the replica's cluster %s", placed["replica"])
		}
		return len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Name != placed["primary"], nil
	})
	rb := waGet(t, fc, "default", "primary")
	if rb.Spec.Clusters[0].Name != third {
		t.Fatalf("primary on %v, want %s (the only cluster neither failed nor the replica's; another namespace's same-labelled workload runs there)", rb.Spec.Clusters, third)
	}
	if got := waGet(t, fc, "default", "replica").Spec.Clusters; len(got) != 1 || got[0].Name != placed["replica"] {
		t.Fatalf("replica moved: %v", got)
	}
	if rb.Spec.WorkloadAffinityGroups == nil || rb.Spec.WorkloadAffinityGroups.AntiAffinityGroup != waGroupKey+"=payments" {
		t.Fatalf("binding groups %+v", rb.Spec.WorkloadAffinityGroups)
	}
}

// The same with two clusters: no cluster is left for the primary. Its
// binding says so (Scheduled=False, NoClusterFit, naming the group) with a
// Warning event; its evicted copy stays (the graceful task is kept, the
// Work is not deleted) and the replica does not move.
func TestWorkloadAntiAffinityFailoverNoClusterLeft(t *testing.T) {
	t.Parallel()
	fleet := []string{"member1", "member2"}
	ctx, fc, kube := waStartHub(t, fleet...)
	waPropagate(t, ctx, fc, "default", "payments", fleet, "primary", "replica")
	placed := waPlaced(t, fc, "default", "primary", "replica")
	if placed["primary"] == placed["replica"] {
		t.Fatalf("anti-affine workloads share %s", placed["primary"])
	}
	work := waitWork(t, fc, placed["primary"], "default", waBinding("primary"), func(*unstructured.Unstructured) bool { return true })

	sfTaint(t, ctx, fc, placed["primary"], true)
	var msg string
	waitUntil(t, "primary unschedulable", func() (bool, error) {
		rb := waGet(t, fc, "default", "primary")
		if len(rb.Spec.Clusters) > 0 && rb.Spec.Clusters[0].Name == placed["replica"] {
			return false, fmt.Errorf("primary placed on the replica's cluster %s", placed["replica"])
		}
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return false, nil
		}
		msg = cond.Message
		return cond.Reason == "NoClusterFit", nil
	})
	for _, want := range []string{"already ran a workload of the same anti-affinity group", `anti-affinity group "pipeline.id=payments" runs on ` + placed["replica"]} {
		if !strings.Contains(msg, want) {
			t.Errorf("Scheduled message %q lacks %q", msg, want)
		}
	}
	rb := waGet(t, fc, "default", "primary")
	if len(rb.Spec.Clusters) != 0 || !slices.ContainsFunc(rb.Spec.GracefulEvictionTasks, func(task workv1alpha1.GracefulEvictionTask) bool {
		return task.FromCluster == placed["primary"]
	}) {
		t.Fatalf("primary: clusters %v, tasks %v; want none placed and its evicted copy kept by its task", rb.Spec.Clusters, rb.Spec.GracefulEvictionTasks)
	}
	if w, err := fc.WorkV1alpha1().Works(work.Namespace).Get(ctx, work.Name, metav1.GetOptions{}); err != nil || w.UID != work.UID || w.DeletionTimestamp != nil {
		t.Fatalf("the primary's Work on %s was deleted: %v %+v", placed["primary"], err, w)
	}
	if got := waGet(t, fc, "default", "replica").Spec.Clusters; len(got) != 1 || got[0].Name != placed["replica"] {
		t.Fatalf("replica moved: %v", got)
	}
	waitUntil(t, "a ScheduleBindingFailed event for the primary", func() (bool, error) {
		events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Reason == "ScheduleBindingFailed" && e.InvolvedObject.Name == waBinding("primary") && strings.Contains(e.Message, "anti-affinity")
		}), nil
	})
}
