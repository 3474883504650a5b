// Command propagation measures the hub's propagation path at scale. It
// registers N simulated clusters (in 10 regions, agents simulated as in the
// clusters benchmark, plus framework.SimulateWorkAgents reporting each Work
// applied and rolled out, once per generation, with a client of their own),
// one PropagationPolicy per region (spread over --spread clusters, Divided),
// and M ResourceTemplates holding Deployments, created as fast as the client
// allows. For each template it records, on informers, the time from its
// Create call returning to each milestone: its binding placed (the
// scheduler's spec.clusters), its binding's Scheduled condition, all its
// Works existing, all its Works Applied for their current generation, and
// the template's own FullyApplied condition (what the user sees; "fully
// propagated"). It prints p50/p99/max and the time until all are done for
// each, the hub's writes by client and per template, and the hub's RSS
// (sampled every --sample-interval until the writes settle: peak, and at
// the end), then deletes everything.
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
	"sync/atomic"
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

	"k8s.io/client-go/rest"

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
	agentQPS                             float64
	agentWorkers                         int
	hubMetrics                           string
	timeout, sampleInterval, settle      time.Duration
}

// workNamespacePrefix: the cluster namespaces of the simulated clusters
// ("flotilla-es-" + "pbench-NNN"), so the simulated agents leave the real
// members' Works to their real agents.
const workNamespacePrefix = "flotilla-es-pbench-"

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
	flag.Float64Var(&o.agentQPS, "agent-qps", 2000, "QPS of the simulated agents' one shared client (burst twice that)")
	flag.IntVar(&o.agentWorkers, "agent-workers", 16, "Works the simulated agents report at once")
	flag.DurationVar(&o.sampleInterval, "sample-interval", 2*time.Second, "how often to sample the hub's RSS from --hub-metrics")
	flag.DurationVar(&o.settle, "settle", time.Minute, "after the last milestone, wait up to this long for the hub's writes to stop before counting them")
	flag.Parse()
	cfg, err := benchutil.HubConfig(*kubeconfig, *hubContext)
	if err == nil {
		agentCfg := rest.CopyConfig(cfg)
		agentCfg.QPS, agentCfg.Burst = float32(o.agentQPS), int(2*o.agentQPS)
		cfg.QPS, cfg.Burst = 1000, 2000
		err = run(kubernetes.NewForConfigOrDie(cfg), flotillaclient.NewForConfigOrDie(cfg), flotillaclient.NewForConfigOrDie(agentCfg), o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// timings records, per binding name, when each milestone was first seen.
type timings struct {
	mu           sync.Mutex
	created      map[string]time.Time
	placed       map[string]time.Time
	scheduled    map[string]time.Time
	worked       map[string]time.Time
	applied      map[string]time.Time
	fullyApplied map[string]time.Time
	// binding -> cluster namespace -> whether its Work is Applied for its
	// current generation (the key exists once the Work does).
	works map[string]map[string]bool
}

func newTimings() *timings {
	return &timings{created: map[string]time.Time{}, placed: map[string]time.Time{}, scheduled: map[string]time.Time{}, worked: map[string]time.Time{},
		applied: map[string]time.Time{}, fullyApplied: map[string]time.Time{}, works: map[string]map[string]bool{}}
}

// done: every template has reached every milestone.
func (t *timings) done(templates int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range []map[string]time.Time{t.placed, t.scheduled, t.worked, t.applied, t.fullyApplied} {
		if len(m) < templates {
			return false
		}
	}
	return true
}

func (t *timings) see(m map[string]time.Time, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := m[name]; !ok {
		m[name] = time.Now()
	}
}

func run(kc kubernetes.Interface, fc, agentClient flotillaclient.Interface, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	names := make([]string, o.clusters)
	for i := range names {
		names[i] = fmt.Sprintf("pbench-%03d", i)
	}
	// A previous run's clusters may still be going (their finalizers);
	// creating over them would fail and leave the fleet short.
	if err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue, Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	}); err != nil {
		return fmt.Errorf("a previous run's clusters are still there: %w", err)
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
	workAgentsDone := make(chan struct{})
	go func() {
		defer close(workAgentsDone)
		framework.SimulateWorkAgents(agents, agentClient, framework.WorkAgentOptions{NamespacePrefix: workNamespacePrefix, Workers: o.agentWorkers})
	}()
	// The simulated agents stop before cleanup, which releases the Works'
	// finalizers itself.
	stopAllAgents := func() {
		stopAgents()
		<-workAgentsDone
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

	t := newTimings()
	if err := watchMilestones(ctx, fc, t, o.spread); err != nil {
		return err
	}
	var before map[string]float64
	rss := &rssSampler{}
	stopSampling := func() {}
	if o.hubMetrics != "" {
		before, _ = benchutil.Scrape(o.hubMetrics)
		stopSampling = rss.start(ctx, o.hubMetrics, o.sampleInterval)
	}
	fmt.Fprintf(os.Stderr, "load average before: %s\n", benchutil.LoadAverage())

	templates := make([]string, o.templates)
	for i := range templates {
		templates[i] = fmt.Sprintf("app-%05d", i)
	}
	t0 := time.Now()
	benchutil.Parallel(templates, o.workers, func(name string) {
		var i int
		_, _ = fmt.Sscanf(name, "app-%d", &i)
		raw, _ := json.Marshal(benchutil.Deployment(name, fmt.Sprintf("region-%d", i%regions), "", 4))
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return
		}
		t.see(t.created, workobjects.BindingName("Deployment", name))
	})
	createdIn := time.Since(t0)
	fmt.Fprintf(os.Stderr, "created %d templates in %s; waiting until every template is FullyApplied…\n", o.templates, createdIn.Round(time.Millisecond))

	progress := time.Now()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		if time.Since(progress) >= 30*time.Second {
			progress = time.Now()
			t.mu.Lock()
			fmt.Fprintf(os.Stderr, "%s: %d placed, %d Scheduled, %d with all Works, %d all applied, %d FullyApplied; hub RSS %.0f MiB\n",
				time.Since(t0).Round(time.Second), len(t.placed), len(t.scheduled), len(t.worked), len(t.applied), len(t.fullyApplied), rss.last()/(1<<20))
			t.mu.Unlock()
		}
		return t.done(o.templates), nil
	})
	propagatedIn := time.Since(t0)
	if err != nil {
		t.mu.Lock()
		fmt.Fprintf(os.Stderr, "timed out: %d placed, %d Scheduled, %d with all Works, %d all applied, %d FullyApplied\n",
			len(t.placed), len(t.scheduled), len(t.worked), len(t.applied), len(t.fullyApplied))
		t.mu.Unlock()
	}
	fmt.Fprintf(os.Stderr, "load average after: %s\n", benchutil.LoadAverage())
	var after map[string]float64
	if o.hubMetrics != "" {
		after = settledScrape(o.hubMetrics, o.settle)
	}
	// The peak covers the settling too: the hub may still be writing.
	stopSampling()
	report(t, t0, createdIn, propagatedIn, o, before, after, rss)

	stopAllAgents()
	return cleanup(kc, fc, names, templates)
}

// settledScrape scrapes the hub's metrics until two scrapes 5 s apart show
// the same writes on the propagation path (writes still under way, such as
// Events being sent, count too), for at most settle.
func settledScrape(addr string, settle time.Duration) map[string]float64 {
	last, _ := benchutil.Scrape(addr)
	for deadline := time.Now().Add(settle); time.Now().Before(deadline); {
		time.Sleep(5 * time.Second)
		next, err := benchutil.Scrape(addr)
		if err != nil {
			continue
		}
		same := pathWrites(next) == pathWrites(last)
		last = next
		if same {
			break
		}
	}
	return last
}

// background are the hub's clients whose writes do not depend on the
// templates: the leader's lease renewals.
var background = map[string]bool{"leader-election": true}

// pathWrites sums the writes of every hub client but the background ones.
func pathWrites(m map[string]float64) float64 {
	var sum float64
	for k, v := range m {
		if client, ok := strings.CutPrefix(k, "writes by "); ok && !background[client] {
			sum += v
		}
	}
	return sum
}

// rssSampler samples the hub's process_resident_memory_bytes.
type rssSampler struct {
	mu        sync.Mutex
	peak, now float64
	peakAt    time.Duration
	samples   int
	start0    time.Time
}

// start samples every interval until the returned stop is called.
func (r *rssSampler) start(ctx context.Context, addr string, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.start0 = time.Now()
	go func() {
		defer close(done)
		wait.UntilWithContext(ctx, func(context.Context) {
			m, err := benchutil.Scrape(addr)
			if err != nil {
				return
			}
			v, ok := m["process_resident_memory_bytes"]
			if !ok {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.now, r.samples = v, r.samples+1
			if v > r.peak {
				r.peak, r.peakAt = v, time.Since(r.start0)
			}
		}, interval)
	}()
	return func() { cancel(); <-done }
}

func (r *rssSampler) last() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// watchMilestones records when each binding is first placed (the
// scheduler's result in spec.clusters; the Scheduled condition may be
// written later, with the rest of the binding's status), Scheduled, when all
// its Works exist, when all of them are Applied for their current
// generation, and when its template is FullyApplied.
func watchMilestones(ctx context.Context, fc flotillaclient.Interface, t *timings, spread int) error {
	bindings := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithNamespace(namespace))
	works := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = workobjects.LabelBindingUID
	}))
	onBinding := func(obj any) {
		b, ok := obj.(*workv1alpha1.ResourceBinding)
		if !ok {
			return
		}
		if len(b.Spec.Clusters) > 0 {
			t.see(t.placed, b.Name)
		}
		if meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha1.BindingConditionScheduled) {
			t.see(t.scheduled, b.Name)
		}
	}
	onWork := func(obj any) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok || w.Annotations[workobjects.AnnotationBindingNamespace] != namespace {
			return
		}
		name := w.Annotations[workobjects.AnnotationBindingName]
		c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
		t.mu.Lock()
		if t.works[name] == nil {
			t.works[name] = map[string]bool{}
		}
		t.works[name][w.Namespace] = c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
		exist, applied := len(t.works[name]), 0
		for _, ok := range t.works[name] {
			if ok {
				applied++
			}
		}
		t.mu.Unlock()
		if exist >= spread {
			t.see(t.worked, name)
		}
		if applied >= spread {
			t.see(t.applied, name)
		}
	}
	onTemplate := func(obj any) {
		if rt, ok := obj.(*workv1alpha1.ResourceTemplate); ok && meta.IsStatusConditionTrue(rt.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) {
			t.see(t.fullyApplied, workobjects.BindingName("Deployment", rt.Name))
		}
	}
	_, _ = bindings.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onBinding, UpdateFunc: func(_, n any) { onBinding(n) }})
	_, _ = works.Work().V1alpha1().Works().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onWork, UpdateFunc: func(_, n any) { onWork(n) }})
	_, _ = bindings.Work().V1alpha1().ResourceTemplates().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onTemplate, UpdateFunc: func(_, n any) { onTemplate(n) }})
	bindings.Start(ctx.Done())
	works.Start(ctx.Done())
	bindings.WaitForCacheSync(ctx.Done())
	works.WaitForCacheSync(ctx.Done())
	return nil
}

func report(t *timings, t0 time.Time, createdIn, propagatedIn time.Duration, o options, before, after map[string]float64, rss *rssSampler) {
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
	fmt.Printf("%d templates over %d clusters (%d each, %d Works), created in %s; waited %s\n\n",
		o.templates, o.clusters, o.spread, o.templates*o.spread, r(createdIn), r(propagatedIn))
	fmt.Printf("| milestone | templates | all done after | throughput | create→milestone p50 | p99 | max |\n")
	fmt.Printf("|---|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		name  string
		times map[string]time.Time
	}{
		{"binding placed (spec.clusters)", t.placed},
		{"binding Scheduled condition", t.scheduled},
		{"all Works exist", t.worked},
		{"every Work applied", t.applied},
		{"template FullyApplied (fully propagated)", t.fullyApplied},
	} {
		p50, p99, worst, last := latencies(m.times)
		throughput := "–"
		if last > 0 {
			throughput = fmt.Sprintf("%.0f/s", float64(len(m.times))/last.Seconds())
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %s | %s |\n", m.name, len(m.times), r(last), throughput, r(p50), r(p99), r(worst))
	}
	if before == nil || after == nil {
		return
	}
	var clients []string
	for k := range after {
		if c, ok := strings.CutPrefix(k, "writes by "); ok && after[k]-before[k] > 0 {
			clients = append(clients, c)
		}
	}
	sort.Strings(clients)
	n := float64(o.templates)
	fmt.Printf("\n| hub client | writes | per template |\n|---|---|---|\n")
	var total, all float64
	for _, c := range clients {
		d := after["writes by "+c] - before["writes by "+c]
		all += d
		note := ""
		if background[c] {
			note = " (background, not counted)"
		} else {
			total += d
		}
		fmt.Printf("| %s%s | %.0f | %.2f |\n", c, note, d, d/n)
	}
	fmt.Printf("| **total** | **%.0f** | **%.2f** |\n", total, total/n)
	fmt.Printf("\nhub writes, all clients: %.0f (rest_client_requests_total: %.0f), %.2f per template\n",
		all, after["writes"]-before["writes"], all/n)
	rss.mu.Lock()
	defer rss.mu.Unlock()
	fmt.Printf("hub RSS: before %.0f MiB, peak %.0f MiB (%s after the first create, %d samples every %s until settled), at the end %.0f MiB; hub CPU during: %.1f s\n",
		before["process_resident_memory_bytes"]/(1<<20), rss.peak/(1<<20), rss.peakAt.Round(time.Second), rss.samples, o.sampleInterval,
		after["process_resident_memory_bytes"]/(1<<20), after["process_cpu_seconds_total"]-before["process_cpu_seconds_total"])
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
		// Until the Works are gone too: a binding goes once it has asked
		// for its Works' deletion, and a Work left with its finalizer holds
		// its cluster's namespace (and so the next run's cluster) forever.
		var worksLeft atomic.Int64
		benchutil.Parallel(clusters, 10, func(c string) {
			list, err := fc.WorkV1alpha1().Works("flotilla-es-"+c).List(ctx, metav1.ListOptions{})
			if err != nil {
				worksLeft.Add(1)
				return
			}
			worksLeft.Add(int64(len(list.Items)))
			for _, w := range list.Items {
				if w.DeletionTimestamp != nil && len(w.Finalizers) > 0 {
					_, _ = fc.WorkV1alpha1().Works(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, release, metav1.PatchOptions{})
				}
			}
		})
		left, err := fc.WorkV1alpha1().ResourceBindings(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(left.Items) == 0 && worksLeft.Load() == 0, nil
	})
	if err != nil {
		return fmt.Errorf("bindings or Works not gone: %w", err)
	}
	if err := fc.PolicyV1alpha1().PropagationPolicies(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	_ = kc.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	return fc.ClusterV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
}
