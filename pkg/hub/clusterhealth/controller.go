// Package clusterhealth watches each cluster's Lease on the hub and turns
// Ready Unknown (reason ClusterStatusUnknown) when the Lease has not advanced
// for the grace period — the startup grace for a cluster that never
// reported. Each cluster is requeued at its own expiry: no periodic scan of
// the whole fleet. Like Kubernetes' node lifecycle controller, it judges by
// when the hub saw the Lease change, not by the agent's clock.
package clusterhealth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

// Options configure the Controller.
type Options struct {
	// MonitorPeriod bounds how late an expiry may be noticed.
	MonitorPeriod time.Duration
	// GracePeriod is how long a Lease may stand still.
	GracePeriod time.Duration
	// StartupGracePeriod applies to a cluster that never renewed its Lease.
	StartupGracePeriod time.Duration
	Clock              clock.Clock
	Metrics            *hubmetrics.Metrics
	Recorder           record.EventRecorder
}

type observation struct {
	renew      time.Time // the Lease's renewTime when last seen changing
	observedAt time.Time // when the hub saw it (hub clock)
	reported   bool      // the Lease has been renewed at least once
}

// Controller marks silent clusters Unknown.
type Controller struct {
	opts     Options
	flotilla flotillaclient.Interface
	clusters clusterlisters.ClusterLister
	leases   coordinationlisters.LeaseLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	seen map[string]*observation
}

// NewController returns a Controller fed by Cluster and Lease informers (the
// Lease informer may be limited to the clusters' namespaces by a label).
func NewController(flotilla flotillaclient.Interface, clusters, leases cache.SharedIndexInformer, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{opts: opts, flotilla: flotilla,
		clusters: clusterlisters.NewClusterLister(clusters.GetIndexer()),
		leases:   coordinationlisters.NewLeaseLister(leases.GetIndexer()),
		synced:   []cache.InformerSynced{clusters.HasSynced, leases.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cluster-health"}),
		seen: map[string]*observation{}}
	_, _ = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueCluster(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueCluster(obj) },
		DeleteFunc: func(obj any) { c.enqueueCluster(obj) },
	})
	_, _ = leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueLease(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueLease(obj) },
		DeleteFunc: func(obj any) { c.enqueueLease(obj) },
	})
	return c
}

func (c *Controller) enqueueCluster(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
		c.queue.Add(cl.Name)
	}
}

func (c *Controller) enqueueLease(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Namespace == clusterlifecycle.Namespace(l.Name) {
		c.queue.Add(l.Name)
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("cluster-health", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "cluster-health", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cluster, err := c.clusters.Get(name)
	if apierrors.IsNotFound(err) || err == nil && cluster.DeletionTimestamp != nil {
		c.mu.Lock()
		delete(c.seen, name)
		c.mu.Unlock()
		c.forgetMetrics(name)
		return nil
	}
	if err != nil {
		return err
	}
	now := c.opts.Clock.Now()
	var renew, leaseCreated time.Time
	lease, err := c.leases.Leases(clusterlifecycle.Namespace(name)).Get(name)
	switch {
	case err == nil:
		leaseCreated = lease.CreationTimestamp.Time
		if lease.Spec.RenewTime != nil {
			renew = lease.Spec.RenewTime.Time
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	// A cluster without a Lease (not made yet, or deleted) is silent, not
	// healthy: nothing renews, so its grace period runs like any other's.
	// The cluster controller makes the Lease again; until its agent renews
	// it, the cluster keeps counting from its last renewal.
	c.mu.Lock()
	obs := c.observe(name, renew, leaseCreated, now)
	grace := c.opts.GracePeriod
	if !obs.reported {
		grace = c.opts.StartupGracePeriod
	}
	expiry := obs.observedAt.Add(grace)
	c.mu.Unlock()
	if m := c.opts.Metrics; m != nil {
		m.LeaseAge.WithLabelValues(name).Set(now.Sub(obs.observedAt).Seconds())
	}

	ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	c.recordReady(name, ready)
	if now.Before(expiry) {
		// Come back at this cluster's own expiry; a Lease update brings it
		// back sooner and pushes the expiry out.
		c.queue.AddAfter(name, expiry.Sub(now)+10*time.Millisecond)
		return nil
	}
	if ready != nil && ready.Status == metav1.ConditionUnknown {
		return nil
	}
	msg := fmt.Sprintf("the cluster's agent has not renewed its Lease for %s (grace period %s)", now.Sub(obs.observedAt).Round(time.Second), grace)
	if !obs.reported {
		msg = fmt.Sprintf("the cluster's agent has not renewed its Lease since the hub saw the cluster %s ago (startup grace period %s)",
			now.Sub(obs.observedAt).Round(time.Second), grace)
	}
	if lease == nil {
		msg += "; the Lease does not exist (the hub makes it again)"
	}
	updated := cluster.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
		Status: metav1.ConditionUnknown, Reason: clusterv1alpha1.ClusterReasonStatusUnknown, Message: msg, LastTransitionTime: metav1.NewTime(now)})
	if _, err := c.flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Cluster status unknown: Lease expired", "cluster", name, "lateness", now.Sub(expiry))
	if m := c.opts.Metrics; m != nil {
		m.UnknownLatency.Observe(now.Sub(expiry).Seconds())
	}
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(cluster, "Warning", clusterv1alpha1.ClusterReasonStatusUnknown, msg)
	}
	return nil
}

// observe updates and returns what the hub knows of name's Lease. renew is
// the Lease's renewTime (zero when the Lease or its renewTime is missing).
// Callers hold c.mu.
func (c *Controller) observe(name string, renew, leaseCreated, now time.Time) *observation {
	obs, ok := c.seen[name]
	if !ok {
		// First sight (a new cluster, or a hub that just started): the
		// Lease gets a full grace period from now — or, for a Lease made
		// moments ago that was never renewed, from its creation.
		since := now
		if renew.IsZero() && leaseCreated.After(now.Add(-c.opts.StartupGracePeriod)) && leaseCreated.Before(now) {
			since = leaseCreated
		}
		obs = &observation{renew: renew, observedAt: since, reported: !renew.IsZero()}
		c.seen[name] = obs
		return obs
	}
	// Only a renewal is a heartbeat: a Lease that vanished, or was made
	// again without a renewTime, leaves the clock running from the last one.
	if !renew.IsZero() && !renew.Equal(obs.renew) {
		obs.renew, obs.observedAt, obs.reported = renew, renewObservedAt(renew, now), true
	}
	return obs
}

// renewTrustWindow is how far before the hub's clock a Lease's renewTime is
// taken as the time of the renewal. A watch event can reach a busy hub a
// second or two after the write; counting from its arrival would make every
// detection that much late. Trusting the agent's clock further than this
// would let a skewed clock shorten the grace period.
const renewTrustWindow = 3 * time.Second

// renewObservedAt is when a renewal seen at now counts as having happened:
// its renewTime when that lies within renewTrustWindow before now, clamped
// to that window otherwise (a clock behind or ahead of the hub's).
func renewObservedAt(renew, now time.Time) time.Time {
	switch {
	case renew.After(now):
		return now
	case renew.Before(now.Add(-renewTrustWindow)):
		return now.Add(-renewTrustWindow)
	default:
		return renew
	}
}

// forgetMetrics drops a deleted cluster's series: a last Ready=False left
// behind would keep FlotillaClusterNotReady firing for a cluster that no
// longer exists.
func (c *Controller) forgetMetrics(name string) {
	if m := c.opts.Metrics; m != nil {
		m.ClusterReady.DeletePartialMatch(prometheus.Labels{"cluster": name})
		m.LeaseAge.DeleteLabelValues(name)
	}
}

func (c *Controller) recordReady(name string, ready *metav1.Condition) {
	m := c.opts.Metrics
	if m == nil {
		return
	}
	status := ""
	if ready != nil {
		status = string(ready.Status)
	}
	metrics.SetOneHot(m.ClusterReady, status, []string{"True", "False", "Unknown"}, name)
}
