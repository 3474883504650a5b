// Package clustertaint keeps each Cluster's taints in line with its
// conditions: the built-in not-ready / unreachable taints (NoSchedule at
// once, NoExecute after --failover-eviction-timeout), the taints of every
// ClusterTaintPolicy, and the fleet guard's veto on NoExecute when the whole
// fleet looks down.
package clustertaint

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

// Event reasons.
const (
	EventTaintSucceed = "TaintClusterSucceed"
	EventTaintFailed  = "TaintClusterFailed"
	EventFleetGuard   = "FleetGuard"
	// EventTaintTimeAdded: taints written without timeAdded were stamped.
	EventTaintTimeAdded = "TaintTimeAdded"
)

// Options configure the Controller.
type Options struct {
	// FailoverEvictionTimeout is how long Ready must be False/Unknown before
	// the NoExecute taint; 0 disables NoExecute.
	FailoverEvictionTimeout time.Duration
	// GuardPeriod is how often the fleet guard is recomputed.
	GuardPeriod time.Duration
	Clock       clock.Clock
	Metrics     *hubmetrics.Metrics
	Recorder    record.EventRecorder
	// GuardPublisher, when set, publishes the guard's verdict in a
	// ConfigMap for readers outside the hub (publish.go).
	GuardPublisher *GuardPublisher
	// TaintClock remembers when taints without timeAdded were first seen;
	// shared with the taint manager. Nil: one of the controller's own.
	TaintClock *TaintClock
}

// Controller taints clusters.
type Controller struct {
	opts     Options
	flotilla flotillaclient.Interface
	clusters clusterlisters.ClusterLister
	policies clusterlisters.ClusterTaintPolicyLister
	synced   []cache.InformerSynced
	guard    *FleetGuard
	// guardMu serializes updateGuard (the periodic loop and the workers),
	// so its metrics and change events are not interleaved.
	guardMu sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string]
	// noExecuteSeen is when each cluster's NoExecute taints were first
	// seen (for taints without timeAdded); guarded by guardMu.
	noExecuteSeen map[string]time.Time
}

// NewController returns a Controller fed by Cluster and ClusterTaintPolicy informers.
func NewController(flotilla flotillaclient.Interface, clusters, policies cache.SharedIndexInformer, guard *FleetGuard, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.GuardPeriod <= 0 {
		opts.GuardPeriod = 5 * time.Second
	}
	if opts.TaintClock == nil {
		opts.TaintClock = NewTaintClock(opts.Clock)
	}
	c := &Controller{opts: opts, flotilla: flotilla, guard: guard, noExecuteSeen: map[string]time.Time{},
		clusters: clusterlisters.NewClusterLister(clusters.GetIndexer()),
		policies: clusterlisters.NewClusterTaintPolicyLister(policies.GetIndexer()),
		synced:   []cache.InformerSynced{clusters.HasSynced, policies.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cluster-taint"})}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
			c.queue.Add(cl.Name)
		}
	}
	_, _ = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if cl, ok := o.(*clusterv1alpha1.Cluster); ok {
				c.opts.TaintClock.Forget(cl.Name)
			}
		}})
	all := func(any) { c.enqueueAll() }
	_, _ = policies.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all})
	return c
}

func (c *Controller) enqueueAll() {
	list, _ := c.clusters.List(labels.Everything())
	for _, cl := range list {
		c.queue.Add(cl.Name)
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("cluster-taint", ctx.Done(), c.synced...) {
		return
	}
	c.updateGuard(ctx)
	go wait.UntilWithContext(ctx, c.updateGuard, c.opts.GuardPeriod)
	queueworker.Run(ctx, "cluster-taint", c.queue, workers, c.sync)
}

// updateGuard recomputes the fleet guard; a change of mode re-evaluates
// every cluster (NoExecute taints wait while the whole fleet looks down).
func (c *Controller) updateGuard(ctx context.Context) {
	c.guardMu.Lock()
	defer c.guardMu.Unlock()
	list, err := c.clusters.List(labels.Everything())
	if err != nil {
		return
	}
	state, changed := c.guard.Update(list)
	c.opts.GuardPublisher.Publish(ctx, state)
	if m := c.opts.Metrics; m != nil {
		modes := []string{GuardNormal, GuardPartialDisruption, GuardFullDisruption}
		metrics.SetOneHot(m.FleetGuardState, state.Mode, modes)
		m.UnhealthyClusters.Reset() // regions come and go with their clusters
		m.UnhealthyClusters.WithLabelValues("").Set(float64(state.NotReady))
		for region, n := range state.RegionNotReady {
			m.UnhealthyClusters.WithLabelValues(region).Set(float64(n))
		}
		m.FleetGuardRegionState.Reset()
		for region, r := range state.Regions {
			metrics.SetOneHot(m.FleetGuardRegionState, r.Mode, modes, region)
		}
		noExecuteMetrics(m, list, c.noExecuteSeen, c.opts.Clock.Now())
	}
	if !changed {
		return
	}
	logger := klog.FromContext(ctx)
	switch state.Mode {
	case GuardFullDisruption:
		logger.Info("Fleet guard: every cluster is not Ready; assuming the hub is cut off — no NoExecute taints, no evictions",
			"notReady", state.NotReady, "total", state.Total)
	case GuardPartialDisruption:
		logger.Info("Fleet guard: many clusters are not Ready; evictions slow down (or stop in a small fleet)", "notReady", state.NotReady, "total", state.Total)
	default:
		logger.Info("Fleet guard: fleet normal", "notReady", state.NotReady, "total", state.Total, "regions", state.Regions)
	}
	if c.opts.Recorder != nil {
		for _, cl := range list {
			if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				r := state.Regions[cl.Spec.Region]
				c.opts.Recorder.Eventf(cl, corev1.EventTypeWarning, EventFleetGuard,
					"fleet guard is %s: %d of %d clusters are not Ready; region %q is %s (%d of %d not Ready), evictions at %g clusters/s",
					state.Mode, state.NotReady, state.Total, cl.Spec.Region, r.Mode, r.NotReady, r.Total, c.guard.RegionEvictionRate(cl.Spec.Region))
			}
		}
	}
	c.enqueueAll()
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cluster, err := c.clusters.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || cluster.DeletionTimestamp != nil {
		return err
	}
	now := c.opts.Clock.Now()
	// Every taint gets a timeAdded (Karmada stamps it on admission; the
	// hub, without a webhook, on first sight), so a toleration counts from
	// when the taint appeared, not from each pass.
	taints := c.opts.TaintClock.Taints(cluster)
	// The guard vetoes new NoExecute taints before its first evaluation,
	// in a fleet-wide outage, and where the cluster's region may evict
	// nothing (a small region in a partial disruption).
	ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if ready != nil && ready.Status != metav1.ConditionTrue {
		// Judge the fleet as the cache shows it now: a NoExecute taint
		// must not ride on a verdict up to GuardPeriod old (the last
		// clusters of a fleet-wide outage go Unknown between two
		// periodic evaluations). Cheap: a list from the informer cache.
		c.updateGuard(ctx)
	}
	noExecuteOK := c.guard.AllowsNoExecuteIn(cluster.Spec.Region)

	taints, due := builtinTaints(taints, ready, now, c.opts.FailoverEvictionTimeout, noExecuteOK)
	if !due.IsZero() {
		c.queue.AddAfter(name, due.Sub(now)+10*time.Millisecond)
	}

	// ClusterTaintPolicies, oldest first; each adds before it removes.
	policies, err := c.policies.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(policies, func(i, j int) bool {
		ti, tj := policies[i].CreationTimestamp, policies[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return policies[i].Name < policies[j].Name
	})
	for _, p := range policies {
		if !clusteraffinity.Matches(p.Spec.TargetClusters, cluster) {
			continue
		}
		if len(p.Spec.AddOnConditions) > 0 && conditionsMatch(p.Spec.AddOnConditions, cluster) {
			for _, t := range p.Spec.Taints {
				if t.Effect == corev1.TaintEffectNoExecute && !noExecuteOK {
					continue
				}
				taints = add(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}, now)
			}
		}
		if len(p.Spec.RemoveOnConditions) > 0 && conditionsMatch(p.Spec.RemoveOnConditions, cluster) {
			for _, t := range p.Spec.Taints {
				taints = remove(taints, t.Key, t.Effect)
			}
		}
	}
	return c.write(ctx, cluster, taints)
}

func (c *Controller) write(ctx context.Context, cluster *clusterv1alpha1.Cluster, taints []corev1.Taint) error {
	// Compared whole, timeAdded included: a built-in taint that lacks it
	// gets it written, or its timer could never start.
	if equality.Semantic.DeepEqual(cluster.Spec.Taints, taints) {
		return nil
	}
	added, removed := diff(cluster.Spec.Taints, taints)
	updated := cluster.DeepCopy()
	updated.Spec.Taints = taints
	_, err := c.flotilla.ClusterV1alpha1().Clusters().Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		if c.opts.Recorder != nil && !apierrors.IsConflict(err) {
			c.opts.Recorder.Eventf(cluster, corev1.EventTypeWarning, EventTaintFailed, "updating taints (add %v, remove %v): %v", added, removed, err)
		}
		return err
	}
	if len(added) == 0 && len(removed) == 0 {
		// Only timeAdded changed: taints written without it got theirs.
		stamped := stampedTaints(cluster.Spec.Taints, taints)
		klog.FromContext(ctx).Info("Stamped timeAdded on cluster taints", "cluster", cluster.Name, "taints", stamped)
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(cluster, corev1.EventTypeNormal, EventTaintTimeAdded, "taints %v had no timeAdded: stamped with when the hub first saw them", stamped)
		}
		return nil
	}
	klog.FromContext(ctx).Info("Cluster taints changed", "cluster", cluster.Name, "added", added, "removed", removed)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(cluster, corev1.EventTypeNormal, EventTaintSucceed, "taints added %v, removed %v", added, removed)
	}
	if m := c.opts.Metrics; m != nil {
		for _, t := range added {
			m.TaintChanges.WithLabelValues(t.Key, string(t.Effect), "add").Inc()
		}
		for _, t := range removed {
			m.TaintChanges.WithLabelValues(t.Key, string(t.Effect), "remove").Inc()
		}
	}
	return nil
}

// builtinTaints puts the not-ready / unreachable taints in line with the
// Ready condition and returns when a pending NoExecute taint falls due
// (zero when none is pending).
//
// Every timer counts on the hub's clock, never on the agent's: the
// condition's lastTransitionTime is written by the agent with its own clock
// (one an hour behind would evict at once, one an hour ahead would delay
// failover by an hour). The NoSchedule taint's timeAdded is the hub's own
// record of when it saw Ready leave True: the hub writes it, the agent may
// not change the taints (admission policy flotilla-agent-cluster-scope), and
// it lives in the Cluster, so a hub restart neither restarts the timer nor
// fires it early. The timer runs while Ready stays not True: a switch
// between False and Unknown carries the NoSchedule taint's timeAdded (and a
// NoExecute taint's) over to the other key, or an agent flapping between
// the two could hold off failover for ever.
func builtinTaints(taints []corev1.Taint, ready *metav1.Condition, now time.Time, timeout time.Duration, noExecuteOK bool) ([]corev1.Taint, time.Time) {
	builtin := func(t corev1.Taint) bool {
		return t.Key == clusterv1alpha1.TaintClusterNotReady || t.Key == clusterv1alpha1.TaintClusterUnreachable
	}
	if ready == nil {
		// Unknown is not healthy: a cluster that never reported gets the
		// not-ready NoSchedule taint at once (Kubernetes and Karmada do
		// the same), so nothing is placed on a cluster that has run
		// nothing. No NoExecute: it holds nothing to evict. The taint has
		// no timeAdded, so no failover timer runs from registration: once
		// the startup grace turns Ready Unknown (or the agent reports
		// False), the normal timers start from then. Built-in taints
		// already there (a status wiped after an outage) stay as they
		// are, timers included.
		if slices.ContainsFunc(taints, func(t corev1.Taint) bool { return builtin(t) && t.Effect == corev1.TaintEffectNoSchedule }) {
			return taints, time.Time{}
		}
		return append(slices.Clone(taints), corev1.Taint{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule}), time.Time{}
	}
	var mine string
	switch ready.Status {
	case metav1.ConditionFalse:
		mine = clusterv1alpha1.TaintClusterNotReady
	case metav1.ConditionUnknown:
		mine = clusterv1alpha1.TaintClusterUnreachable
	}
	if mine == "" {
		return slices.DeleteFunc(slices.Clone(taints), builtin), time.Time{}
	}
	// Since when the hub has seen Ready not True, and since when a
	// NoExecute taint has been on (either key).
	var since, noExecuteSince *metav1.Time
	earliest := func(cur, t *metav1.Time) *metav1.Time {
		if t != nil && (cur == nil || t.Before(cur)) {
			return t
		}
		return cur
	}
	for _, t := range taints {
		if builtin(t) && t.Effect == corev1.TaintEffectNoSchedule {
			since = earliest(since, t.TimeAdded)
		}
		if builtin(t) && t.Effect == corev1.TaintEffectNoExecute {
			noExecuteSince = earliest(noExecuteSince, t.TimeAdded)
		}
	}
	if since == nil {
		since = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	hadNoExecute := slices.ContainsFunc(taints, func(t corev1.Taint) bool { return builtin(t) && t.Effect == corev1.TaintEffectNoExecute })
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		// The other key goes; a NoSchedule taint of ours without
		// timeAdded (added by hand) is replaced by one with it.
		return builtin(t) && (t.Key != mine || t.Effect == corev1.TaintEffectNoSchedule && t.TimeAdded == nil)
	})
	if !slices.ContainsFunc(out, func(t corev1.Taint) bool { return t.Key == mine && t.Effect == corev1.TaintEffectNoSchedule }) {
		out = append(out, corev1.Taint{Key: mine, Effect: corev1.TaintEffectNoSchedule, TimeAdded: since.DeepCopy()})
	}
	if timeout <= 0 || slices.ContainsFunc(out, func(t corev1.Taint) bool { return t.Key == mine && t.Effect == corev1.TaintEffectNoExecute }) {
		return out, time.Time{}
	}
	due := since.Add(timeout)
	if now.Before(due) {
		return out, due
	}
	if !noExecuteOK {
		return out, time.Time{}
	}
	added := &metav1.Time{Time: now.Truncate(time.Second)}
	if hadNoExecute && noExecuteSince != nil {
		added = noExecuteSince.DeepCopy()
	}
	return append(out, corev1.Taint{Key: mine, Effect: corev1.TaintEffectNoExecute, TimeAdded: added}), time.Time{}
}

// conditionsMatch: every match condition holds (they are ANDed). A missing
// condition has no status, so In never matches it and NotIn always does.
func conditionsMatch(matches []clusterv1alpha1.MatchCondition, cluster *clusterv1alpha1.Cluster) bool {
	for _, m := range matches {
		var status metav1.ConditionStatus
		if cond := meta.FindStatusCondition(cluster.Status.Conditions, m.ConditionType); cond != nil {
			status = cond.Status
		}
		in := false
		for _, v := range m.StatusValues {
			if status != "" && v == status {
				in = true
			}
		}
		switch m.Operator {
		case clusterv1alpha1.MatchConditionOpIn:
			if !in {
				return false
			}
		case clusterv1alpha1.MatchConditionOpNotIn:
			if in {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// add appends t (with timeAdded) unless a taint with its key and effect exists.
func add(taints []corev1.Taint, t corev1.Taint, now time.Time) []corev1.Taint {
	for _, x := range taints {
		if x.Key == t.Key && x.Effect == t.Effect {
			return taints
		}
	}
	t.TimeAdded = &metav1.Time{Time: now.Truncate(time.Second)}
	return append(taints, t)
}

func remove(taints []corev1.Taint, key string, effect corev1.TaintEffect) []corev1.Taint {
	out := taints[:0:0]
	for _, t := range taints {
		if t.Key != key || t.Effect != effect {
			out = append(out, t)
		}
	}
	return out
}

// stampedTaints lists the taints of after whose timeAdded before lacked.
func stampedTaints(before, after []corev1.Taint) []string {
	var out []string
	for _, t := range after {
		for _, b := range before {
			if b.Key == t.Key && b.Effect == t.Effect && b.TimeAdded == nil && t.TimeAdded != nil {
				out = append(out, t.ToString()+" at "+t.TimeAdded.UTC().Format(time.RFC3339))
			}
		}
	}
	return out
}

func diff(before, after []corev1.Taint) (added, removed []corev1.Taint) {
	has := func(list []corev1.Taint, t corev1.Taint) bool {
		for _, x := range list {
			if x.Key == t.Key && x.Effect == t.Effect && x.Value == t.Value {
				return true
			}
		}
		return false
	}
	for _, t := range after {
		if !has(before, t) {
			added = append(added, t)
		}
	}
	for _, t := range before {
		if !has(after, t) {
			removed = append(removed, t)
		}
	}
	return added, removed
}
