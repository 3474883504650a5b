// Command fleet measures a hub with 1,000 member clusters with work on
// them (issue 40 item 2), on a `make up` environment (the hub alone is
// enough: MEMBERS=0):
//
//	MEMBERS=0 HUB_FLAGS="--failover-eviction-timeout=20s --default-not-ready-toleration-seconds=5 \
//	  --default-unreachable-toleration-seconds=5 --graceful-eviction-timeout=15s" make up
//	go run ./hack/bench/fleet --state $FLOTILLA_STATE_DIR --clusters 1000 --workloads 10000 --victim-workloads 1000
//
// Setup: --clusters simulated Clusters (created in parallel) in groups of
// 10 (label fleet.bench/group), each with a simulated agent that renews its
// Lease every --renew-interval once the hub has made it, reports Ready and
// a resourceSummary when the Cluster does not say so, applies its Works as
// a real agent reports them (framework.RolledOutStatus: Applied and
// Available for the Work's generation, every manifest Healthy and rolled
// out) and releases the execution finalizer of a deleted Work. One policy
// per group (Divided, static weights) spreads 1-replica Deployments over
// the group's 10 clusters; group 0's gives the victim (fleet-0000) a weight
// of 1000 and its 9 others 1, so that --victim-workloads run on the victim
// and, when it dies, spread over the other 9. The rest of --workloads
// spread over the other groups (~9 per cluster at 1,000 / 10,000).
//
// (a) Placement: --placements times, one new template is created that a
// Duplicated policy places on the 100 clusters (one per group, not the
// victim) labelled fleet.bench/hundred; the time from its create to its
// binding placed, its 100 Works existing and all 100 applied.
//
// (b) Evacuation: the victim goes silent; from its Lease's expiry: Ready
// Unknown, the NoExecute taint, each binding's eviction, each workload
// Applied+Healthy on another cluster; times after the evictions fall due
// (taint + toleration); the hub's writes by client, per workload moved.
//
// (c) The hub's RSS (peak) and CPU (average) through the whole run, from
// its /metrics every --sample, and its VmHWM from /proc.
//
// (d) Floors (--floor): the hub stopped (hack/local-ctl.sh), the same
// apiserver, loaded as the hub left it, takes the writes (a) and (b) make
// on their critical paths, by clients that cost nothing; then the hub is
// started again.
//
// Everything stays on the hub afterwards (make down removes it).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	benchLabel    = "flotilla.io/bench"
	benchValue    = "fleet"
	groupLabel    = "fleet.bench/group"
	hundredLabel  = "fleet.bench/hundred"
	namespace     = "bench-fleet"
	clusterPrefix = "fleet-"
	esPrefix      = "flotilla-es-"
	groupSize     = 10
)

type options struct {
	clusters, workloads, victimWorkloads int
	placements, workers, setupWorkers    int
	state                                string
	grace, renewInterval                 time.Duration
	evictionTimeout, toleration          time.Duration
	sample, timeout                      time.Duration
	floor                                bool
	floorWorkers                         int
}

func main() {
	var o options
	flag.StringVar(&o.state, "state", ".local", "state directory of the `make up` environment (its environment file names the hub's kubeconfig, context and /metrics; its control script stops the hub for --floor)")
	flag.IntVar(&o.clusters, "clusters", 1000, "simulated clusters (a multiple of 10, at least 20)")
	flag.IntVar(&o.workloads, "workloads", 10000, "1-replica Deployments in all")
	flag.IntVar(&o.victimWorkloads, "victim-workloads", 1000, "of them on the victim")
	flag.IntVar(&o.placements, "placements", 3, "(a): new templates placed one after the other on the labelled tenth of the clusters")
	flag.IntVar(&o.workers, "workers", 32, "simulated agents' Work workers (all clusters together)")
	flag.IntVar(&o.setupWorkers, "setup-workers", 32, "Clusters and templates created in parallel")
	flag.DurationVar(&o.grace, "grace", 40*time.Second, "the hub's --cluster-monitor-grace-period")
	flag.DurationVar(&o.renewInterval, "renew-interval", 10*time.Second, "Lease renewal interval of the simulated agents")
	flag.DurationVar(&o.evictionTimeout, "eviction-timeout", 20*time.Second, "the hub's --failover-eviction-timeout (for the report)")
	flag.DurationVar(&o.toleration, "toleration", 5*time.Second, "the hub's --default-unreachable-toleration-seconds (for the report)")
	flag.DurationVar(&o.sample, "sample", 2*time.Second, "how often the hub's /metrics is read")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up a phase after this long")
	flag.BoolVar(&o.floor, "floor", true, "(d): stop the hub and measure the apiserver's floor for the writes of (a) and (b)")
	flag.IntVar(&o.floorWorkers, "floor-workers", 10, "(d): bindings moved at once in the evacuation floor (the hub's --concurrent-resourcebinding-syncs)")
	flag.Parse()
	if o.clusters%groupSize != 0 || o.clusters < 2*groupSize || o.victimWorkloads > o.workloads {
		fmt.Fprintln(os.Stderr, "error: --clusters must be a multiple of 10, at least 20; --victim-workloads at most --workloads")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type bench struct {
	o       options
	env     *framework.Environment
	kc      kubernetes.Interface
	fc      flotillaclient.Interface
	names   []string
	victim  string
	alive   map[string]*atomic.Bool
	sampler *sampler

	mu        sync.Mutex
	lastRenew map[string]time.Time
	// Where each binding of the bench's namespace is applied (Work
	// Applied+Healthy for its generation), by binding, then cluster.
	applied map[string]map[string]time.Time
	// (a): the binding watched, and its milestones.
	watch                                 string
	placedAt, worksAt, appliedAt, boundAt time.Time
	worksSeen, worksApplied               map[string]bool
	silentAt, unknownAt, taintAt          time.Time
	evicted, replaced                     map[string]time.Time
	onVictim                              map[string]bool
	workQueue                             workqueue.TypedRateLimitingInterface[string]
	works, bindings, clusterCache         cache.Indexer
	results                               []row
}

// row is one line of the final summary.
type row struct{ what, value, goal string }

func (b *bench) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

func (b *bench) add(what, value, goal string) {
	b.results = append(b.results, row{what, value, goal})
}

func run(o options) error {
	env, err := framework.LoadEnvironment(filepath.Join(o.state, "environment"))
	if err != nil {
		return err
	}
	cfg, err := env.RestConfig(env.HubContext)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	b := &bench{o: o, env: env, kc: kubernetes.NewForConfigOrDie(cfg), fc: flotillaclient.NewForConfigOrDie(cfg),
		lastRenew: map[string]time.Time{}, applied: map[string]map[string]time.Time{}, alive: map[string]*atomic.Bool{},
		evicted: map[string]time.Time{}, replaced: map[string]time.Time{}, onVictim: map[string]bool{}}
	for i := range o.clusters {
		name := fmt.Sprintf("%s%04d", clusterPrefix, i)
		b.names = append(b.names, name)
		b.alive[name] = &atomic.Bool{}
		b.alive[name].Store(true)
	}
	b.victim = b.names[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fmt.Printf("load average at the start: %s\n", benchutil.LoadAverage())
	b.sampler = newSampler(env.HubMetrics, filepath.Join(o.state, "pids", "hub.pid"))
	go b.sampler.run(ctx, o.sample)
	start := time.Now()
	if err := b.setup(ctx); err != nil {
		return err
	}
	setup := time.Since(start)
	b.add("setup: Clusters registered and Ready", r1(setup), "")
	b.log("%d clusters Ready after %s", o.clusters, r1(setup))
	b.sampler.mark("setup")

	t0 := time.Now()
	if err := b.fill(ctx); err != nil {
		return err
	}
	b.add(fmt.Sprintf("fill: %d workloads applied", o.workloads), r1(time.Since(t0)), "")
	b.waitQuiet(ctx, "fill")
	b.sampler.mark("fill")

	if err := b.placements(ctx); err != nil {
		return err
	}
	b.sampler.mark("placements")
	b.waitQuiet(ctx, "placements")
	if err := b.evacuate(ctx); err != nil {
		return err
	}
	b.sampler.mark("evacuation")
	b.reportHub()
	fmt.Printf("load average after the hub's phases: %s\n", benchutil.LoadAverage())
	if o.floor {
		if err := b.floors(ctx); err != nil {
			return err
		}
	}
	b.summary()
	return nil
}

// waitQuiet waits until every work queue of the hub is empty on two reads
// a second apart (its /metrics), so that a phase does not queue behind the
// previous one's status writes, and says how long that took.
func (b *bench) waitQuiet(ctx context.Context, after string) {
	t0 := time.Now()
	quiet := 0
	err := poll(ctx, b.o.timeout, func() bool {
		time.Sleep(time.Second)
		depth, err := queueDepth(b.env.HubMetrics)
		if err != nil || depth > 0 {
			quiet = 0
			return false
		}
		quiet++
		return quiet >= 2
	})
	if after == "" {
		return
	}
	b.log("hub queues empty %s after %s (%v)", r1(time.Since(t0)), after, err)
	b.add("hub queues drained after "+after, r1(time.Since(t0)), "")
}

func r1(d time.Duration) string { return d.Round(time.Second).String() }
func r3(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

// setup registers the Clusters and starts their simulated agents.
func (b *bench) setup(ctx context.Context) error {
	o := b.o
	if err := b.startInformers(ctx); err != nil {
		return err
	}
	var failed atomic.Int32
	benchutil.Parallel(b.names, o.setupWorkers, func(name string) {
		i := b.index(name)
		labels := map[string]string{benchLabel: benchValue, groupLabel: group(i)}
		if i%groupSize == groupSize/2 {
			labels[hundredLabel] = "yes"
		}
		_, err := b.fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: fmt.Sprintf("fleet-region-%d", (i/groupSize)%10)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			failed.Add(1)
			b.log("create %s: %v", name, err)
		}
	})
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d Clusters not created", n)
	}
	b.log("created %d Clusters; the hub makes their namespaces, Leases and identities", o.clusters)
	for i, name := range b.names {
		go func() {
			time.Sleep(time.Duration(i) * o.renewInterval / time.Duration(len(b.names))) // spread over the interval
			var lease *coordinationv1.Lease
			wait.UntilWithContext(ctx, func(ctx context.Context) { lease = b.heartbeat(ctx, name, lease) }, o.renewInterval)
		}()
	}
	for range o.workers {
		go func() {
			for b.processWork(ctx) {
			}
		}()
	}
	return poll(ctx, o.timeout, func() bool {
		ready := 0
		for _, obj := range b.clusterCache.List() {
			c := obj.(*clusterv1alpha1.Cluster)
			if strings.HasPrefix(c.Name, clusterPrefix) && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && len(c.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == o.clusters
	})
}

func (b *bench) index(name string) int {
	var i int
	_, _ = fmt.Sscanf(strings.TrimPrefix(name, clusterPrefix), "%d", &i)
	return i
}

func group(i int) string { return fmt.Sprintf("g%03d", i/groupSize) }

// heartbeat is one round of a simulated agent: renew the Lease (from the
// copy it last wrote, as an agent's own cache would hold it), and report
// Ready and a resourceSummary when the cached Cluster does not say so. A
// silent cluster does nothing.
func (b *bench) heartbeat(ctx context.Context, name string, lease *coordinationv1.Lease) *coordinationv1.Lease {
	if !b.alive[name].Load() {
		return lease
	}
	leases := b.kc.CoordinationV1().Leases(esPrefix + name)
	if lease == nil {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		lease = l
	}
	now := time.Now()
	l := lease.DeepCopy()
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return nil // read it again next time
	}
	b.mu.Lock()
	b.lastRenew[name] = now
	b.mu.Unlock()
	obj, exists, _ := b.clusterCache.GetByKey(name)
	if !exists {
		return updated
	}
	c := obj.(*clusterv1alpha1.Cluster)
	summary := &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("10000"), corev1.ResourceCPU: resource.MustParse("10000"), corev1.ResourceMemory: resource.MustParse("100Ti")}}
	if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) &&
		c.Status.ResourceSummary != nil && c.Status.ResourceSummary.Allocatable.Pods().Equal(summary.Allocatable[corev1.ResourcePods]) {
		return updated
	}
	c = c.DeepCopy()
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
		Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady, Message: "simulated"})
	c.Status.ResourceSummary = summary
	c.Status.NodeSummary = &clusterv1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3}
	_, _ = b.fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return updated
}

func clusterOf(ns string) (string, bool) {
	name, ok := strings.CutPrefix(ns, esPrefix)
	return name, ok && strings.HasPrefix(name, clusterPrefix)
}

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
		b.workQueue.Add(w.Namespace + "/" + w.Name)
		b.observeWork(cluster, w)
	}
	wi := works.Work().V1alpha1().Works().Informer()
	_, _ = wi.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onWork, UpdateFunc: func(_, n any) { onWork(n) }})
	b.works = wi.GetIndexer()

	bindings := flotillainformers.NewSharedInformerFactoryWithOptions(b.fc, 0, flotillainformers.WithNamespace(namespace))
	bi := bindings.Work().V1alpha1().ResourceBindings().Informer()
	_, _ = bi.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: b.observeBinding, UpdateFunc: func(_, n any) { b.observeBinding(n) }})
	b.bindings = bi.GetIndexer()

	clusters := flotillainformers.NewSharedInformerFactory(b.fc, 0)
	ci := clusters.Cluster().V1alpha1().Clusters().Informer()
	_, _ = ci.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		c := n.(*clusterv1alpha1.Cluster)
		if c.Name != b.victim {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.silentAt.IsZero() {
			return
		}
		if b.unknownAt.IsZero() && meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady, metav1.ConditionUnknown) {
			b.unknownAt = time.Now()
		}
		for _, t := range c.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute && b.taintAt.IsZero() && t.TimeAdded != nil && t.TimeAdded.After(b.silentAt) {
				b.taintAt = t.TimeAdded.Time
			}
		}
	}})
	b.clusterCache = ci.GetIndexer()
	for _, f := range []interface{ Start(<-chan struct{}) }{works, bindings, clusters} {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), wi.HasSynced, bi.HasSynced, ci.HasSynced) {
		return fmt.Errorf("informers not synced")
	}
	return nil
}

func (b *bench) observeBinding(obj any) {
	rb, ok := obj.(*workv1alpha1.ResourceBinding)
	if !ok {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if rb.Name == b.watch {
		if b.boundAt.IsZero() {
			b.boundAt = now
		}
		if b.placedAt.IsZero() && len(rb.Spec.Clusters) == b.o.clusters/groupSize {
			b.placedAt = now
		}
	}
	if b.silentAt.IsZero() || !b.onVictim[rb.Name] {
		return
	}
	if _, seen := b.evicted[rb.Name]; seen {
		return
	}
	for _, t := range rb.Spec.GracefulEvictionTasks {
		if t.FromCluster == b.victim {
			b.evicted[rb.Name] = now
			return
		}
	}
	for _, h := range rb.Spec.EvictionHistory {
		if h.ClusterName == b.victim {
			b.evicted[rb.Name] = now
			return
		}
	}
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

func (b *bench) observeWork(cluster string, w *workv1alpha1.Work) {
	if w.DeletionTimestamp != nil || w.Annotations[workobjects.AnnotationBindingNamespace] != namespace {
		return
	}
	binding := w.Annotations[workobjects.AnnotationBindingName]
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if binding == b.watch && b.worksSeen != nil {
		if !b.worksSeen[cluster] {
			b.worksSeen[cluster] = true
			if len(b.worksSeen) == b.o.clusters/groupSize {
				b.worksAt = now
			}
		}
	}
	if !done(w) {
		return
	}
	if binding == b.watch && b.worksApplied != nil && !b.worksApplied[cluster] {
		b.worksApplied[cluster] = true
		if len(b.worksApplied) == b.o.clusters/groupSize {
			b.appliedAt = now
		}
	}
	m := b.applied[binding]
	if m == nil {
		m = map[string]time.Time{}
		b.applied[binding] = m
	}
	if _, seen := m[cluster]; !seen {
		m[cluster] = now
	}
	if !b.silentAt.IsZero() && cluster != b.victim && b.onVictim[binding] {
		if _, seen := b.replaced[binding]; !seen {
			b.replaced[binding] = now
		}
	}
}

// processWork is a simulated agent's Work sync: release a deleted Work,
// report a current one applied and rolled out, while its cluster is alive.
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
		b.workQueue.Forget(key)
		return true
	}
	client := b.fc.WorkV1alpha1().Works(w.Namespace)
	switch {
	case w.DeletionTimestamp != nil:
		if !containsString(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
			break
		}
		u := w.DeepCopy()
		u.Finalizers = removeString(u.Finalizers, workv1alpha1.ExecutionFinalizer)
		_, err = client.Update(ctx, u, metav1.UpdateOptions{})
	default:
		status, ok := framework.RolledOutStatus(w, metav1.Now())
		if !ok {
			break
		}
		u := w.DeepCopy()
		u.Status = *status
		_, err = client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		b.workQueue.AddRateLimited(key)
		return true
	}
	b.workQueue.Forget(key)
	return true
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(l []string, s string) []string {
	var out []string
	for _, x := range l {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
}

func (b *bench) summary() {
	fmt.Printf("\n## Summary (%d clusters, %d workloads, %d on the victim)\n\n| figure | value | goal |\n|---|---|---|\n", b.o.clusters, b.o.workloads, b.o.victimWorkloads)
	for _, r := range b.results {
		fmt.Printf("| %s | %s | %s |\n", r.what, r.value, r.goal)
	}
	fmt.Printf("\nload average at the end: %s\n", benchutil.LoadAverage())
}

// percentiles of l (sorted in place): p50, p90, max.
func percentiles(l []time.Duration) (p50, p90, worst time.Duration) {
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	if len(l) == 0 {
		return
	}
	return l[len(l)/2], l[min(len(l)*9/10, len(l)-1)], l[len(l)-1]
}
