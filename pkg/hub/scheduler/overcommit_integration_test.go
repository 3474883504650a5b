package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// TestOvercommitProtectionBurst: a failover burst of bindings, each 2
// replicas of 1 CPU divided by room, lands at once on two survivors with
// room for 6 and 4 CPUs whose summaries do not change while it lands (the
// agents report every 10 s; the burst is scheduled in well under that).
// With overcommit protection (the default), 4 workers place exactly the 5
// bindings that fit, no survivor beyond its room, and the other 2 are
// unschedulable; with it off (-1), the same burst overcommits, which is
// Karmada issue #6518.
func TestOvercommitProtectionBurst(t *testing.T) {
	env := testenv.Start(t)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	run := func(t *testing.T, prefix string, ttl time.Duration, then func(reg *prometheus.Registry, placed map[string]int32)) (placed map[string]int32, scheduled, unschedulable int) {
		room := map[string]int64{prefix + "-a": 6, prefix + "-b": 4}
		for name, cpu := range room {
			c, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
				Reason: "ClusterReady", Message: "set by the test", LastTransitionTime: metav1.Now()}}
			c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)}}
			if _, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		placement := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{prefix + "-a", prefix + "-b"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}}
		const ns, bindings = "default", 7
		for i := range bindings {
			name := fmt.Sprintf("%s-app-%d", prefix, i)
			b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: ns},
				Spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: placement,
					ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
					Resource:            workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
			if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		factory := flotillainformers.NewSharedInformerFactory(fc, 0)
		reg := prometheus.NewRegistry()
		ctl := scheduler.NewController(fc, factory, scheduler.Options{Metrics: hubmetrics.New(reg), EvictionHistoryTTL: time.Minute, AssumptionTTL: ttl})
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		factory.Start(runCtx.Done())
		factory.WaitForCacheSync(runCtx.Done())
		go ctl.Run(runCtx, 4)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			list, err := fc.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			placed, scheduled, unschedulable = map[string]int32{}, 0, 0
			for _, b := range list.Items {
				if len(b.Name) < len(prefix) || b.Name[:len(prefix)] != prefix {
					continue
				}
				switch cond := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled); {
				case cond == nil:
					return false, nil
				case cond.Status == metav1.ConditionTrue:
					scheduled++
				default:
					unschedulable++
				}
				for _, c := range b.Spec.Clusters {
					placed[c.Name] += c.Replicas
				}
			}
			return scheduled+unschedulable == bindings, nil
		}); err != nil {
			t.Fatalf("not every binding decided: %d scheduled, %d unschedulable: %v", scheduled, unschedulable, err)
		}
		for name, cpu := range room {
			t.Logf("%s: %d replicas of 1 CPU, room %d", name, placed[name], cpu)
		}
		if then != nil {
			then(reg, placed)
		}
		return placed, scheduled, unschedulable
	}

	t.Run("protected", func(t *testing.T) {
		placed, scheduled, unschedulable := run(t, "oc", 0, func(reg *prometheus.Registry, placed map[string]int32) {
			if got := assumedReplicas(t, reg, "oc-a") + assumedReplicas(t, reg, "oc-b"); got != 10 {
				t.Fatalf("flotilla_scheduler_assumed_replicas sums to %v, want 10", got)
			}
			// oc-a reports: every binding on it is Healthy for its
			// generation, then its summary shows their replicas allocated.
			// Its assumptions are released; oc-b's stay.
			list, err := fc.WorkV1alpha1().ResourceBindings("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range list.Items {
				if !strings.HasPrefix(b.Name, "oc-") || len(b.Spec.Clusters) == 0 {
					continue
				}
				if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, b.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					cur.Status.AggregatedStatus = nil
					for _, c := range cur.Spec.Clusters {
						cur.Status.AggregatedStatus = append(cur.Status.AggregatedStatus, workv1alpha1.AggregatedStatusItem{ClusterName: c.Name,
							Applied: true, Health: workv1alpha1.ResourceHealthy, ObservedGeneration: cur.Generation})
					}
					_, err = fc.WorkV1alpha1().ResourceBindings("default").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				// The Healthy statuses reach the scheduler's informer
				// before or after this summary; a later one releases.
				c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "oc-a", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				n := int64(placed["oc-a"])
				if a := c.Status.ResourceSummary.Allocated.Cpu(); a.Value() == n {
					n-- // a summary that differs again
				}
				c.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI)}
				if _, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
					return false, nil
				}
				return assumedReplicas(t, reg, "oc-a") == 0, nil
			}); err != nil {
				t.Fatalf("oc-a's assumptions not released once it reported: %v replicas assumed", assumedReplicas(t, reg, "oc-a"))
			}
			if got := assumedReplicas(t, reg, "oc-b"); got != 4 {
				t.Fatalf("oc-b, which did not report, has %v assumed, want 4", got)
			}
		})
		if placed["oc-a"] > 6 || placed["oc-b"] > 4 {
			t.Fatalf("overcommitted: %v", placed)
		}
		if scheduled != 5 || unschedulable != 2 || placed["oc-a"]+placed["oc-b"] != 10 {
			t.Fatalf("%d scheduled, %d unschedulable, placed %v: want the 5 that fit placed", scheduled, unschedulable, placed)
		}
	})
	// A hub that restarts in the middle of a burst does not know what the
	// previous one placed: it assumes every placement whose copy status
	// does not show it up, so the bindings left unschedulable, retried by
	// the new hub against the same stale summaries, stay unschedulable.
	t.Run("restart", func(t *testing.T) {
		before, _, _ := run(t, "rs", 0, nil) // the first hub stops on return
		factory := flotillainformers.NewSharedInformerFactory(fc, 0)
		reg := prometheus.NewRegistry()
		ctl := scheduler.NewController(fc, factory, scheduler.Options{Metrics: hubmetrics.New(reg), EvictionHistoryTTL: time.Minute})
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		factory.Start(runCtx.Done())
		factory.WaitForCacheSync(runCtx.Done())
		go ctl.Run(runCtx, 4)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return counterSum(t, reg, "flotilla_scheduler_schedule_attempts_total", "schedule_type", scheduler.TypeUnschedulable) >= 2, nil
		}); err != nil {
			t.Fatalf("the new hub did not retry the 2 unschedulable bindings: %v", err)
		}
		list, err := fc.WorkV1alpha1().ResourceBindings("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		after := map[string]int32{}
		for _, b := range list.Items {
			if strings.HasPrefix(b.Name, "rs-") {
				for _, c := range b.Spec.Clusters {
					after[c.Name] += c.Replicas
				}
			}
		}
		if after["rs-a"] != before["rs-a"] || after["rs-b"] != before["rs-b"] {
			t.Fatalf("after the restart %v, before %v (room 6 and 4)", after, before)
		}
	})
	// An assumption the cluster never reports expires after the TTL (1 s
	// here), and the bindings that waited for room are retried: on these
	// summaries, which never change, they are then placed.
	t.Run("expired", func(t *testing.T) {
		run(t, "ex", time.Second, func(reg *prometheus.Registry, _ map[string]int32) {
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				list, err := fc.WorkV1alpha1().ResourceBindings("default").List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				scheduled := 0
				for _, b := range list.Items {
					if strings.HasPrefix(b.Name, "ex-") && meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha1.BindingConditionScheduled) {
						scheduled++
					}
				}
				return scheduled == 7, nil
			}); err != nil {
				t.Fatalf("the bindings waiting for room were not retried after the assumptions expired: %v", err)
			}
			if n := counterSum(t, reg, "flotilla_scheduler_assumption_releases_total", "reason", "Expired"); n < 5 {
				t.Fatalf("%v assumptions expired, want at least the first 5 bindings'", n)
			}
		})
	})
	t.Run("off", func(t *testing.T) {
		placed, _, _ := run(t, "nop", -1, nil)
		if placed["nop-a"] <= 6 && placed["nop-b"] <= 4 {
			t.Fatalf("without protection the burst did not overcommit (%v): the test shows nothing", placed)
		}
	})
}

// assumedReplicas is flotilla_scheduler_assumed_replicas of cluster (0
// when it has no series).
func assumedReplicas(t *testing.T, reg *prometheus.Registry, cluster string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "flotilla_scheduler_assumed_replicas" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// counterSum is the sum of metric's series whose label is value.
func counterSum(t *testing.T, reg *prometheus.Registry, metric, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
