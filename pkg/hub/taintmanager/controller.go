/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package taintmanager evicts workloads from clusters whose NoExecute taints
// their placement does not tolerate (Karmada's NoExecuteTaintManager, with
// the node lifecycle controller's toleration timing). An eviction moves the
// cluster from the binding's spec.clusters into a graceful eviction task;
// the scheduler then places the replicas elsewhere and the graceful
// eviction controller decides when the old copy goes. Evictions are
// rate-limited per cluster, as Kubernetes' node lifecycle controller
// rate-limits nodes, not pods: the first time a workload on a cluster falls
// due, the fleet guard admits the cluster (one token of its region's
// limiter, at the rate the guard sets for the region), and from then on
// every workload on it moves without further tokens. The guard admits
// nothing before its first evaluation, while the whole fleet is down (a hub
// that cannot see its clusters must not move everything), nor from a small
// region in a partial disruption.
package taintmanager

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/priorityqueue"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// EventEvictWorkload is recorded on the binding when it is evicted from a
// cluster.
const EventEvictWorkload = "EvictWorkloadFromCluster"

// Options tune the taint manager.
type Options struct {
	Defaults Defaults
	// Guard admits clusters for eviction (rate per region, vetoes). Nil
	// admits every cluster at once (unit tests).
	Guard    *clustertaint.FleetGuard
	Clock    clock.Clock
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
	// TaintClock fills in timeAdded for taints the cluster taint
	// controller has not stamped yet, from when they were first seen
	// (shared with it). Nil: one of the controller's own.
	TaintClock *clustertaint.TaintClock
}

// Controller is the taint manager.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	clusters clusterlisters.ClusterLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the taint manager to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.TaintClock == nil {
		opts.TaintClock = clustertaint.NewTaintClock(opts.Clock)
	}
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	clusters := factory.Cluster().V1alpha1().Clusters()
	c := &Controller{opts: opts,
		bindings: bindings,
		clusters: clusters.Lister(),
		synced:   workobjects.Synced(append(bindingInformers, clusters.Informer())...),
		// Higher schedulePriority first, ties in arrival order; retries
		// and delayed keys too, once they are due.
		queue: priorityqueue.NewRateLimitingQueue("taint-manager", bindings.Priority),
	}
	enqueue := workobjects.EnqueueKey(c.queue.Add)
	for _, inf := range bindingInformers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
			UpdateFunc: func(o, n any) {
				if o.(metav1.Object).GetGeneration() != n.(metav1.Object).GetGeneration() {
					enqueue(n)
				}
			}})
	}
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { c.enqueueTargeting(o.(*clusterv1alpha1.Cluster).Name) },
		UpdateFunc: func(o, n any) {
			cl := n.(*clusterv1alpha1.Cluster)
			if !apiequality.Semantic.DeepEqual(noExecute(o.(*clusterv1alpha1.Cluster)), noExecute(cl)) {
				if len(noExecute(cl)) == 0 && c.opts.Guard != nil {
					c.opts.Guard.Forget(cl.Name) // it came back: a new outage takes a new token
				}
				c.enqueueTargeting(cl.Name)
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if cl, ok := o.(*clusterv1alpha1.Cluster); ok {
				c.forget(cl.Name)
			}
		},
	})
	return c
}

func (c *Controller) forget(cluster string) {
	c.opts.TaintClock.Forget(cluster)
	if c.opts.Guard != nil {
		c.opts.Guard.Forget(cluster)
	}
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

// enqueueTargeting enqueues the bindings scheduled to cluster.
func (c *Controller) enqueueTargeting(cluster string) {
	c.bindings.Each(func(key string, spec *workv1alpha1.ResourceBindingSpec) {
		if slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster }) {
			c.queue.Add(key)
		}
	})
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("taint-manager", ctx.Done(), c.synced...) {
		return
	}
	if m := c.opts.Metrics; m != nil {
		go wait.UntilWithContext(ctx, func(context.Context) { m.EvictionQueueDepth.Set(float64(c.queue.Len())) }, 5*time.Second)
	}
	queueworker.Run(ctx, "taint-manager", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.evict(ctx, key, binding)
	if !apierrors.IsConflict(err) {
		return err
	}
	// Another write came between our read and our eviction, most often the
	// binding controller's status patch for the same Ready change: decide
	// again at once from the binding as stored. A requeue would wait for
	// its backoff and for the cache to catch up, on every failover's path
	// (docs/benchmarks.md, the chain after detection). Once: a second
	// conflict goes back to the queue.
	binding, err = c.bindings.Read(ctx, key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.evict(ctx, key, binding)
}

// evict writes binding's evictions from the clusters whose taints it does
// not tolerate, as far as the fleet guard admits them.
func (c *Controller) evict(ctx context.Context, key string, binding *workv1alpha1.ResourceBinding) error {
	if binding.DeletionTimestamp != nil || len(binding.Spec.Clusters) == 0 {
		return nil
	}
	now := c.opts.Clock.Now()
	var tolerations []corev1.Toleration
	if binding.Spec.Placement != nil {
		tolerations = binding.Spec.Placement.ClusterTolerations
	}
	tolerations = c.opts.Defaults.WithDefaults(tolerations)
	type eviction struct {
		cluster string
		taint   *corev1.Taint
		due     time.Time
	}
	var evictions []eviction
	var recheck time.Duration
	requeue := func(d time.Duration) {
		if d > 0 && (recheck == 0 || d < recheck) {
			recheck = d
		}
	}
	held, limited := false, false
	for _, target := range binding.Spec.Clusters {
		cluster, err := c.clusters.Get(target.Name)
		if err != nil {
			continue // a deleted cluster is the scheduler's to handle
		}
		// Taints without timeAdded count from their first sight, never
		// from now on each pass (the deadline would never come).
		v := Decide(tolerations, c.opts.TaintClock.Taints(cluster), now)
		if !v.Evict {
			requeue(v.After)
			continue
		}
		// Admission is per cluster: the first binding on it that falls
		// due takes the cluster's token, the others follow for free.
		if ok, retry := c.admit(cluster, now); !ok {
			if c.opts.Guard.RegionEvictionRate(cluster.Spec.Region) == 0 {
				held = true
			} else {
				limited = true
			}
			requeue(retry)
			continue
		}
		evictions = append(evictions, eviction{target.Name, v.Taint, v.DueAt})
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
	if held {
		logger.V(2).Info("Fleet guard holds evictions (not evaluated yet, the whole fleet down, or a small region in a partial disruption)")
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "held")
	}
	if limited {
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "rate_limited")
	}
	if len(evictions) == 0 {
		return nil
	}

	updated := binding.DeepCopy()
	purgeMode := policyv1alpha1.PurgeModeGracefully
	var state *policyv1alpha1.StatePreservation
	if f := binding.Spec.Failover; f != nil && f.Cluster != nil {
		purgeMode, state = policyv1alpha1.NormalizePurgeMode(f.Cluster.PurgeMode), f.Cluster.StatePreservation
	}
	evicting := func(name string) bool {
		return slices.ContainsFunc(evictions, func(e eviction) bool { return e.cluster == name })
	}
	purgeMode, downgraded := SafePurgeMode(purgeMode, binding.Spec.Clusters, binding.Status.AggregatedStatus, binding.Generation, evicting)
	note := ""
	if downgraded {
		note = "; purgeMode Directly applied as Gracefully: no other cluster runs a healthy copy"
	}
	stamp := metav1.NewTime(now)
	for _, e := range evictions {
		carried, stateNote := statepreservation.Carry(c.opts.Recorder, binding, state, e.cluster)
		workobjects.EvictCluster(&updated.Spec, workv1alpha1.GracefulEvictionTask{
			FromCluster: e.cluster, PurgeMode: purgeMode, Reason: workv1alpha1.EvictionReasonTaintUntolerated, PreservedLabelState: carried,
			Message:  fmt.Sprintf("cluster %s has taint %s, which the placement does not tolerate%s%s", e.cluster, describeTaint(e.taint), note, stateNote),
			Producer: workv1alpha1.EvictionProducerTaintManager,
		}, stamp)
	}
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		if !apierrors.IsConflict(err) {
			// A conflict is decided again (sync), not a failed eviction.
			c.count(workv1alpha1.EvictionReasonTaintUntolerated, "error")
		}
		return err
	}
	for _, e := range evictions {
		logger.Info("Evicted workload from cluster", "cluster", e.cluster, "taint", describeTaint(e.taint), "purgeMode", purgeMode, "downgradedFromDirectly", downgraded)
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "evicted")
		if m := c.opts.Metrics; m != nil {
			m.EvictionLatency.Observe(c.opts.Clock.Since(e.due).Seconds())
		}
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(binding, corev1.EventTypeWarning, EventEvictWorkload,
				"Evicted from cluster %s (taint %s not tolerated, purgeMode %s%s)", e.cluster, describeTaint(e.taint), purgeMode, note)
		}
	}
	return nil
}

// admit asks the fleet guard whether workloads may leave cluster now.
func (c *Controller) admit(cluster *clusterv1alpha1.Cluster, now time.Time) (bool, time.Duration) {
	if c.opts.Guard == nil {
		return true, 0
	}
	return c.opts.Guard.Admit(cluster.Name, cluster.Spec.Region, now)
}

func (c *Controller) count(reason, result string) {
	if m := c.opts.Metrics; m != nil {
		m.Evictions.WithLabelValues(reason, result).Inc()
	}
}
