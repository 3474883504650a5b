// Command evacuation measures how fast the hub moves every workload off one
// dead cluster (issue 17 item 7), and that a fleet-wide outage moves none.
//
// It registers --clusters simulated Clusters (Ready, a resourceSummary with
// room, Leases renewed every --renew-interval as agents would) and, for each,
// a simulated agent that applies the cluster's Works (Applied and Available
// for the Work's generation, every manifest Healthy) and releases the
// execution finalizer of a deleted Work while the cluster is alive. It
// creates --workloads Deployments (1 replica each) and one policy (Divided,
// Aggregated, over the simulated clusters) that puts all of them on the
// victim (evac-00, the roomiest), and waits until every one is applied there.
//
// Phase 1, evacuation: the victim goes silent (no Lease renewal, no status,
// no Work status or finalizer release). From the Lease's expiry (last
// renewal + --grace) it records Ready=Unknown, the NoExecute taint, each
// binding's eviction (the victim moved into a graceful eviction task) and
// each workload's replacement Work Applied and Healthy on another cluster
// (p50/p90/max and when the last one got there), with the hub's CPU, RSS and
// writes/s from its /metrics and flotilla_eviction_evictions_total by result.
//
// Phase 2, fleet-wide outage: the victim comes back, then every cluster goes
// silent — the simulated ones and, if --state names a `make up` environment,
// its members' real agents (stopped with hack/local-ctl.sh, started again
// afterwards). After the last Lease has expired it watches for
// --outage-window and reports evictions, Work deletions and NoExecute taints:
// the fleet guard must keep all three at 0.
//
// Then it deletes the templates, the policy, the namespace and the Clusters.
//
//	make up FAST=1    # NoExecute 20s after Unknown, tolerations 5s; eviction rates at their defaults
//	go run ./hack/bench/evacuation --workloads 1000 --clusters 10 --eviction-timeout 20s --toleration 5s
//	go run ./hack/bench/evacuation --workloads 1000 --clusters 10 --eviction-timeout 20s --toleration 5s --priorities 3 --skip-outage
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

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
	benchLabel    = "flotilla.io/bench"
	benchValue    = "evacuation"
	namespace     = "bench-evacuation"
	clusterPrefix = "evac-"
	esPrefix      = "flotilla-es-"
)

type options struct {
	workloads, clusters, workers int
	hubMetrics, state            string
	grace, renewInterval         time.Duration
	evictionTimeout, toleration  time.Duration
	outageWindow, timeout        time.Duration
	skipOutage                   bool
	priorities                   int
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", benchutil.KubeconfigUsage)
	hubContext := flag.String("context", "flotilla-hub", "hub context")
	var o options
	flag.StringVar(&o.hubMetrics, "hub-metrics", "127.0.0.1:17001", "host:port of the hub's /metrics")
	flag.StringVar(&o.state, "state", ".local", "state directory of the `make up` environment, whose members' agents phase 2 stops (empty: the hub has only the simulated clusters)")
	flag.IntVar(&o.workloads, "workloads", 1000, "workloads on the victim")
	flag.IntVar(&o.clusters, "clusters", 10, "simulated clusters, the victim included")
	flag.IntVar(&o.workers, "workers", 16, "simulated agents' Work workers (all clusters together)")
	flag.DurationVar(&o.grace, "grace", 40*time.Second, "the hub's --cluster-monitor-grace-period")
	flag.DurationVar(&o.renewInterval, "renew-interval", 10*time.Second, "Lease renewal interval of the simulated agents")
	flag.DurationVar(&o.evictionTimeout, "eviction-timeout", 20*time.Second, "the hub's --failover-eviction-timeout (for the report and the outage window)")
	flag.DurationVar(&o.toleration, "toleration", 5*time.Second, "the hub's --default-unreachable-toleration-seconds (for the report and the outage window)")
	flag.DurationVar(&o.outageWindow, "outage-window", 0, "how long phase 2 watches after every Lease expired (0: 2 × (eviction timeout + toleration))")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "give up phase 1 after this long (the report then gives what was done and the rate)")
	flag.BoolVar(&o.skipOutage, "skip-outage", false, "skip phase 2")
	flag.IntVar(&o.priorities, "priorities", 1, "priority levels of the workloads (issue 39): with 2 or more, one PriorityClass and one policy with spec.schedulePriority per level, workload i at level i mod N, and the report per level")
	flag.Parse()
	if o.priorities < 1 || o.priorities > 10 {
		fmt.Fprintln(os.Stderr, "error: --priorities must be from 1 to 10")
		os.Exit(2)
	}
	if o.outageWindow == 0 {
		o.outageWindow = 2 * (o.evictionTimeout + o.toleration)
	}
	cfg, err := benchutil.HubConfig(*kubeconfig, *hubContext)
	if err == nil {
		cfg.QPS, cfg.Burst = 1000, 2000
		b := &bench{o: o, kc: kubernetes.NewForConfigOrDie(cfg), fc: flotillaclient.NewForConfigOrDie(cfg)}
		err = b.run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type bench struct {
	o      options
	kc     kubernetes.Interface
	fc     flotillaclient.Interface
	names  []string
	victim string
	alive  map[string]*atomic.Bool

	mu        sync.Mutex
	lastRenew map[string]time.Time
	// Milestones, first sight on informers.
	onVictim  map[string]time.Time // binding → Work applied on the victim
	silentAt  time.Time            // phase 1 start; zero before
	unknownAt time.Time            // victim Ready Unknown seen
	taintAt   time.Time            // victim NoExecute taint's timeAdded
	evicted   map[string]time.Time // binding → victim moved into a graceful eviction task
	replaced  map[string]time.Time // binding → Work Applied+Healthy on another cluster
	// Phase 2 counters.
	outage       bool
	outageAt     time.Time          // from when the hub could see the outage (every cluster not Ready)
	workDeletes  int                // Works the hub began deleting during the outage
	deleting     map[types.UID]bool // each counted once
	noExecuteNew int

	workQueue workqueue.TypedRateLimitingInterface[string]
	works     cache.Indexer
}

func (b *bench) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func (b *bench) run() error {
	o := b.o
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.lastRenew, b.onVictim, b.evicted, b.replaced = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	b.alive = map[string]*atomic.Bool{}
	for i := range o.clusters {
		name := fmt.Sprintf("%s%02d", clusterPrefix, i)
		b.names = append(b.names, name)
		b.alive[name] = &atomic.Bool{}
		b.alive[name].Store(true)
	}
	b.victim = b.names[0]

	var env *framework.Environment
	if o.state != "" && !o.skipOutage {
		var err error
		if env, err = framework.LoadEnvironment(filepath.Join(o.state, "environment")); err != nil {
			return fmt.Errorf("phase 2 stops the environment's agents: %w (pass --state '' if the hub has only simulated clusters)", err)
		}
	}

	start := time.Now()
	for i, name := range b.names {
		_, err := b.fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: benchValue}},
			Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: fmt.Sprintf("evac-region-%d", i%3)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	defer b.cleanup()
	for i, name := range b.names {
		go func() {
			time.Sleep(time.Duration(i) * o.renewInterval / time.Duration(len(b.names)))
			wait.UntilWithContext(ctx, func(ctx context.Context) { b.heartbeat(ctx, name) }, o.renewInterval)
		}()
	}
	if err := b.startInformers(ctx); err != nil {
		return err
	}
	for range o.workers {
		go func() {
			for b.processWork(ctx) {
			}
		}()
	}
	if err := b.waitClustersReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	b.log("%d clusters Ready after %s; creating %d workloads", o.clusters, time.Since(start).Round(time.Second), o.workloads)

	if err := b.createWorkloads(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := poll(ctx, 30*time.Minute, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.onVictim) >= o.workloads
	}); err != nil {
		b.mu.Lock()
		n := len(b.onVictim)
		b.mu.Unlock()
		return fmt.Errorf("only %d of %d workloads applied on %s: %w", n, o.workloads, b.victim, err)
	}
	b.log("all %d workloads applied on %s in %s", o.workloads, b.victim, time.Since(t0).Round(time.Second))
	time.Sleep(o.renewInterval + 5*time.Second) // settle: hub queues drained, status writes done

	if err := b.evacuate(ctx); err != nil {
		return err
	}
	if o.skipOutage {
		return nil
	}
	return b.fleetOutage(ctx, env)
}

// heartbeat is one round of a simulated agent: renew the Lease, and report
// Ready and a resourceSummary when the Cluster does not say so. A silent
// cluster does nothing.
func (b *bench) heartbeat(ctx context.Context, name string) {
	if !b.alive[name].Load() {
		return
	}
	leases := b.kc.CoordinationV1().Leases(esPrefix + name)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	now := time.Now()
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return
	}
	b.mu.Lock()
	b.lastRenew[name] = now
	b.mu.Unlock()
	c, err := b.fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	// The victim is the roomiest, so Aggregated puts every workload there.
	pods := "100000"
	if name == b.victim {
		pods = "1000000"
	}
	summary := &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse(pods), corev1.ResourceCPU: resource.MustParse("100000"), corev1.ResourceMemory: resource.MustParse("1000Ti")}}
	if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) &&
		c.Status.ResourceSummary != nil && c.Status.ResourceSummary.Allocatable.Pods().Equal(summary.Allocatable[corev1.ResourcePods]) {
		return
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
		Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady, Message: "simulated"})
	c.Status.ResourceSummary = summary
	c.Status.NodeSummary = &clusterv1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3}
	_, _ = b.fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
}

func clusterOf(ns string) (string, bool) {
	name, ok := strings.CutPrefix(ns, esPrefix)
	return name, ok && strings.HasPrefix(name, clusterPrefix)
}

// startInformers watches Works (for the simulated agents and the
// milestones), the bench's bindings and the Clusters.
func (b *bench) startInformers(ctx context.Context) error {
	b.workQueue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	go func() { <-ctx.Done(); b.workQueue.ShutDown() }()
	works := flotillainformers.NewSharedInformerFactoryWithOptions(b.fc, 0, flotillainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = workobjects.LabelBindingUID
	}))
	onWork := func(obj any) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok {
			return
		}
		cluster, ok := clusterOf(w.Namespace)
		if !ok {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(w); err == nil {
			b.workQueue.Add(key)
		}
		b.observeWork(cluster, w)
	}
	workInformer := works.Work().V1alpha1().Works().Informer()
	_, _ = workInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onWork,
		UpdateFunc: func(_, n any) { onWork(n) },
		DeleteFunc: func(obj any) {
			if w, ok := obj.(*workv1alpha1.Work); ok {
				if _, ours := clusterOf(w.Namespace); ours {
					// A Work deleted without a finalizer has no
					// deletionTimestamp in its last state: count it by now.
					b.mu.Lock()
					if w.DeletionTimestamp == nil {
						now := metav1.Now()
						w = w.DeepCopy()
						w.DeletionTimestamp = &now
					}
					b.countOutageDeletion(w)
					b.mu.Unlock()
				}
			}
		}})
	b.works = workInformer.GetIndexer()

	bindings := flotillainformers.NewSharedInformerFactoryWithOptions(b.fc, 0, flotillainformers.WithNamespace(namespace))
	onBinding := func(obj any) {
		rb, ok := obj.(*workv1alpha1.ResourceBinding)
		if !ok {
			return
		}
		if slices.ContainsFunc(rb.Spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == b.victim }) {
			return
		}
		if !slices.ContainsFunc(rb.Spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == b.victim }) &&
			!slices.ContainsFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool { return h.ClusterName == b.victim }) {
			return
		}
		b.mu.Lock()
		if _, seen := b.evicted[rb.Name]; !seen && !b.silentAt.IsZero() {
			b.evicted[rb.Name] = time.Now()
		}
		b.mu.Unlock()
	}
	_, _ = bindings.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onBinding, UpdateFunc: func(_, n any) { onBinding(n) }})

	clusters := flotillainformers.NewSharedInformerFactory(b.fc, 0)
	_, _ = clusters.Cluster().V1alpha1().Clusters().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			oc, nc := o.(*clusterv1alpha1.Cluster), n.(*clusterv1alpha1.Cluster)
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.outage && len(noExecute(nc)) > len(noExecute(oc)) {
				b.noExecuteNew += len(noExecute(nc)) - len(noExecute(oc))
			}
			if nc.Name != b.victim || b.silentAt.IsZero() || b.outage {
				return
			}
			if b.unknownAt.IsZero() && meta.IsStatusConditionPresentAndEqual(nc.Status.Conditions, clusterv1alpha1.ClusterConditionReady, metav1.ConditionUnknown) {
				b.unknownAt = time.Now()
			}
			for _, t := range noExecute(nc) {
				if b.taintAt.IsZero() && t.TimeAdded != nil && t.TimeAdded.After(b.silentAt) {
					b.taintAt = t.TimeAdded.Time
				}
			}
		}})
	for _, f := range []interface{ Start(<-chan struct{}) }{works, bindings, clusters} {
		f.Start(ctx.Done())
	}
	works.WaitForCacheSync(ctx.Done())
	bindings.WaitForCacheSync(ctx.Done())
	clusters.WaitForCacheSync(ctx.Done())
	return nil
}

func noExecute(c *clusterv1alpha1.Cluster) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range c.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// done reports whether the agent has reported w's generation applied and
// healthy.
func done(w *workv1alpha1.Work) bool {
	for _, t := range []string{workv1alpha1.WorkConditionApplied, workv1alpha1.WorkConditionAvailable} {
		c := meta.FindStatusCondition(w.Status.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != w.Generation {
			return false
		}
	}
	if len(w.Status.ManifestStatuses) != len(w.Spec.Workload.Manifests) {
		return false
	}
	for _, ms := range w.Status.ManifestStatuses {
		if ms.Health != workv1alpha1.ResourceHealthy {
			return false
		}
	}
	return true
}

// countOutageDeletion counts w if the hub began deleting it during the
// outage: a deletion issued before (a phase-1 task ending) whose finalizer
// is released later is not the outage's doing. Each Work counts once.
// Call with b.mu held.
func (b *bench) countOutageDeletion(w *workv1alpha1.Work) {
	if !b.outage || w.DeletionTimestamp == nil || b.deleting[w.UID] {
		return
	}
	// deletionTimestamp has second precision: allow the second it began.
	if w.DeletionTimestamp.Time.Before(b.outageAt.Truncate(time.Second)) {
		return
	}
	if b.deleting == nil {
		b.deleting = map[types.UID]bool{}
	}
	b.deleting[w.UID] = true
	b.workDeletes++
}

func (b *bench) observeWork(cluster string, w *workv1alpha1.Work) {
	if w.DeletionTimestamp != nil {
		b.mu.Lock()
		b.countOutageDeletion(w)
		b.mu.Unlock()
		return
	}
	if !done(w) || w.Annotations[workobjects.AnnotationBindingNamespace] != namespace {
		return
	}
	binding := w.Annotations[workobjects.AnnotationBindingName]
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case cluster == b.victim:
		if _, seen := b.onVictim[binding]; !seen {
			b.onVictim[binding] = now
		}
	case !b.silentAt.IsZero():
		if _, seen := b.replaced[binding]; !seen {
			b.replaced[binding] = now
		}
	}
}

// processWork is a simulated agent's Work sync: release a deleted Work,
// report a current one applied and healthy, while the cluster is alive.
func (b *bench) processWork(ctx context.Context) bool {
	key, quit := b.workQueue.Get()
	if quit {
		return false
	}
	defer b.workQueue.Done(key)
	obj, exists, err := b.works.GetByKey(key)
	if err != nil || !exists {
		b.workQueue.Forget(key)
		return true
	}
	w := obj.(*workv1alpha1.Work)
	cluster, _ := clusterOf(w.Namespace)
	if a := b.alive[cluster]; a == nil || !a.Load() {
		b.workQueue.Forget(key) // requeued when the cluster comes back
		return true
	}
	client := b.fc.WorkV1alpha1().Works(w.Namespace)
	switch {
	case w.DeletionTimestamp != nil:
		if !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
			break
		}
		u := w.DeepCopy()
		u.Finalizers = slices.DeleteFunc(u.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
		_, err = client.Update(ctx, u, metav1.UpdateOptions{})
	case slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) && !done(w):
		u := w.DeepCopy()
		u.Status = appliedStatus(w)
		_, err = client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		b.workQueue.AddRateLimited(key)
		return true
	}
	b.workQueue.Forget(key)
	return true
}

// appliedStatus is what a real agent writes for a Deployment that runs.
func appliedStatus(w *workv1alpha1.Work) workv1alpha1.WorkStatus {
	now := metav1.Now()
	status := workv1alpha1.WorkStatus{}
	for i, m := range w.Spec.Workload.Manifests {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name, Namespace string
			} `json:"metadata"`
			Spec struct {
				Replicas int64 `json:"replicas"`
			} `json:"spec"`
		}
		_ = json.Unmarshal(m.Raw, &obj)
		gv, _ := schema.ParseGroupVersion(obj.APIVersion)
		ns := obj.Metadata.Namespace
		if ns == "" {
			ns = w.Annotations[workobjects.AnnotationBindingNamespace]
		}
		r := obj.Spec.Replicas
		raw := fmt.Sprintf(`{"observedGeneration":1,"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d}`, r, r, r, r)
		status.ManifestStatuses = append(status.ManifestStatuses, workv1alpha1.ManifestStatus{
			Identifier: workv1alpha1.ResourceIdentifier{Ordinal: int32(i), Group: gv.Group, Version: gv.Version, Kind: obj.Kind,
				Resource: strings.ToLower(obj.Kind) + "s", Namespace: ns, Name: obj.Metadata.Name},
			Status: &runtime.RawExtension{Raw: []byte(raw)}, Health: workv1alpha1.ResourceHealthy})
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: "AppliedSuccessful", Message: fmt.Sprintf("%d manifests applied", len(status.ManifestStatuses)), ObservedGeneration: w.Generation, LastTransitionTime: now})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionAvailable, Status: metav1.ConditionTrue,
		Reason: "Available", Message: "every applied object is healthy", ObservedGeneration: w.Generation, LastTransitionTime: now})
	return status
}

// requeueCluster has a revived cluster's agent look at all its Works again.
func (b *bench) requeueCluster(cluster string) {
	for _, key := range b.works.ListKeys() {
		if strings.HasPrefix(key, esPrefix+cluster+"/") {
			b.workQueue.Add(key)
		}
	}
}

func (b *bench) waitClustersReady(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() bool {
		list, err := b.fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
		if err != nil {
			return false
		}
		ready := 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && len(c.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == b.o.clusters
	})
}

func (b *bench) createWorkloads(ctx context.Context) error {
	if _, err := b.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "evacuation", Namespace: namespace},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: benchValue}}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}}}}
	if b.o.priorities > 1 {
		if err := b.createPriorityPolicies(ctx, policy.Spec); err != nil {
			return err
		}
	} else if _, err := b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var failed atomic.Int32
	index := map[string]int{}
	for i, name := range templateNames(b.o.workloads) {
		index[name] = i
	}
	benchutil.Parallel(templateNames(b.o.workloads), 16, func(name string) {
		labels := map[string]any{"app": name}
		meta := map[string]any{"name": name, "labels": labels}
		if b.o.priorities > 1 {
			meta["labels"] = map[string]any{"app": name, benchPriorityLabel: fmt.Sprintf("p%d", b.levelOf(index[name]))}
		}
		raw, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": meta,
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
						"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}}}})
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
		if _, err := b.fc.WorkV1alpha1().ResourceTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			failed.Add(1)
			fmt.Fprintln(os.Stderr, "create:", err)
		}
	})
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d templates not created", n)
	}
	return nil
}

func templateNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("app-%05d", i)
	}
	return out
}

// evacuate is phase 1.
func (b *bench) evacuate(ctx context.Context) error {
	o := b.o
	before, err := scrape(o.hubMetrics)
	if err != nil {
		return err
	}
	b.alive[b.victim].Store(false)
	b.mu.Lock()
	b.silentAt = time.Now()
	expiry := b.lastRenew[b.victim].Add(o.grace)
	b.mu.Unlock()
	b.log("%s silent; its Lease expires at %s (in %s)", b.victim, expiry.Format("15:04:05"), time.Until(expiry).Round(time.Second))

	deadline := time.Now().Add(o.timeout)
	lastLog := time.Now()
	for {
		b.mu.Lock()
		ev, rp := len(b.evicted), len(b.replaced)
		b.mu.Unlock()
		if rp >= o.workloads && ev >= o.workloads {
			break
		}
		if time.Now().After(deadline) {
			b.log("timed out after %s: %d evicted, %d replaced", o.timeout, ev, rp)
			break
		}
		if time.Since(lastLog) >= time.Minute {
			b.log("%s after expiry: %d evicted, %d running elsewhere", time.Since(expiry).Round(time.Second), ev, rp)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	after, err := scrape(o.hubMetrics)
	if err != nil {
		return err
	}
	b.report(expiry, before, after)
	return nil
}

func (b *bench) report(expiry time.Time, before, after map[string]float64) {
	o := b.o
	b.mu.Lock()
	defer b.mu.Unlock()
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	since := func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return r(t.Sub(expiry))
	}
	sorted := func(m map[string]time.Time) []time.Duration {
		var l []time.Duration
		for _, t := range m {
			l = append(l, t.Sub(expiry))
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l
	}
	pct := func(l []time.Duration, p float64) string {
		if len(l) == 0 {
			return "—"
		}
		return r(l[min(int(float64(len(l))*p), len(l)-1)])
	}
	ev, rp := sorted(b.evicted), sorted(b.replaced)
	rate := "—"
	if len(ev) > 1 {
		rate = fmt.Sprintf("%.2f/s", float64(len(ev)-1)/(ev[len(ev)-1]-ev[0]).Seconds())
	}
	secs := time.Since(b.silentAt).Seconds()
	fmt.Printf("\nPhase 1: %d workloads on %s (of %d simulated clusters); times from its Lease expiry (last renewal + %s grace).\n", o.workloads, b.victim, o.clusters, o.grace)
	fmt.Printf("The hub adds NoExecute %s after Unknown and evicts %s after the taint (tolerations); the eviction rates are the hub's.\n\n", o.evictionTimeout, o.toleration)
	fmt.Printf("| workloads | →Unknown | →NoExecute | →first evicted | →all evicted | evicted | eviction rate | →running elsewhere p50 | p90 | max (last) | moved | hub writes/s | hub CPU | hub RSS |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	first, last := "—", "—"
	if len(ev) > 0 {
		first, last = r(ev[0]), r(ev[len(ev)-1])
	}
	if len(ev) < o.workloads {
		last = "(not all)"
	}
	maxRp := pct(rp, 1)
	if len(rp) < o.workloads {
		maxRp = "(not all)"
	}
	fmt.Printf("| %d | %s | %s | %s | %s | %d | %s | %s | %s | %s | %d | %.1f | %.0f %% of a core | %.0f MiB |\n",
		o.workloads, since(b.unknownAt), since(b.taintAt), first, last, len(ev), rate, pct(rp, 0.5), pct(rp, 0.9), maxRp, len(rp),
		(after["writes"]-before["writes"])/secs, (after["process_cpu_seconds_total"]-before["process_cpu_seconds_total"])/secs*100,
		after["process_resident_memory_bytes"]/(1<<20))
	if !b.taintAt.IsZero() && len(rp) == o.workloads {
		due := b.taintAt.Add(o.toleration)
		fmt.Printf("\nEvictions fall due at NoExecute + %s = %s after expiry; the last workload ran elsewhere %s after that.\n",
			o.toleration, since(due), r(rp[len(rp)-1]-due.Sub(expiry)))
	}
	b.reportPriorities(expiry)
	fmt.Printf("\nflotilla_eviction_evictions_total during phase 1: %s\n", evictionDelta(before, after))
	var clients []string
	for k := range after {
		if strings.HasPrefix(k, "writes by ") && after[k] > before[k] {
			clients = append(clients, k)
		}
	}
	sort.Strings(clients)
	for _, k := range clients {
		fmt.Printf("hub %s: %.0f (%.2f/s)\n", k, after[k]-before[k], (after[k]-before[k])/secs)
	}
}

func evictionDelta(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		if strings.HasPrefix(k, "evictions ") && v-before[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", strings.TrimPrefix(k, "evictions "), v-before[k]))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// fleetOutage is phase 2: every cluster silent; nothing may move.
func (b *bench) fleetOutage(ctx context.Context, env *framework.Environment) error {
	o := b.o
	b.log("phase 2: %s comes back; waiting for every simulated cluster to be Ready and untainted", b.victim)
	b.alive[b.victim].Store(true)
	b.requeueCluster(b.victim)
	if err := b.waitClustersReady(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("clusters not Ready again: %w", err)
	}
	others, err := b.fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var agents []string
	for _, c := range others.Items {
		if strings.HasPrefix(c.Name, clusterPrefix) {
			continue
		}
		if env == nil {
			return fmt.Errorf("cluster %s is not simulated and no --state environment says how to silence it", c.Name)
		}
		i := slices.IndexFunc(env.Members, func(m framework.Member) bool { return m.Name == c.Name })
		if i < 0 {
			return fmt.Errorf("cluster %s is not a member of the environment in %s", c.Name, o.state)
		}
		agents = append(agents, env.Members[i].Agents...)
	}
	time.Sleep(o.renewInterval) // the revived victim's old Works released, taints gone

	before, err := scrape(o.hubMetrics)
	if err != nil {
		return err
	}
	stopped := time.Now()
	b.mu.Lock()
	b.outage, b.outageAt = true, stopped
	b.mu.Unlock()
	for _, name := range b.names {
		b.alive[name].Store(false)
	}
	for _, a := range agents {
		if err := env.Ctl(ctx, "stop", a); err != nil {
			return err
		}
	}
	defer func() {
		for _, a := range agents {
			_ = env.Ctl(context.Background(), "start", a)
		}
	}()
	b.log("every cluster silent (%d simulated, agents stopped: %s); waiting for every Lease to expire", len(b.names), strings.Join(agents, " "))
	var allUnknown time.Time
	if err := poll(ctx, o.grace+2*o.renewInterval+2*time.Minute, func() bool {
		list, err := b.fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				return false
			}
		}
		allUnknown = time.Now()
		return true
	}); err != nil {
		return fmt.Errorf("not every cluster went Unknown: %w", err)
	}
	// The outage is the hub's to honour from when it can see it: until the
	// Leases expire, the clusters are Ready as far as it knows, and a
	// graceful task whose replacement reported Healthy may end (deleting
	// the old copy). Count from here.
	b.mu.Lock()
	b.outageAt, b.workDeletes, b.noExecuteNew, b.deleting = allUnknown, 0, 0, nil
	b.mu.Unlock()
	b.log("all %d clusters not Ready %s after the stop; watching for %s", len(others.Items), allUnknown.Sub(stopped).Round(time.Second), o.outageWindow)
	time.Sleep(o.outageWindow)
	after, err := scrape(o.hubMetrics)
	if err != nil {
		return err
	}
	b.mu.Lock()
	deletes, taints := b.workDeletes, b.noExecuteNew
	b.outage = false
	b.mu.Unlock()
	evicted := after["evictions TaintUntolerated/evicted"] - before["evictions TaintUntolerated/evicted"]
	verdict := "holds"
	if evicted > 0 || deletes > 0 || taints > 0 {
		verdict = "BROKEN"
	}
	fmt.Printf("\nPhase 2: all %d clusters silent; every one not Ready %s after the stop, then watched %s.\n\n", len(others.Items), r1(allUnknown.Sub(stopped)), o.outageWindow)
	fmt.Printf("| clusters silent | watched for | evictions | Work deletions | NoExecute taints added | fleet guard | verdict |\n|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %s after all not Ready (%s after the stop) | %.0f | %d | %d | %s | %s |\n", len(others.Items), o.outageWindow,
		r1(time.Since(stopped)), evicted, deletes, taints, guardState(after), verdict)
	fmt.Printf("\nflotilla_eviction_evictions_total during phase 2: %s\n", evictionDelta(before, after))

	for _, name := range b.names {
		b.alive[name].Store(true)
		b.requeueCluster(name)
	}
	for _, a := range agents {
		if err := env.Ctl(ctx, "start", a); err != nil {
			return err
		}
	}
	agents = nil
	// Leave the fleet as it was found: every cluster Ready and untainted.
	return poll(ctx, 3*time.Minute, func() bool {
		list, err := b.fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range list.Items {
			if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) || len(c.Spec.Taints) > 0 {
				return false
			}
		}
		return true
	})
}

func r1(d time.Duration) string { return d.Round(time.Second).String() }

func guardState(m map[string]float64) string {
	for k, v := range m {
		if s, ok := strings.CutPrefix(k, "guard "); ok && v == 1 {
			return s
		}
	}
	return "?"
}

// scrape is benchutil.Scrape plus the eviction counters by reason/result
// ("evictions <reason>/<result>") and the fleet guard state ("guard <state>").
func scrape(addr string) (map[string]float64, error) {
	out, err := benchutil.Scrape(addr)
	if err != nil {
		return nil, err
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	label := func(line, name string) string {
		_, rest, _ := strings.Cut(line, name+`="`)
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "flotilla_eviction_evictions_total{"):
			out["evictions "+label(line, "reason")+"/"+label(line, "result")] += v
		case strings.HasPrefix(line, "flotilla_hub_fleet_guard_state{"):
			out["guard "+label(line, "state")] = v
		}
	}
	return out, sc.Err()
}

// cleanup deletes what the bench made; the simulated agents (alive again)
// release the Works' finalizers.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, name := range b.names {
		b.alive[name].Store(true)
		b.requeueCluster(name)
	}
	b.log("cleaning up…")
	benchutil.Parallel(templateNames(b.o.workloads), 16, func(name string) {
		_ = b.fc.WorkV1alpha1().ResourceTemplates(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err := poll(ctx, 10*time.Minute, func() bool {
		left, err := b.fc.WorkV1alpha1().ResourceBindings(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(left.Items) == 0
	}); err != nil {
		b.log("bindings not gone: %v", err)
	}
	_ = b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Delete(ctx, "evacuation", metav1.DeleteOptions{})
	b.deletePriorityPolicies(ctx)
	_ = b.kc.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	_ = b.fc.ClusterV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
	_ = poll(ctx, 5*time.Minute, func() bool {
		list, err := b.fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue})
		return err == nil && len(list.Items) == 0
	})
	b.log("cleaned up")
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
}
