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
// eviction controller decides when the old copy goes. Evictions pass a
// rate limiter whose rate the fleet guard sets, and stop entirely while
// the guard sees the whole fleet down: a hub that cannot see its clusters
// must not move everything.
package taintmanager

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// EventEvictWorkload is recorded on the binding when it is evicted from a
// cluster.
const EventEvictWorkload = "EvictWorkloadFromCluster"

// Options tune the taint manager.
type Options struct {
	Defaults Defaults
	// Guard sets the eviction rate and vetoes evictions in a full
	// disruption. Nil evicts at a fixed 1/s.
	Guard    *clustertaint.FleetGuard
	Clock    clock.Clock
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
}

// Controller is the taint manager.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	clusters clusterlisters.ClusterLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	limiterMu sync.Mutex
	limiter   *rate.Limiter
	guardMode string
}

// NewController wires the taint manager to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	clusters := factory.Cluster().V1alpha1().Clusters()
	c := &Controller{opts: opts,
		bindings: bindings,
		clusters: clusters.Lister(),
		synced:   workobjects.Synced(append(bindingInformers, clusters.Informer())...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "taint-manager"}),
		// Replaced from the guard's rate on first use (guardMode "").
		limiter: rate.NewLimiter(1, 1),
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
			if !apiequality.Semantic.DeepEqual(noExecute(o.(*clusterv1alpha1.Cluster)), noExecute(n.(*clusterv1alpha1.Cluster))) {
				c.enqueueTargeting(n.(*clusterv1alpha1.Cluster).Name)
			}
		},
	})
	return c
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

// guardRecheck is how often a binding held back by the fleet guard is
// looked at again.
const guardRecheck = 10 * time.Second

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
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
	for _, target := range binding.Spec.Clusters {
		cluster, err := c.clusters.Get(target.Name)
		if err != nil {
			continue // a deleted cluster is the scheduler's to handle
		}
		v := Decide(tolerations, cluster.Spec.Taints, now)
		switch {
		case v.Evict:
			evictions = append(evictions, eviction{target.Name, v.Taint, v.DueAt})
		case v.After > 0 && (recheck == 0 || v.After < recheck):
			recheck = v.After
		}
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	if len(evictions) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
	if g := c.opts.Guard; g != nil {
		if !g.AllowsNoExecute() {
			logger.Info("Fleet guard holds evictions: the whole fleet looks down")
			c.count(workv1alpha1.EvictionReasonTaintUntolerated, "held")
			c.queue.AddAfter(key, guardRecheck)
			return nil
		}
	}
	if r := c.reserve(now); !r.OK() || r.DelayFrom(now) > 0 {
		delay := guardRecheck
		if r.OK() {
			delay = r.DelayFrom(now)
			r.CancelAt(now)
		}
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "rate_limited")
		c.queue.AddAfter(key, delay)
		return nil
	}

	updated := binding.DeepCopy()
	purgeMode := policyv1alpha1.PurgeModeGracefully
	if f := binding.Spec.Failover; f != nil && f.Cluster != nil {
		purgeMode = policyv1alpha1.NormalizePurgeMode(f.Cluster.PurgeMode)
	}
	stamp := metav1.NewTime(now)
	for _, e := range evictions {
		workobjects.EvictCluster(&updated.Spec, workv1alpha1.GracefulEvictionTask{
			FromCluster: e.cluster, PurgeMode: purgeMode, Reason: workv1alpha1.EvictionReasonTaintUntolerated,
			Message:  fmt.Sprintf("cluster %s has taint %s, which the placement does not tolerate", e.cluster, describeTaint(e.taint)),
			Producer: workv1alpha1.EvictionProducerTaintManager,
		}, stamp)
	}
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "error")
		return err
	}
	for _, e := range evictions {
		logger.Info("Evicted workload from cluster", "cluster", e.cluster, "taint", describeTaint(e.taint), "purgeMode", purgeMode)
		c.count(workv1alpha1.EvictionReasonTaintUntolerated, "evicted")
		if m := c.opts.Metrics; m != nil {
			m.EvictionLatency.Observe(c.opts.Clock.Since(e.due).Seconds())
		}
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(binding, corev1.EventTypeWarning, EventEvictWorkload,
				"Evicted from cluster %s (taint %s not tolerated, purgeMode %s)", e.cluster, describeTaint(e.taint), purgeMode)
		}
	}
	return nil
}

// reserve takes an eviction token at the fleet guard's current rate. When
// the guard leaves Normal the bucket starts empty: the first clusters of a
// growing outage must not spend a burst before the guard sees the rest.
func (c *Controller) reserve(now time.Time) *rate.Reservation {
	c.limiterMu.Lock()
	defer c.limiterMu.Unlock()
	if g := c.opts.Guard; g != nil {
		if mode := g.State().Mode; mode != c.guardMode {
			c.guardMode = mode
			c.limiter = rate.NewLimiter(rate.Limit(g.EvictionRate()), 1)
			if mode != clustertaint.GuardNormal {
				c.limiter.ReserveN(now, 1)
			}
		}
	}
	return c.limiter.ReserveN(now, 1)
}

func (c *Controller) count(reason, result string) {
	if m := c.opts.Metrics; m != nil {
		m.Evictions.WithLabelValues(reason, result).Inc()
	}
}
