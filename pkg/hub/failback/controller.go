// Package failback moves a failed-over workload back to the placement it
// had before the failover (failover.failback on its policy), without a
// moment of fewer available replicas: it only asks the scheduler for a
// fresh schedule with reason Failback, and the scheduler and the graceful
// eviction controller add the returning copy first and remove or shrink
// the others only once the new placement is healthy.
//
// A binding fails back when every cluster it would return to has been
// Ready, with no untolerated taint, for the stabilization window without a
// break (the Ready condition's lastTransitionTime, the binding's last
// eviction from the cluster and its last failback all restart the window),
// it has no open graceful eviction task, the fleet guard sees no
// disruption anywhere, and fewer than maxConcurrent failbacks are in
// progress fleet-wide. Decide is the pure decision; this controller only
// reads caches, writes one binding update per failback and requeues a
// binding at its window's end instead of polling.
package failback

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Events on the binding.
const (
	// EventFailbackStarted: the hub asked for the failback.
	EventFailbackStarted = "FailbackStarted"
	// EventFailbackWaiting: a failback is due but waits for the fleet
	// guard or the fleet-wide limit (recorded once per change).
	EventFailbackWaiting = "FailbackWaiting"
	// EventFailbackRolledBack (Warning): the failback's new placement did
	// not become healthy within --failback-timeout; the old placement is
	// back.
	EventFailbackRolledBack = ReasonRolledBack
)

// Re-checks that no informer event announces. The guard is recomputed by
// the cluster-taint controller every cluster monitor period; a slot under
// maxConcurrent is announced by the binding that frees it, this is only a
// safety net.
const (
	guardRecheck = 5 * time.Second
	limitRecheck = 30 * time.Second
	// fitRecheck: a failback the scheduler would not place (ActionWaitFit)
	// is looked at again this often (and on every cluster change); it
	// costs a scheduler run, never a write.
	fitRecheck = 30 * time.Second
	// startedTimeout bounds how long a failback this controller wrote
	// counts as in progress while the cache does not show it yet.
	startedTimeout = time.Minute
)

// Metrics are the failback controller's metrics.
type Metrics struct {
	// Started counts failbacks started.
	Started prometheus.Counter
	// InProgress is the number of failbacks in progress fleet-wide.
	InProgress prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Started: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "failback",
			Name: "started_total", Help: "Failbacks started: workloads asked to return to the placement they had before a failover."}),
		InProgress: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "failback",
			Name: "in_progress", Help: "Failbacks in progress fleet-wide (reschedule asked and not yet made, or a Failback graceful task open)."}),
	}
	reg.MustRegister(m.Started, m.InProgress)
	return m
}

// Options tune the controller.
type Options struct {
	// Guard is the fleet guard whose verdict holds failbacks; nil never
	// holds (unit tests).
	Guard    *clustertaint.FleetGuard
	Clock    clock.Clock
	Metrics  *Metrics
	Recorder record.EventRecorder
	// EvictionHistoryTTL is the scheduler's (--eviction-history-ttl), for
	// the trial schedule that confirms a failback lands where it returns.
	EvictionHistoryTTL time.Duration
	// MaxConcurrentPerNamespace caps the failbacks in progress per
	// namespace (--failback-max-concurrent-per-namespace; 0: no cap).
	MaxConcurrentPerNamespace int
	// Timeout bounds how long a failback waits for its new placement to
	// become healthy before it is rolled back (--failback-timeout; 0:
	// never).
	Timeout time.Duration
}

// Controller is the failback controller.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	clusters clusterlisters.ClusterLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	// mu serialises the count of failbacks in progress with the write
	// that adds one, so two workers never both take the last slot.
	mu sync.Mutex
	// started are the failbacks this controller wrote, by key, with their
	// trigger time, until the cache shows them.
	started map[string]time.Time
	// waiting is the last fleet-wide wait reported per binding (events
	// once per change).
	waiting map[string]string
	// counted is the last fleet-wide count of failbacks in progress: while
	// it is above zero every sync counts again, so the gauge falls when
	// they end.
	counted int

	// untaintedSince is when each cluster was last seen losing its last
	// NoSchedule/NoExecute taint, or first seen without one (a hub start
	// counts as that: after a restart windows start over, never shorter).
	tmu            sync.Mutex
	untaintedSince map[string]time.Time

	// roomSince is when each overflowed binding's preferred group was
	// first seen with room for some of its overflowed replicas, without a
	// break (Decision.Room); guarded by mu. A hub restart starts it over:
	// the window is never shorter.
	roomSince map[string]time.Time
}

// NewController wires the controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	clusters := factory.Cluster().V1alpha1().Clusters()
	c := &Controller{opts: opts, bindings: bindings, clusters: clusters.Lister(),
		synced: workobjects.Synced(append(bindingInformers, clusters.Informer())...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "failback"}),
		started: map[string]time.Time{}, waiting: map[string]string{}, untaintedSince: map[string]time.Time{},
		roomSince: map[string]time.Time{},
	}
	enabled := func(obj any) {
		if spec := workobjects.SpecOf(obj); spec != nil && spec.Failover != nil && spec.Failover.Failback != nil {
			workobjects.EnqueueKey(c.queue.Add)(obj)
		}
	}
	for _, inf := range bindingInformers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enabled,
			UpdateFunc: func(o, n any) {
				enabled(n)
				// A failback that ends frees a slot for those waiting on
				// the fleet-wide limit.
				if inProgressObj(o) && !inProgressObj(n) {
					c.enqueueWaitingOnLimit()
				}
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if inProgressObj(o) {
					c.enqueueWaitingOnLimit()
				}
			},
		})
	}
	// A cluster turning Ready (or failing again, or losing a taint) starts,
	// restarts or ends a window.
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
				c.observeTaints(nil, cl)
			}
			c.enqueueAll()
		},
		UpdateFunc: func(o, n any) {
			oc, ok1 := o.(*clusterv1alpha1.Cluster)
			nc, ok2 := n.(*clusterv1alpha1.Cluster)
			if !ok1 || !ok2 {
				return
			}
			c.observeTaints(oc, nc)
			if readyChanged(oc, nc) || !taintsEqual(oc, nc) {
				c.enqueueAll()
			} else if !quantities.SameSummary(oc.Status.ResourceSummary, nc.Status.ResourceSummary) { // the agent's: not Quantity.Cmp
				// Room in a preferred group starts (or ends) an overflow
				// come-back's window.
				c.enqueueOverflowing()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
				c.tmu.Lock()
				delete(c.untaintedSince, cl.Name)
				c.tmu.Unlock()
			}
			c.enqueueAll()
		},
	})
	return c
}

// observeTaints records when cluster n lost its last NoSchedule/NoExecute
// taint (o is its previous state, nil when first seen).
func (c *Controller) observeTaints(o, n *clusterv1alpha1.Cluster) {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	_, known := c.untaintedSince[n.Name]
	switch {
	case scheduleTainted(n):
		delete(c.untaintedSince, n.Name)
	case o == nil || scheduleTainted(o) || !known:
		c.untaintedSince[n.Name] = c.opts.Clock.Now()
	}
}

// scheduleTainted: the cluster has a taint that keeps workloads off it.
func scheduleTainted(c *clusterv1alpha1.Cluster) bool {
	for _, t := range c.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

func (c *Controller) untainted() map[string]time.Time {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	out := make(map[string]time.Time, len(c.untaintedSince))
	for k, v := range c.untaintedSince {
		out[k] = v
	}
	return out
}

func readyChanged(o, n *clusterv1alpha1.Cluster) bool {
	a := meta.FindStatusCondition(o.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	b := meta.FindStatusCondition(n.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if a == nil || b == nil {
		return a != b
	}
	return a.Status != b.Status || !a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

func taintsEqual(o, n *clusterv1alpha1.Cluster) bool {
	if len(o.Spec.Taints) != len(n.Spec.Taints) {
		return false
	}
	for i := range o.Spec.Taints {
		if !o.Spec.Taints[i].MatchTaint(&n.Spec.Taints[i]) {
			return false
		}
	}
	return true
}

func inProgressObj(obj any) bool {
	switch b := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		return InProgress(&b.Spec, &b.Status)
	case *workv1alpha1.ClusterResourceBinding:
		return InProgress(&b.Spec, &b.Status)
	}
	return false
}

func (c *Controller) enqueueAll() {
	c.bindings.Each(func(key string, spec *workv1alpha1.ResourceBindingSpec) {
		if spec.Failover != nil && spec.Failover.Failback != nil {
			c.queue.Add(key)
		}
	})
}

// enqueueOverflowing enqueues the failback-enabled bindings whose
// placement has overflow groups.
func (c *Controller) enqueueOverflowing() {
	c.bindings.Each(func(key string, spec *workv1alpha1.ResourceBindingSpec) {
		if spec.Failover == nil || spec.Failover.Failback == nil || spec.Placement == nil {
			return
		}
		for _, t := range spec.Placement.ClusterAffinities {
			if len(t.OverflowAffinities) > 0 {
				c.queue.Add(key)
				return
			}
		}
	})
}

func (c *Controller) enqueueWaitingOnLimit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, why := range c.waiting {
		if why == string(ActionWaitLimit) {
			c.queue.Add(key)
		}
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("failback", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "failback", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if binding.DeletionTimestamp != nil {
		return nil
	}
	if failbackOf(&binding.Spec) == nil {
		// Most bindings: nothing to decide, and no fleet-wide count.
		c.forget(key)
		return nil
	}
	list, err := c.clusters.List(labels.Everything())
	if err != nil {
		return err
	}
	clusters := make(map[string]*clusterv1alpha1.Cluster, len(list))
	for _, cl := range list {
		clusters[cl.Name] = cl
	}
	guard := clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardNormal}
	if c.opts.Guard != nil {
		guard = c.opts.Guard.State()
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	// A failback whose new placement has not become healthy in time is
	// rolled back: it must not hold a slot (and two copies) for good.
	if overdue, left := Overdue(&binding.Spec, c.opts.Timeout, now); overdue {
		return c.rollback(ctx, key, binding, now)
	} else if left > 0 {
		c.queue.AddAfter(key, left)
	}
	in := Input{NamespaceLimit: c.opts.MaxConcurrentPerNamespace, Spec: &binding.Spec, Status: &binding.Status, Clusters: clusters, Guard: guard, UntaintedSince: c.untainted(), Now: now,
		Schedule:  CoreSchedule(key, list, binding.Status.SchedulerObservedAffinityName, c.opts.EvictionHistoryTTL, now),
		Targets:   CoreScheduleTargets(key, list, binding.Status.SchedulerObservedAffinityName, c.opts.EvictionHistoryTTL, now),
		RoomSince: c.roomSince[key]}
	d := Decide(in)
	// The preferred group's room must hold for the window without a
	// break: it starts when first seen and ends when gone (or when the
	// come-back starts, or waits on its own task).
	switch {
	case d.Room && d.Action != ActionStart:
		if _, ok := c.roomSince[key]; !ok {
			c.roomSince[key] = now
		}
	case d.Action != ActionWaitTask:
		delete(c.roomSince, key)
	}
	// The fleet-wide count lists every binding: only when a failback may
	// start (the limit is Decide's last check), while we have failbacks in
	// flight, or while the last count was not zero (for the gauge).
	total := 0
	if d.Action == ActionStart || len(c.started) > 0 || c.counted > 0 {
		total, in.InProgress, in.InNamespace = c.countInProgress(key, now)
		c.counted = total
		if c.opts.Metrics != nil {
			c.opts.Metrics.InProgress.Set(float64(total))
		}
		if d.Action == ActionStart {
			d = Decide(in)
		}
	}
	if _, pending := c.started[key]; pending {
		// Our failback of it is not in the cache yet: deciding on the
		// stale copy would only write it again (and conflict); its
		// informer event brings it back.
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
	switch d.Action {
	case ActionWaitWindow:
		c.queue.AddAfter(key, d.After)
	case ActionWaitGuard:
		c.queue.AddAfter(key, guardRecheck)
	case ActionWaitLimit:
		c.queue.AddAfter(key, limitRecheck)
	case ActionWaitFit:
		c.queue.AddAfter(key, fitRecheck)
	}
	if d.Action == ActionWaitGuard || d.Action == ActionWaitLimit {
		if c.waiting[key] != string(d.Action) {
			c.waiting[key] = string(d.Action)
			logger.Info("Failback waits", "reason", d.Action, "message", d.Message)
			if c.opts.Recorder != nil {
				c.opts.Recorder.Eventf(binding, corev1.EventTypeNormal, EventFailbackWaiting, "Failback to %s waits: %s", strings.Join(d.Clusters, ", "), d.Message)
			}
		}
	} else {
		delete(c.waiting, key)
	}
	if d.Action != ActionStart {
		logger.V(4).Info("No failback", "action", d.Action, "message", d.Message)
		return nil
	}
	updated := binding.DeepCopy()
	Apply(&updated.Spec, &updated.Status, d.Clusters, now)
	// What it ran before, for a rollback (AnnotationClustersBefore).
	if before, err := json.Marshal(binding.Spec.Clusters); err == nil {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[AnnotationClustersBefore] = string(before)
	}
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		return err
	}
	c.started[key] = updated.Spec.RescheduleTriggeredAt.Time
	c.counted = total + 1
	if c.opts.Metrics != nil {
		c.opts.Metrics.Started.Inc()
		c.opts.Metrics.InProgress.Set(float64(total + 1))
	}
	logger.Info("Failback started", "clusters", d.Clusters)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(binding, corev1.EventTypeNormal, EventFailbackStarted, "Failing back to %s: %s", strings.Join(d.Clusters, ", "), d.Message)
	}
	return nil
}

// countInProgress counts the failbacks in progress fleet-wide: all of them
// and those of bindings other than key. A failback this controller wrote
// counts even before the cache shows it. Called with mu held.
func (c *Controller) countInProgress(key string, now time.Time) (total, others, sameNamespace int) {
	seen := map[string]bool{}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	count := func(k string, spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) {
		at, started := c.started[k]
		if started && (spec.RescheduleTriggeredAt != nil && !spec.RescheduleTriggeredAt.Time.Before(at) || now.Sub(at) > startedTimeout) {
			// The cache has caught up (or never will): it decides.
			delete(c.started, k)
			started = false
		}
		if !started && !InProgress(spec, status) {
			return
		}
		seen[k] = true
		total++
		if k != key {
			others++
			if kns, _, _ := cache.SplitMetaNamespaceKey(k); kns == ns {
				sameNamespace++
			}
		}
	}
	rbs, _ := c.bindings.Namespaced.List(labels.Everything())
	for _, rb := range rbs {
		count(workobjects.Key(rb), &rb.Spec, &rb.Status)
	}
	crbs, _ := c.bindings.ClusterScoped.List(labels.Everything())
	for _, crb := range crbs {
		count(workobjects.Key(crb), &crb.Spec, &crb.Status)
	}
	for k := range c.started {
		if !seen[k] {
			// Gone from the cache.
			delete(c.started, k)
		}
	}
	return total, others, sameNamespace
}

// rollback undoes binding's overdue failback (Rollback) in one update and
// reports it: a Warning event on the binding, and the eviction-history
// entries of reason FailbackRolledBack, from which the failover history
// makes an item. Called with mu held.
func (c *Controller) rollback(ctx context.Context, key string, binding *workv1alpha1.ResourceBinding, now time.Time) error {
	updated := binding.DeepCopy()
	spec := &updated.Spec
	var before []workv1alpha1.TargetCluster
	if raw := updated.Annotations[AnnotationClustersBefore]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &before); err != nil {
			klog.FromContext(ctx).Info("Ignoring an unreadable record of the placement before the failback", "binding", key, "err", err)
			before = nil
		}
		delete(updated.Annotations, AnnotationClustersBefore)
	}
	left, lowered := Rollback(spec, before, now)
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		return err
	}
	delete(c.started, key)
	msg := fmt.Sprintf("Failback rolled back: the new placement did not become healthy within %s (--failback-timeout); back on %s", c.opts.Timeout, describeTargets(spec.Clusters))
	if len(left) > 0 {
		msg += "; left " + strings.Join(left, ", ") + " (the scheduler avoids it for a while, and failback does not return to it until another failure)"
	}
	if len(lowered) > 0 {
		msg += "; " + strings.Join(lowered, ", ") + " back to their old replicas (failback does not grow them again until a failover or a WorkloadRebalancer clears the history)"
	}
	klog.FromContext(ctx).Info("Failback rolled back", "binding", key, "left", left, "lowered", lowered)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(binding, corev1.EventTypeWarning, EventFailbackRolledBack, msg)
	}
	return nil
}

func describeTargets(targets []workv1alpha1.TargetCluster) string {
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		parts = append(parts, fmt.Sprintf("%s(%d)", t.Name, t.Replicas))
	}
	return strings.Join(parts, ", ")
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiting, key)
	delete(c.started, key)
	delete(c.roomSince, key)
}
