package scheduler_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var (
	throughputReport  = flag.Bool("throughput-report", false, "run the scheduler throughput report")
	throughputBinding = flag.Int("throughput-bindings", 10000, "bindings in the throughput report")
	throughputWorkers = flag.Int("throughput-workers", 4, "scheduler workers in the throughput report")
)

// TestSchedulerThroughputReport measures the scheduler alone against a
// real apiserver: 100 clusters and N bindings already there (as the
// detector leaves them), then the scheduler starts; it prints the time
// until every binding is Scheduled and the end-to-end scheduling latency
// (dequeue to result written) from the scheduler's own histogram. It
// asserts only that every binding was scheduled; the numbers go in
// docs/benchmarks.md.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./pkg/hub/scheduler/ -run ThroughputReport -v -throughput-report
func TestSchedulerThroughputReport(t *testing.T) {
	if !*throughputReport {
		t.Skip("run with -throughput-report")
	}
	env := testenv.Start(t)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	fc := flotillaclient.NewForConfigOrDie(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const clusters, regions = 100, 10
	for i := range clusters {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("member%03d", i)},
			Spec: clusterv1alpha1.ClusterSpec{Region: fmt.Sprintf("region-%d", i%regions)}}
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// As a reporting agent leaves it: the scheduler gives nothing to a
		// cluster that never reported Ready.
		created.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
			Reason: "ClusterReady", Message: "set by the test", LastTransitionTime: metav1.Now()}}
		if _, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	placements := []*policyv1alpha1.Placement{
		// The seed's 1:2 between two clusters.
		{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member001", "member002"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member001"}}, Weight: 1},
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member002"}}, Weight: 2}}}}},
		// Duplicated on two clusters of one region.
		{ClusterAffinity: &policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
			{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{"region-3"}}}}},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
		// Divided evenly over three regions.
		{SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 3, MaxGroups: 3},
			{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 3}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}},
	}
	const ns = "default"
	n := *throughputBinding
	var created atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("app-%05d", i)
				b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: ns},
					Spec: workv1alpha1.ResourceBindingSpec{Replicas: 6, Placement: placements[i%len(placements)],
						Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
				if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					continue
				}
				created.Add(1)
			}
		}()
	}
	createStart := time.Now()
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Logf("created %d bindings in %s", created.Load(), time.Since(createStart).Round(time.Millisecond))

	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	reg := prometheus.NewRegistry()
	m := hubmetrics.New(reg)
	ctl := scheduler.NewController(fc, factory, scheduler.Options{Metrics: m, EvictionHistoryTTL: 10 * time.Minute})
	var scheduled atomic.Int64
	seen := sync.Map{}
	_, _ = factory.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			b := o.(*workv1alpha1.ResourceBinding)
			if meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha1.BindingConditionScheduled) {
				if _, loaded := seen.LoadOrStore(b.Name, true); !loaded {
					scheduled.Add(1)
				}
			}
		}})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	start := time.Now()
	go ctl.Run(ctx, *throughputWorkers)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
		return scheduled.Load() >= created.Load(), nil
	}); err != nil {
		t.Fatalf("%d of %d bindings scheduled: %v", scheduled.Load(), created.Load(), err)
	}
	elapsed := time.Since(start)
	p50, p99 := quantiles(t, reg, "flotilla_scheduler_e2e_scheduling_duration_seconds")
	a50, a99 := quantiles(t, reg, "flotilla_scheduler_scheduling_algorithm_duration_seconds")
	t.Logf("%d bindings over %d clusters scheduled by %d workers in %s (%.0f/s); e2e scheduling p50 <= %s, p99 <= %s; algorithm p50 <= %s, p99 <= %s",
		created.Load(), clusters, *throughputWorkers, elapsed.Round(time.Millisecond), float64(created.Load())/elapsed.Seconds(), p50, p99, a50, a99)
}

// quantiles returns the upper bounds of the histogram buckets holding the
// 50th and 99th percentiles of metric (all label values together).
func quantiles(t *testing.T, reg *prometheus.Registry, metric string) (time.Duration, time.Duration) {
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[float64]uint64{}
	var total uint64
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			total += h.GetSampleCount()
			for _, b := range h.GetBucket() {
				counts[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	bound := func(q float64) time.Duration {
		var best *dto.Bucket
		for ub, c := range counts {
			if float64(c) >= q*float64(total) && (best == nil || ub < best.GetUpperBound()) {
				best = &dto.Bucket{UpperBound: &ub}
			}
		}
		if best == nil {
			return -1
		}
		return time.Duration(best.GetUpperBound() * float64(time.Second))
	}
	return bound(0.5), bound(0.99)
}
