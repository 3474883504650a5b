package scheduler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Overcommit protection's wiring (the ledger is core.Assumptions): what
// the informers tell it and when its entries expire.

// assumptionGCPeriod is how often expired assumptions are released.
const assumptionGCPeriod = time.Second

// newAssumptions makes the ledger of opts (nil when AssumptionTTL is
// negative: protection off), reporting to the metrics.
func newAssumptions(opts Options) *core.Assumptions {
	ttl := opts.AssumptionTTL
	if ttl == 0 {
		ttl = core.DefaultAssumptionTTL
	}
	var hooks core.AssumptionHooks
	if m := opts.Metrics; m != nil {
		hooks = assumptionHooks(m)
	}
	return core.NewAssumptions(ttl, hooks)
}

func assumptionHooks(m *hubmetrics.Metrics) core.AssumptionHooks {
	return core.AssumptionHooks{
		Changed: func(cluster string, replicas int64) {
			if replicas == 0 {
				m.AssumedReplicas.DeleteLabelValues(cluster)
				return
			}
			m.AssumedReplicas.WithLabelValues(cluster).Set(float64(replicas))
		},
		Released: func(reason string, _ int64) { m.AssumptionReleases.WithLabelValues(reason).Inc() },
	}
}

// statusOf is the key and status of a binding object of either kind (or
// a tombstone's).
func statusOf(obj any) (string, *workv1alpha1.ResourceBindingStatus) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch b := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		return workobjects.Key(b), &b.Status
	case *workv1alpha1.ClusterResourceBinding:
		return workobjects.Key(b), &b.Status
	}
	return "", nil
}

// observeBinding tells the ledger a binding's new status (its copies up).
func (c *Controller) observeBinding(obj any) {
	if key, status := statusOf(obj); status != nil {
		c.assumed.ObserveBinding(key, status)
	}
}

// forgetBinding releases a deleted binding's assumptions.
func (c *Controller) forgetBinding(obj any) {
	if key, status := statusOf(obj); status != nil {
		c.assumed.ForgetBinding(key)
	}
}

// observeCluster tells the ledger of a new resource summary; it runs
// before the bindings are queued, so they see what it released.
func (c *Controller) observeCluster(o, n *clusterv1alpha1.Cluster) {
	if !quantities.SameSummary(o.Status.ResourceSummary, n.Status.ResourceSummary) {
		c.assumed.SummaryChanged(n.Name)
	}
}

// seedAssumptions fills the ledger of a hub that has just started (or
// become the leader) from the bindings' status: what no copy status shows
// up may not be in the summaries yet (core.Assumptions.Seed).
func (c *Controller) seedAssumptions() {
	now := c.opts.Clock.Now()
	list, _ := c.bindings.Namespaced.List(labels.Everything())
	for _, rb := range list {
		c.assumed.Seed(workobjects.Key(rb), rb.Generation, &rb.Spec, &rb.Status, now)
	}
	clusterList, _ := c.bindings.ClusterScoped.List(labels.Everything())
	for _, crb := range clusterList {
		c.assumed.Seed(workobjects.Key(crb), crb.Generation, &crb.Spec, &crb.Status, now)
	}
}

// expireAssumptions releases expired assumptions until ctx is done; room
// freed so requeues the bindings that wait for room (an unschedulable one
// waits for a change, and this is one). Not every binding: expiries can
// come every second, and a Duplicated binding is decided again on each
// requeue.
func (c *Controller) expireAssumptions(ctx context.Context) {
	wait.Until(func() {
		if n := c.assumed.Expire(c.opts.Clock.Now()); n > 0 {
			klog.FromContext(ctx).V(2).Info("Released expired scheduling assumptions", "count", n)
			c.enqueueUnscheduled()
		}
	}, assumptionGCPeriod, ctx.Done())
}

// enqueueUnscheduled queues the bindings whose Scheduled condition is not
// True.
func (c *Controller) enqueueUnscheduled() {
	waiting := func(key string, status *workv1alpha1.ResourceBindingStatus) {
		if !meta.IsStatusConditionTrue(status.Conditions, workv1alpha1.BindingConditionScheduled) {
			c.queue.Add(key)
		}
	}
	list, _ := c.bindings.Namespaced.List(labels.Everything())
	for _, rb := range list {
		waiting(workobjects.Key(rb), &rb.Status)
	}
	clusterList, _ := c.bindings.ClusterScoped.List(labels.Everything())
	for _, crb := range clusterList {
		waiting(workobjects.Key(crb), &crb.Status)
	}
}

// decide makes the decision of in with the room the ledger leaves, and
// assumes its result before another room-reading decision can start; the
// returned undo takes the assumption back (the result was not written).
func (c *Controller) decide(in *core.Input, before *workv1alpha1.ResourceBindingSpec) (core.Result, func(), error) {
	unlock := func() {}
	if core.UsesRoom(before) {
		unlock = c.assumed.LockRoom()
	}
	defer unlock()
	in.Assumed = c.assumed.Snapshot()
	result, err := core.Schedule(*in)
	if err != nil {
		return result, func() {}, err
	}
	return result, c.assumed.Assume(in.Key, before, result.Clusters, in.Now), nil
}
