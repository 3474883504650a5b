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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Tests of the fleet guard, per-cluster eviction admission and guarded
// application failover (issue 17 items 4a, 5, 6, 7), with the real hub.
// Helpers are prefixed fg to stay clear of other files of app_test.

// fgStartHub runs the hub with short failover timers and no Lease-driven
// Ready changes (the tests write Ready themselves, as silent agents would
// leave it), and returns a kube client for events too.
func fgStartHub(t *testing.T, tune func(*app.Options)) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.ClusterMonitorPeriod = time.Second
		o.FailoverEvictionTimeout = time.Second
		o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 0, 0
		if tune != nil {
			tune(o)
		}
	})
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

func fgSetReady(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string, status metav1.ConditionStatus) {
	t.Helper()
	c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClusterReady(t, ctx, fc, c, status)
}

// fgReportHealth writes the status an agent writes after applying the
// Deployment ns/nginx of the Work, with the given health.
func fgReportHealth(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s's Work reports %s", cluster, health), func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready := 3
		if health != workv1alpha1.ResourceHealthy {
			ready = 0
		}
		status := fmt.Sprintf(`{"replicas":3,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":3}`, ready, ready)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "nginx"},
			Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: health}}
		_, err = fc.WorkV1alpha1().Works(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// fgWaitBindingHealth waits until the binding's aggregated status shows
// health for the current generation on cluster.
func fgWaitBindingHealth(t *testing.T, fc flotillaclient.Interface, ns, binding, cluster string, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("binding sees %s %s", cluster, health), func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, it := range rb.Status.AggregatedStatus {
			if it.ClusterName == cluster && it.Health == health && it.ObservedGeneration == rb.Generation {
				return true, nil
			}
		}
		return false, nil
	})
}

func fgPolicy(ns, name, kind string, clusters []string, failover *policyv1alpha1.FailoverBehavior) *policyv1alpha1.PropagationPolicy {
	sel := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: kind, Name: name}
	if kind == "ConfigMap" {
		sel = policyv1alpha1.ResourceSelector{APIVersion: "v1", Kind: kind}
	}
	return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind + "-" + name), Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{sel},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
			},
			Failover: failover,
		}}
}

func fgBinding(t *testing.T, fc flotillaclient.Interface, ns, name string) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

func fgPlaced(rb *workv1alpha1.ResourceBinding) []string {
	var out []string
	for _, c := range rb.Spec.Clusters {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

func fgWaitPlaced(t *testing.T, fc flotillaclient.Interface, ns, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	waitUntil(t, fmt.Sprintf("%s placed on %v", name, want), func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return slices.Equal(fgPlaced(rb), want), nil
	})
}

// fgWaitEvent waits for an event with reason whose message contains substr.
func fgWaitEvent(t *testing.T, kube kubernetes.Interface, reason, substr string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("event %s %q", reason, substr), func() (bool, error) {
		list, err := kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, substr) {
				return true, nil
			}
		}
		return false, nil
	})
}

func fgCountEvents(t *testing.T, kube kubernetes.Interface, reason string) int {
	t.Helper()
	list, err := kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// (a) A fleet of 3 with 2 silent: the guard sees a partial disruption in a
// small fleet and stops evictions (issue 17: the old code still evicted at
// the secondary rate onto the last cluster). No NoExecute taint, no
// eviction, no Work deleted. The secondary rate is set high so that the
// old behaviour (slowing down instead of stopping) shows within the test.
func TestFleetGuardSmallFleetPartialDisruptionEvictsNothing(t *testing.T) {
	t.Parallel()
	fgSmallFleetPartialDisruption(t, nil, `region "" is PartialDisruption`)
}

// The same with each cluster a region of its own: each silent region is
// fully down (which alone fails over at the primary rate), but the fleet
// of 3 is in a partial disruption, and that stops evictions.
func TestFleetGuardSmallFleetOfRegionsEvictsNothing(t *testing.T) {
	t.Parallel()
	fgSmallFleetPartialDisruption(t, map[string]string{"member1": "region-a", "member2": "region-b", "member3": "region-c"},
		`fleet guard is PartialDisruption`)
}

func fgSmallFleetPartialDisruption(t *testing.T, regions map[string]string, event string) {
	// The NoExecute timer (5s) is longer than the guard's period (1s), so
	// the guard sees both silent clusters before either timer runs out.
	ctx, fc, kube := fgStartHub(t, func(o *app.Options) { o.SecondaryEvictionRate, o.FailoverEvictionTimeout = 100, 5*time.Second })
	for _, name := range []string{"member1", "member2", "member3"} {
		c, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: clusterv1alpha1.ClusterSpec{Region: regions[name]}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setClusterReady(t, ctx, fc, c, metav1.ConditionTrue)
	}
	ns := "default"
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, fgPolicy(ns, "nginx", "Deployment", []string{"member1", "member2", "member3"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const binding = "nginx-deployment"
	fgWaitPlaced(t, fc, ns, binding, "member1", "member2", "member3")
	for _, m := range []string{"member1", "member2", "member3"} {
		fgReportHealth(t, fc, m, ns, binding, workv1alpha1.ResourceHealthy)
	}

	fgSetReady(t, ctx, fc, "member1", metav1.ConditionUnknown)
	fgSetReady(t, ctx, fc, "member2", metav1.ConditionUnknown)

	// Both silent clusters got the NoSchedule taint; give the hub twice the
	// eviction timeout (5s) past it to do what it would.
	var since time.Time
	waitUntil(t, "member1 and member2 tainted unreachable:NoSchedule", func() (bool, error) {
		for _, m := range []string{"member1", "member2"} {
			c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, m, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			i := slices.IndexFunc(c.Spec.Taints, func(t corev1.Taint) bool {
				return t.Key == clusterv1alpha1.TaintClusterUnreachable && t.Effect == corev1.TaintEffectNoSchedule && t.TimeAdded != nil
			})
			if i < 0 {
				return false, nil
			}
			if at := c.Spec.Taints[i].TimeAdded.Time; at.After(since) {
				since = at
			}
		}
		return true, nil
	})
	for time.Now().Before(since.Add(10 * time.Second)) {
		time.Sleep(500 * time.Millisecond)
	}
	for _, m := range []string{"member1", "member2"} {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, m, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }) {
			t.Errorf("%s got a NoExecute taint in a small fleet's partial disruption: %v", m, c.Spec.Taints)
		}
		if _, err := fc.WorkV1alpha1().Works("flotilla-es-"+m).Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{}); err != nil {
			t.Errorf("%s's Work: %v", m, err)
		}
	}
	rb := fgBinding(t, fc, ns, binding)
	if got := fgPlaced(rb); !slices.Equal(got, []string{"member1", "member2", "member3"}) || len(rb.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("evicted in a small fleet's partial disruption: placed %v, tasks %+v", got, rb.Spec.GracefulEvictionTasks)
	}

	// The guard says why, on the silent clusters.
	fgWaitEvent(t, kube, "FleetGuard", event)

	// One comes back: the region is Normal again (1 of 3 down) and the
	// remaining silent cluster fails over at the primary rate.
	fgSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	fgWaitPlaced(t, fc, ns, binding, "member1", "member3")
}

// (b) One dead cluster carrying 50 workloads: all 50 are evicted together
// with the default rates (0.5 clusters/s). The old limiter took one token
// per binding at 0.5/s, about 100 s for 50; the deadline here is a
// correctness bound against that, generous for a slow machine.
func TestFleetGuardEvictsADeadClustersWorkloadsTogether(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := fgStartHub(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	ns := "default"
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, fgPolicy(ns, "all", "ConfigMap", []string{"member1", "member2"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		name := fmt.Sprintf("settings-%02d", i)
		cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"a":"b"}}`, name)
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, name, cm), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	onMember1 := func() (int, error) {
		list, err := fc.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		count := 0
		for _, rb := range list.Items {
			if slices.Contains(fgPlaced(&rb), "member1") {
				count++
			}
		}
		return count, nil
	}
	waitUntil(t, "all 50 bindings placed on member1", func() (bool, error) {
		c, err := onMember1()
		return c == n, err
	})

	fgSetReady(t, ctx, fc, "member1", metav1.ConditionUnknown)
	waitUntil(t, "member1 tainted unreachable:NoExecute", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == clusterv1alpha1.TaintClusterUnreachable && t.Effect == corev1.TaintEffectNoExecute
		}), nil
	})
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		c, err := onMember1()
		if err != nil {
			t.Fatal(err)
		}
		if c == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bindings still on the dead member1 %s after its NoExecute taint (the old per-binding limiter needs ~100 s)", c, n, time.Since(start).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("all %d bindings left member1 within %s of its NoExecute taint", n, time.Since(start).Round(100*time.Millisecond))
	rb := fgBinding(t, fc, ns, "settings-07-configmap")
	if len(rb.Spec.GracefulEvictionTasks) != 1 || rb.Spec.GracefulEvictionTasks[0].FromCluster != "member1" {
		t.Fatalf("tasks %+v", rb.Spec.GracefulEvictionTasks)
	}
}

// (c) An application Unhealthy on both of its clusters is the
// application's fault: nothing is evicted, the binding says why
// (ApplicationFailoverHeld) with one Warning event. Once one cluster
// turns Healthy, the unhealthy one is evicted.
func TestApplicationFailoverHoldsWhenUnhealthyEverywhere(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fgStartHub(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	ns := "default"
	toleration := int32(1)
	failover := &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, fgPolicy(ns, "nginx", "Deployment", []string{"member1", "member2"}, failover), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const binding = "nginx-deployment"
	fgWaitPlaced(t, fc, ns, binding, "member1", "member2")
	fgReportHealth(t, fc, "member1", ns, binding, workv1alpha1.ResourceUnhealthy)
	fgReportHealth(t, fc, "member2", ns, binding, workv1alpha1.ResourceUnhealthy)

	waitUntil(t, "ApplicationFailoverHeld=True (UnhealthyEverywhere)", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if len(rb.Spec.GracefulEvictionTasks) > 0 {
			return false, fmt.Errorf("evicted while unhealthy everywhere: tasks %+v", rb.Spec.GracefulEvictionTasks)
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionApplicationFailoverHeld)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == workv1alpha1.BindingReasonUnhealthyEverywhere, nil
	})
	fgWaitEvent(t, kube, "ApplicationFailoverHeld", "Unhealthy on all 2 clusters")
	// Well past the toleration (1s): still nothing evicted, one event.
	time.Sleep(5 * time.Second)
	rb := fgBinding(t, fc, ns, binding)
	if got := fgPlaced(rb); !slices.Equal(got, []string{"member1", "member2"}) || len(rb.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("unhealthy everywhere: placed %v, tasks %+v", got, rb.Spec.GracefulEvictionTasks)
	}
	if n := fgCountEvents(t, kube, "ApplicationFailoverHeld"); n != 1 {
		t.Errorf("%d ApplicationFailoverHeld events, want 1 (once per change, not per sync)", n)
	}

	// member1 recovers: member2 alone is unhealthy and is evicted.
	fgReportHealth(t, fc, "member1", ns, binding, workv1alpha1.ResourceHealthy)
	fgWaitPlaced(t, fc, ns, binding, "member1")
	rb = fgBinding(t, fc, ns, binding)
	if !slices.ContainsFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return h.ClusterName == "member2" && h.Reason == workv1alpha1.EvictionReasonApplicationFailure
	}) {
		t.Fatalf("eviction history %+v, want member2 ApplicationFailure", rb.Spec.EvictionHistory)
	}
	if c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionApplicationFailoverHeld); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ApplicationFailoverHeld after recovery: %+v, want False", c)
	}
}

// (d) purgeMode Directly never removes the last copies while no healthy
// copy runs elsewhere: the task is recorded Gracefully and says so, for
// cluster failover (a NoExecute taint) and application failover alike.
func TestDirectlyWithoutAHealthyCopyElsewhereIsGraceful(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fgStartHub(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	ns := "default"

	// Cluster failover: on member1 and member2, member2 Unhealthy; member1
	// gets a NoExecute taint nothing tolerates.
	clusterFailover := &policyv1alpha1.FailoverBehavior{Cluster: &policyv1alpha1.ClusterFailoverBehavior{PurgeMode: policyv1alpha1.PurgeModeDirectly}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, fgPolicy(ns, "nginx", "Deployment", []string{"member1", "member2"}, clusterFailover), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const binding = "nginx-deployment"
	fgWaitPlaced(t, fc, ns, binding, "member1", "member2")
	fgReportHealth(t, fc, "member1", ns, binding, workv1alpha1.ResourceHealthy)
	fgReportHealth(t, fc, "member2", ns, binding, workv1alpha1.ResourceUnhealthy)
	fgWaitBindingHealth(t, fc, ns, binding, "member2", workv1alpha1.ResourceUnhealthy)
	waitUntil(t, "member1 tainted", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	var task workv1alpha1.GracefulEvictionTask
	waitUntil(t, "member1 evicted", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, tk := range rb.Spec.GracefulEvictionTasks {
			if tk.FromCluster == "member1" {
				task = tk
				return true, nil
			}
		}
		return false, nil
	})
	if task.PurgeMode != policyv1alpha1.PurgeModeGracefully || !strings.Contains(task.Message, "Directly applied as Gracefully") {
		t.Errorf("cluster failover with Directly and no healthy copy elsewhere: task %+v, want Gracefully saying so", task)
	}
	fgWaitEvent(t, kube, "EvictWorkloadFromCluster", "Directly applied as Gracefully")
	if _, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{}); err != nil {
		t.Errorf("member1's Work, the only healthy copy, must stay: %v", err)
	}

	// Application failover: placed on member3 only, Unhealthy there,
	// Directly: it may leave (the cluster may be at fault), gracefully.
	toleration := int32(1)
	appFailover := &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeDirectly, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("apps").Create(ctx, fgPolicy("apps", "nginx", "Deployment", []string{"member3"}, appFailover), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("apps").Create(ctx, rtOf("apps", "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fgWaitPlaced(t, fc, "apps", binding, "member3")
	fgReportHealth(t, fc, "member3", "apps", binding, workv1alpha1.ResourceUnhealthy)
	waitUntil(t, "member3 evicted by application failover", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("apps").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, tk := range rb.Spec.GracefulEvictionTasks {
			if tk.FromCluster == "member3" {
				task = tk
				return true, nil
			}
		}
		return false, nil
	})
	if task.PurgeMode != policyv1alpha1.PurgeModeGracefully || task.Reason != workv1alpha1.EvictionReasonApplicationFailure ||
		!strings.Contains(task.Message, "Directly applied as Gracefully") {
		t.Errorf("application failover with Directly and no healthy copy elsewhere: task %+v, want Gracefully saying so", task)
	}
	if _, err := fc.WorkV1alpha1().Works("flotilla-es-member3").Get(ctx, workobjects.WorkName("apps", binding), metav1.GetOptions{}); err != nil {
		t.Errorf("member3's Work, the last copy, must stay: %v", err)
	}
}

// The guard is judged again before a NoExecute taint is added, not only
// every --cluster-monitor-period: with a period of an hour (the verdict
// from the start, "Normal", would stand), the second of three clusters to
// go silent is a small fleet's partial disruption and gets no NoExecute
// taint. Before the fix it got one on the stale verdict (the benchmark of
// a fleet-wide outage caught the last clusters tainted this way between
// two periodic evaluations).
func TestFleetGuardJudgesTheFleetBeforeANoExecuteTaint(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := fgStartHub(t, func(o *app.Options) { o.ClusterMonitorPeriod = time.Hour })
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	hasTaint := func(name string, effect corev1.TaintEffect) func() (bool, error) {
		return func() (bool, error) {
			c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool {
				return t.Key == clusterv1alpha1.TaintClusterUnreachable && t.Effect == effect
			}), nil
		}
	}
	// One of three silent: the fleet is Normal, the NoExecute taint comes.
	fgSetReady(t, ctx, fc, "member1", metav1.ConditionUnknown)
	waitUntil(t, "member1 tainted unreachable:NoExecute", hasTaint("member1", corev1.TaintEffectNoExecute))

	fgSetReady(t, ctx, fc, "member2", metav1.ConditionUnknown)
	waitUntil(t, "member2 tainted unreachable:NoSchedule", hasTaint("member2", corev1.TaintEffectNoSchedule))
	// Hold well past the 1 s eviction timeout.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if tainted, err := hasTaint("member2", corev1.TaintEffectNoExecute)(); err != nil || tainted {
			t.Fatalf("member2 got a NoExecute taint in a small fleet's partial disruption (err %v)", err)
		}
	}
}
