package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/hub/app"
	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/workloadrebalancer"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// wrRunHub runs a hub against env until the returned stop is called (or
// the test ends), with clusters that stay Ready without a Lease.
func wrRunHub(t *testing.T, env *testenv.Env) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func wrGet(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	r, err := fc.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wrWaitFinished waits for the rebalancer's finishTime and returns it.
func wrWaitFinished(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	var r *appsv1alpha1.WorkloadRebalancer
	waitUntil(t, "WorkloadRebalancer "+name+" finished", func() (bool, error) {
		r = wrGet(t, ctx, fc, name)
		return r.Status.FinishTime != nil && r.Status.ObservedGeneration == r.Generation, nil
	})
	return r
}

// A WorkloadRebalancer brings the seed's nginx, skewed by a failover to
// member2:3, back to its weights member1:1 member2:2, gracefully: member2's
// Work keeps 3 until member1's copy is Healthy. The status says which
// workloads were rescheduled and which have no binding; a hub restart, even
// one that lost the status, triggers nothing again; ttlSecondsAfterFinished
// deletes the finished object.
func TestWorkloadRebalancer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	stop := wrRunHub(t, env)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	gsFailedOver(t, ctx, fc)
	if rb := sfBindingOf(t, ctx, fc); len(rb.Spec.EvictionHistory) == 0 {
		t.Fatal("the failover left no eviction history")
	}

	nginx := appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	missing := appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "missing"}
	_, err := fc.AppsV1alpha1().WorkloadRebalancers().Create(ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "rebalance-nginx"},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{nginx, missing}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Rescheduled from scratch, as if new: the weights again, history gone.
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
	rb := sfBindingOf(t, ctx, fc)
	if rb.Spec.RescheduleReason != workv1alpha1.EvictionReasonRebalance || rb.Spec.RescheduleTriggeredAt == nil || len(rb.Spec.EvictionHistory) != 0 {
		t.Fatalf("binding after the rebalance: reason %q, triggeredAt %v, history %+v", rb.Spec.RescheduleReason, rb.Spec.RescheduleTriggeredAt, rb.Spec.EvictionHistory)
	}
	triggeredAt := rb.Spec.RescheduleTriggeredAt
	if len(rb.Spec.GracefulEvictionTasks) != 1 || rb.Spec.GracefulEvictionTasks[0].FromCluster != "member2" ||
		rb.Spec.GracefulEvictionTasks[0].Reason != workv1alpha1.EvictionReasonRebalance {
		t.Fatalf("tasks after the rebalance: %+v", rb.Spec.GracefulEvictionTasks)
	}
	// Gracefully: member2 keeps its 3 until member1's copy is up.
	waitWork(t, fc, "member1", "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 1 })
	if got := gsWorkReplicas(t, ctx, fc, "member2"); got != 3 {
		t.Fatalf("member2's Work asks for %d replicas before member1's copy is up; want 3", got)
	}
	sfApplied(t, fc, "member1", 1)
	sfApplied(t, fc, "member2", 2)
	waitUntil(t, "the rebalance's task ended", func() (bool, error) {
		return len(sfBindingOf(t, ctx, fc).Spec.GracefulEvictionTasks) == 0, nil
	})

	r := wrWaitFinished(t, ctx, fc, "rebalance-nginx")
	want := []appsv1alpha1.ObservedWorkload{
		{Workload: missing, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
		{Workload: nginx, Result: appsv1alpha1.RebalanceSuccessful},
	}
	if len(r.Status.ObservedWorkloads) != 2 || r.Status.ObservedWorkloads[0] != want[0] || r.Status.ObservedWorkloads[1] != want[1] {
		t.Fatalf("observed workloads %+v, want %+v", r.Status.ObservedWorkloads, want)
	}

	// A restart that also lost the status (the hub crashed after
	// triggering, before writing it): the same results, no new trigger.
	stop()
	r.Status = appsv1alpha1.WorkloadRebalancerStatus{}
	if _, err := fc.AppsV1alpha1().WorkloadRebalancers().UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wrRunHub(t, env)
	r = wrWaitFinished(t, ctx, fc, "rebalance-nginx")
	if len(r.Status.ObservedWorkloads) != 2 || r.Status.ObservedWorkloads[1] != want[1] {
		t.Fatalf("observed workloads after the restart %+v", r.Status.ObservedWorkloads)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rb := sfBindingOf(t, ctx, fc)
		if !rb.Spec.RescheduleTriggeredAt.Equal(triggeredAt) {
			t.Fatalf("the restarted hub triggered nginx again: rescheduleTriggeredAt %s, was %s", rb.Spec.RescheduleTriggeredAt, triggeredAt)
		}
		if w := gsWorkReplicas(t, ctx, fc, "member2"); w != 2 {
			t.Fatalf("member2's Work asks for %d after the restart, want 2", w)
		}
	}

	// ttlSecondsAfterFinished deletes it.
	waitUntil(t, "ttl set", func() (bool, error) {
		r := wrGet(t, ctx, fc, "rebalance-nginx")
		ttl := int32(1)
		r.Spec.TTLSecondsAfterFinished = &ttl
		_, err := fc.AppsV1alpha1().WorkloadRebalancers().Update(ctx, r, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitUntil(t, "the finished WorkloadRebalancer deleted after its TTL", func() (bool, error) {
		_, err := fc.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "rebalance-nginx", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// A TTL counted from the finish: the hub comes back at the deadline
	// (nothing else happens to the object after it finished).
	ttl := int32(2)
	if _, err := fc.AppsV1alpha1().WorkloadRebalancers().Create(ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "rebalance-missing"},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{missing}, TTLSecondsAfterFinished: &ttl}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "rebalance-missing deleted after its TTL", func() (bool, error) {
		_, err := fc.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "rebalance-missing", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The workload stays where the rebalance put it.
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
	if _, err := fc.WorkV1alpha1().Works("flotilla-es-member2").Get(ctx, workobjects.WorkName("default", sfBinding), metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A cluster-scoped workload (no namespace) is found through its
// ClusterResourceBinding; a reference of another API group with the same
// kind and name is not that workload.
func TestWorkloadRebalancerClusterScoped(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1")
	if _, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer"}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "viewer"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crt := &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"viewer"},"rules":[]}`)}}}}
	if _, err := fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, crt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := workobjects.BindingName("ClusterRole", "viewer")
	waitWork(t, fc, "member1", "", name, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ClusterRole" })

	viewer := appsv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "viewer"}
	other := appsv1alpha1.ObjectReference{APIVersion: "example.com/v1", Kind: "ClusterRole", Name: "viewer"}
	if _, err := fc.AppsV1alpha1().WorkloadRebalancers().Create(ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "rebalance-viewer"},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{viewer, other}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := wrWaitFinished(t, ctx, fc, "rebalance-viewer")
	want := []appsv1alpha1.ObservedWorkload{
		{Workload: other, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
		{Workload: viewer, Result: appsv1alpha1.RebalanceSuccessful},
	}
	if len(r.Status.ObservedWorkloads) != 2 || r.Status.ObservedWorkloads[0] != want[0] || r.Status.ObservedWorkloads[1] != want[1] {
		t.Fatalf("observed workloads %+v, want %+v", r.Status.ObservedWorkloads, want)
	}
	crb, err := fc.WorkV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crb.Spec.RescheduleTriggeredAt == nil || crb.Spec.RescheduleReason != workv1alpha1.EvictionReasonRebalance ||
		crb.Annotations[workloadrebalancer.AnnotationRebalancedBy] != string(r.UID) {
		t.Fatalf("ClusterResourceBinding after the rebalance: %+v %+v", crb.Annotations, crb.Spec)
	}
	// Still placed, now scheduled from scratch.
	waitUntil(t, "the ClusterResourceBinding rescheduled", func() (bool, error) {
		crb, err := fc.WorkV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last := crb.Status.LastScheduledTime
		return last != nil && !last.Before(crb.Spec.RescheduleTriggeredAt) && len(crb.Spec.Clusters) == 1, nil
	})
}
