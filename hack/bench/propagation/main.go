// Command propagation measures the hub's propagation path at scale. It
// registers N simulated clusters (in 10 regions, agents simulated as in the
// clusters benchmark), one PropagationPolicy per region (spread over
// --spread clusters, Divided), and M ResourceTemplates holding Deployments,
// created as fast as the client allows. For each template it records, on
// informers, the time from its Create call returning to its binding being
// Scheduled and to all its Works existing; it prints p50/p99/max and the
// throughput, the hub's writes by client, then deletes everything.
//
//	go run ./hack/bench/propagation --context flotilla-hub --hub-metrics 127.0.0.1:17001 \
//	  --clusters 100 --templates 10000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	benchLabel = "flotilla.io/bench"
	benchValue = "propagation"
	namespace  = "bench-propagation"
	regions    = 10
)

type options struct {
	clusters, templates, spread, workers int
	hubMetrics                           string
	timeout                              time.Duration
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", benchutil.KubeconfigUsage)
	hubContext := flag.String("context", "flotilla-hub", "hub context")
	var o options
	flag.StringVar(&o.hubMetrics, "hub-metrics", "127.0.0.1:17001", "host:port of the hub's /metrics (empty: skip)")
	flag.IntVar(&o.clusters, "clusters", 100, "clusters to simulate")
	flag.IntVar(&o.templates, "templates", 10000, "ResourceTemplates to create")
	flag.IntVar(&o.spread, "spread", 2, "clusters per binding")
	flag.IntVar(&o.workers, "workers", 32, "parallel creators")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.Parse()
	cfg, err := benchutil.HubConfig(*kubeconfig, *hubContext)
	if err == nil {
		cfg.QPS, cfg.Burst = 1000, 2000
		err = run(kubernetes.NewForConfigOrDie(cfg), flotillaclient.NewForConfigOrDie(cfg), o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// timings records, per binding name, when each milestone was first seen.
type timings struct {
	mu        sync.Mutex
	created   map[string]time.Time
	scheduled map[string]time.Time
	worked    map[string]time.Time
	works     map[string]map[string]bool // binding -> clusters with a Work
}

func (t *timings) see(m map[string]time.Time, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := m[name]; !ok {
		m[name] = time.Now()
	}
}

func run(kc kubernetes.Interface, fc flotillaclient.Interface, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	names := make([]string, o.clusters)
	for i := range names {
		names[i] = fmt.Sprintf("pbench-%03d", i)
	}
	start := time.Now()
	benchutil.Parallel(names, 20, func(name string) {
		var i int
		_, _ = fmt.Sscanf(name, "pbench-%d", &i)
		_, _ = fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: benchValue}},
			Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: fmt.Sprintf("region-%d", i%regions)}}, metav1.CreateOptions{})
	})
	agents, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	for _, name := range names {
		go framework.SimulateAgent(agents, kc, fc, name, 10*time.Second, nil)
	}
	fmt.Fprintf(os.Stderr, "created %d Clusters; waiting for them to be Ready…\n", o.clusters)
	if err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && len(c.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == o.clusters, nil
	}); err != nil {
		return fmt.Errorf("clusters not Ready: %w", err)
	}
	fmt.Fprintf(os.Stderr, "clusters Ready after %s\n", time.Since(start).Round(time.Second))

	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for r := range regions {
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("region-%d", r), Namespace: namespace},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": fmt.Sprintf("region-%d", r)}}}},
				Placement: policyv1alpha1.Placement{
					ClusterAffinity: &policyv1alpha1.ClusterAffinity{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: benchValue}},
						FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
							{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("region-%d", r)}}}}},
					SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster,
						MinGroups: int32(o.spread), MaxGroups: int32(o.spread)}},
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
						ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted},
				}}}
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}

	t := &timings{created: map[string]time.Time{}, scheduled: map[string]time.Time{}, worked: map[string]time.Time{}, works: map[string]map[string]bool{}}
	if err := watchMilestones(ctx, fc, t, o.spread); err != nil {
		return err
	}
	var before map[string]float64
	if o.hubMetrics != "" {
		before, _ = benchutil.Scrape(o.hubMetrics)
	}

	templates := make([]string, o.templates)
	for i := range templates {
		templates[i] = fmt.Sprintf("app-%05d", i)
	}
	t0 := time.Now()
	benchutil.Parallel(templates, o.workers, func(name string) {
		var i int
		_, _ = fmt.Sscanf(name, "app-%d", &i)
		raw, _ := json.Marshal(deployment(name, fmt.Sprintf("region-%d", i%regions)))
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return
		}
		t.see(t.created, workobjects.BindingName("Deployment", name))
	})
	createdIn := time.Since(t0)
	fmt.Fprintf(os.Stderr, "created %d templates in %s; waiting for bindings and Works…\n", o.templates, createdIn.Round(time.Millisecond))

	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return len(t.worked) >= o.templates && len(t.scheduled) >= o.templates, nil
	})
	if err != nil {
		t.mu.Lock()
		fmt.Fprintf(os.Stderr, "timed out: %d scheduled, %d with all Works\n", len(t.scheduled), len(t.worked))
		t.mu.Unlock()
	}
	var after map[string]float64
	if o.hubMetrics != "" {
		after, _ = benchutil.Scrape(o.hubMetrics)
	}
	report(t, t0, createdIn, o, before, after)

	stopAgents()
	return cleanup(kc, fc, names, templates)
}

func deployment(name, region string) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": name, "region": region}},
		"spec": map[string]any{"replicas": 4, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}}}}
}

// watchMilestones records when each binding is first Scheduled and when
// all its Works exist.
func watchMilestones(ctx context.Context, fc flotillaclient.Interface, t *timings, spread int) error {
	bindings := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithNamespace(namespace))
	works := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = workobjects.LabelBindingUID
	}))
	onBinding := func(obj any) {
		if b, ok := obj.(*workv1alpha1.ResourceBinding); ok && meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha1.BindingConditionScheduled) {
			t.see(t.scheduled, b.Name)
		}
	}
	onWork := func(obj any) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok || w.Annotations[workobjects.AnnotationBindingNamespace] != namespace {
			return
		}
		name := w.Annotations[workobjects.AnnotationBindingName]
		t.mu.Lock()
		if t.works[name] == nil {
			t.works[name] = map[string]bool{}
		}
		t.works[name][w.Namespace] = true
		done := len(t.works[name]) >= spread
		t.mu.Unlock()
		if done {
			t.see(t.worked, name)
		}
	}
	_, _ = bindings.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onBinding, UpdateFunc: func(_, n any) { onBinding(n) }})
	_, _ = works.Work().V1alpha1().Works().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onWork, UpdateFunc: func(_, n any) { onWork(n) }})
	bindings.Start(ctx.Done())
	works.Start(ctx.Done())
	bindings.WaitForCacheSync(ctx.Done())
	works.WaitForCacheSync(ctx.Done())
	return nil
}

func report(t *timings, t0 time.Time, createdIn time.Duration, o options, before, after map[string]float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	latencies := func(m map[string]time.Time) (p50, p99, worst, last time.Duration) {
		var l []time.Duration
		for name, at := range m {
			if c, ok := t.created[name]; ok {
				l = append(l, at.Sub(c))
			}
			last = max(last, at.Sub(t0))
		}
		if len(l) == 0 {
			return
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[len(l)/2], l[min(len(l)*99/100, len(l)-1)], l[len(l)-1], last
	}
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	s50, s99, smax, sAll := latencies(t.scheduled)
	w50, w99, wmax, wAll := latencies(t.worked)
	fmt.Printf("| clusters | templates | Works | created in | all scheduled | throughput | create→Scheduled p50 | p99 | max | all Works | create→all Works p50 | p99 | max |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d | %d | %s | %s | %.0f/s | %s | %s | %s | %s | %s | %s | %s |\n",
		o.clusters, len(t.scheduled), len(t.worked)*o.spread, r(createdIn), r(sAll), float64(len(t.scheduled))/sAll.Seconds(),
		r(s50), r(s99), r(smax), r(wAll), r(w50), r(w99), r(wmax))
	if before != nil && after != nil {
		var clients []string
		for k := range after {
			if strings.HasPrefix(k, "writes by ") {
				clients = append(clients, k)
			}
		}
		sort.Strings(clients)
		for _, k := range clients {
			if d := after[k] - before[k]; d > 0 {
				fmt.Printf("hub %s: %.0f (%.2f per template)\n", k, d, d/float64(o.templates))
			}
		}
		fmt.Printf("hub RSS after: %.0f MiB, CPU during: %.1f s\n", after["process_resident_memory_bytes"]/(1<<20),
			after["process_cpu_seconds_total"]-before["process_cpu_seconds_total"])
	}
}

// cleanup deletes the templates; the simulated clusters have no agent to
// release their Works' finalizers, so it does that, then deletes the
// clusters and the namespace.
func cleanup(kc kubernetes.Interface, fc flotillaclient.Interface, clusters, templates []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	fmt.Fprintln(os.Stderr, "cleaning up…")
	// One by one: a DeleteCollection of 10,000 templates outlives the
	// apiserver's request timeout.
	benchutil.Parallel(templates, 32, func(name string) {
		_ = fc.WorkV1alpha1().ResourceTemplates(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	release := []byte(`{"metadata":{"finalizers":null}}`)
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		benchutil.Parallel(clusters, 10, func(c string) {
			list, err := fc.WorkV1alpha1().Works("flotilla-es-"+c).List(ctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			for _, w := range list.Items {
				if w.DeletionTimestamp != nil && len(w.Finalizers) > 0 {
					_, _ = fc.WorkV1alpha1().Works(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, release, metav1.PatchOptions{})
				}
			}
		})
		left, err := fc.WorkV1alpha1().ResourceBindings(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(left.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("bindings not gone: %w", err)
	}
	if err := fc.PolicyV1alpha1().PropagationPolicies(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	_ = kc.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	return fc.ClusterV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
}
