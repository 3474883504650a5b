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
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Tests of failover.application.preConditions and blockPredecessorSeconds
// (issue 18 item 3) with the real hub. Helpers are prefixed fk.

func fkItem(rb *workv1alpha1.ResourceBinding, cluster string) *workv1alpha1.AggregatedStatusItem {
	for i := range rb.Status.AggregatedStatus {
		if rb.Status.AggregatedStatus[i].ClusterName == cluster {
			return &rb.Status.AggregatedStatus[i]
		}
	}
	return nil
}

func fkPropagate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, kube kubernetes.Interface, ns string, app *policyv1alpha1.ApplicationFailoverBehavior) {
	t.Helper()
	if ns != "default" {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pp := fgPolicy(ns, "nginx", "Deployment", []string{"member1", "member2"}, &policyv1alpha1.FailoverBehavior{Application: app})
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, pp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fkEventsWithReason counts the events of reason in ns (with their counts).
func fkEventsWithReason(t *testing.T, kube kubernetes.Interface, ns, reason string) int {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// preConditions hold application failover back:
//   - healthyState Healthy: a copy that was never Healthy on its cluster is
//     not failed over, however long it is Unhealthy (one event says why,
//     once); once it has been Healthy, turning Unhealthy fails it over.
//   - delaySeconds: an Unhealthy copy is failed over only delaySeconds
//     plus tolerationSeconds after the hub first saw its status (the
//     binding's firstReportedTime), on the hub's clock.
func TestApplicationFailoverPreConditions(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fgStartHub(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	const binding = "nginx-deployment"
	toleration := int32(1)

	// healthyState: Healthy.
	fkPropagate(t, ctx, fc, kube, "default", &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
		PreConditions: &policyv1alpha1.PreConditions{HealthyState: policyv1alpha1.HealthyStateHealthy}})
	fgWaitPlaced(t, fc, "default", binding, "member1", "member2")
	fgReportHealth(t, fc, "member1", "default", binding, workv1alpha1.ResourceHealthy)
	fgReportHealth(t, fc, "member2", "default", binding, workv1alpha1.ResourceUnhealthy)
	fgWaitBindingHealth(t, fc, "default", binding, "member2", workv1alpha1.ResourceUnhealthy)
	fgWaitBindingHealth(t, fc, "default", binding, "member1", workv1alpha1.ResourceHealthy)
	rb := fgBinding(t, fc, "default", binding)
	if m1, m2 := fkItem(rb, "member1"), fkItem(rb, "member2"); !m1.EverHealthy || m2.EverHealthy || m1.FirstReportedTime == nil || m2.FirstReportedTime == nil {
		t.Fatalf("aggregated status %+v: want member1 everHealthy, member2 not, both with firstReportedTime", rb.Status.AggregatedStatus)
	}
	fgWaitEvent(t, kube, "ApplicationFailoverWaiting", "cluster member2: the application has never been Healthy there")
	// Well past the toleration (1s): still on both clusters, one event.
	time.Sleep(4 * time.Second)
	rb = fgBinding(t, fc, "default", binding)
	if got := fgPlaced(rb); !slices.Equal(got, []string{"member1", "member2"}) || len(rb.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("a copy never Healthy was failed over: placed %v, tasks %+v", got, rb.Spec.GracefulEvictionTasks)
	}
	if n := fkEventsWithReason(t, kube, "default", "ApplicationFailoverWaiting"); n != 1 {
		t.Errorf("%d ApplicationFailoverWaiting events, want 1 (once per change, not per sync)", n)
	}
	// Healthy once, then Unhealthy: now it counts.
	fgReportHealth(t, fc, "member2", "default", binding, workv1alpha1.ResourceHealthy)
	fgWaitBindingHealth(t, fc, "default", binding, "member2", workv1alpha1.ResourceHealthy)
	fgReportHealth(t, fc, "member2", "default", binding, workv1alpha1.ResourceUnhealthy)
	fgWaitPlaced(t, fc, "default", binding, "member1")

	// delaySeconds: 6.
	const delay = 6
	fkPropagate(t, ctx, fc, kube, "apps", &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
		PreConditions: &policyv1alpha1.PreConditions{DelaySeconds: ptr.To[int32](delay)}})
	fgWaitPlaced(t, fc, "apps", binding, "member1", "member2")
	fgReportHealth(t, fc, "member1", "apps", binding, workv1alpha1.ResourceHealthy)
	fgReportHealth(t, fc, "member2", "apps", binding, workv1alpha1.ResourceUnhealthy)
	var first time.Time
	waitUntil(t, "member2's firstReportedTime", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("apps").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if it := fkItem(rb, "member2"); it != nil && it.FirstReportedTime != nil {
			first = it.FirstReportedTime.Time
			return true, nil
		}
		if len(rb.Spec.GracefulEvictionTasks) > 0 {
			return false, fmt.Errorf("evicted before its first report was recorded: %+v", rb.Spec.GracefulEvictionTasks)
		}
		return false, nil
	})
	fgWaitEvent(t, kube, "ApplicationFailoverWaiting", fmt.Sprintf("preConditions.delaySeconds: %d", delay))
	fgWaitPlaced(t, fc, "apps", binding, "member1")
	rb = fgBinding(t, fc, "apps", binding)
	i := slices.IndexFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return h.ClusterName == "member2" && h.Reason == workv1alpha1.EvictionReasonApplicationFailure
	})
	if i < 0 {
		t.Fatalf("eviction history %+v, want member2 ApplicationFailure", rb.Spec.EvictionHistory)
	}
	// Both times are the hub's (second precision in the API).
	if earliest := first.Add(time.Duration(delay+int(toleration)-1) * time.Second); rb.Spec.EvictionHistory[i].EvictedAt.Time.Before(earliest) {
		t.Errorf("evicted at %s, first report at %s: want no earlier than delaySeconds+tolerationSeconds after it",
			rb.Spec.EvictionHistory[i].EvictedAt.UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339))
	}
}

// blockPredecessorSeconds keeps a failed-over application off its old
// cluster for as long as it says, even past --eviction-history-ttl (where
// the history alone lets it return, to fail again), with the Scheduled
// condition naming the cluster and the end; at the end the scheduler
// looks again by itself (nothing else happens then) and a Duplicated
// workload is back on both clusters.
func TestApplicationFailoverBlockPredecessor(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fgStartHub(t, func(o *app.Options) { o.EvictionHistoryTTL = 2 * time.Second })
	createReadyClusters(t, ctx, fc, "member1", "member2")
	const binding, block = "nginx-deployment", 15
	toleration := int32(1)
	fkPropagate(t, ctx, fc, kube, "default", &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
		BlockPredecessorSeconds: ptr.To[int32](block)})
	fgWaitPlaced(t, fc, "default", binding, "member1", "member2")
	fgReportHealth(t, fc, "member2", "default", binding, workv1alpha1.ResourceHealthy)
	fgReportHealth(t, fc, "member1", "default", binding, workv1alpha1.ResourceUnhealthy)
	fgWaitPlaced(t, fc, "default", binding, "member2")
	rb := fgBinding(t, fc, "default", binding)
	i := slices.IndexFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return h.ClusterName == "member1" && h.Reason == workv1alpha1.EvictionReasonApplicationFailure
	})
	if i < 0 {
		t.Fatalf("eviction history %+v, want member1 ApplicationFailure", rb.Spec.EvictionHistory)
	}
	evictedAt := rb.Spec.EvictionHistory[i].EvictedAt.Time
	until := evictedAt.Add(block * time.Second).UTC().Format(time.RFC3339)
	// The replacement is healthy: the graceful task ends, and with it the
	// task's own hold on member1.
	fgReportHealth(t, fc, "member2", "default", binding, workv1alpha1.ResourceHealthy)
	waitUntil(t, "member1's graceful eviction task ends", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		return err == nil && len(rb.Spec.GracefulEvictionTasks) == 0, nil
	})
	waitUntil(t, "Scheduled names the blocked cluster and the end", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return c != nil && strings.Contains(c.Message, "member1 until "+until), nil
	})
	// Past the history TTL (2s), a Cluster change makes the scheduler look
	// again: without the block member1 would be taken back now.
	for time.Now().Before(evictedAt.Add(4 * time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	waitUntil(t, "member2 relabelled", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member2", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c.Labels = map[string]string{"poke": "1"}
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	// Until the block ends, member1 must never be seen placed again (a
	// placement seen at some time was made no later than that).
	for time.Now().Before(evictedAt.Add((block - 1) * time.Second)) {
		if got := fgPlaced(fgBinding(t, fc, "default", binding)); !slices.Equal(got, []string{"member2"}) {
			t.Fatalf("placed on %v at %s within the block (until %s), want member2 only", got, time.Now().UTC().Format(time.RFC3339), until)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The block ends; nothing else happens; the scheduler places member1
	// again by itself.
	fgWaitPlaced(t, fc, "default", binding, "member1", "member2")
	waitUntil(t, "Scheduled=True without a blocked cluster", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rb.Generation && !strings.Contains(c.Message, "blocked"), nil
	})
}

// blockPredecessorSeconds 0 on a workload pinned to one cluster: after the
// application fails over from it, nothing else fits, and the eviction is
// not undone either (graceful eviction would otherwise cancel an eviction
// nothing replaced, put the cluster back and drop the history entry that
// is the block). The copy stays, gracefully, until the task's grace
// period; the binding says why it runs nowhere new.
func TestApplicationFailoverBlockPredecessorFromTheOnlyCluster(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := fgStartHub(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	const binding = "nginx-deployment"
	toleration := int32(1)
	pp := fgPolicy("default", "nginx", "Deployment", []string{"member1"}, &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
		BlockPredecessorSeconds: ptr.To[int32](0)}})
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, pp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fgWaitPlaced(t, fc, "default", binding, "member1")
	fgReportHealth(t, fc, "member1", "default", binding, workv1alpha1.ResourceUnhealthy)
	waitUntil(t, "Scheduled=False naming member1 as blocked for good", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == rb.Generation &&
			strings.Contains(c.Message, "member1 until its eviction history entry is removed"), nil
	})
	// From here on (the scheduler has seen the eviction, so graceful
	// eviction may judge it), member1 is never placed again and its task
	// and history entry stay.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		rb := fgBinding(t, fc, "default", binding)
		if len(rb.Spec.Clusters) != 0 || len(rb.Spec.GracefulEvictionTasks) != 1 ||
			!slices.ContainsFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool { return h.ClusterName == "member1" }) {
			t.Fatalf("blocked for good, yet: placed %v, tasks %+v, history %+v", fgPlaced(rb), rb.Spec.GracefulEvictionTasks, rb.Spec.EvictionHistory)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName("default", binding), metav1.GetOptions{}); err != nil {
		t.Errorf("member1's Work, the only copy, must stay until the task's grace period: %v", err)
	}
}
