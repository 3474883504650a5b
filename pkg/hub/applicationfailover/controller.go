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

// Package applicationfailover moves an application off a cluster where it
// has stayed unhealthy, without a break, for its policy's
// decisionConditions.tolerationSeconds (failover.application). The
// unhealthy-since times live in the binding's status (the binding
// controller keeps them), so a hub restart neither resets nor shortens a
// countdown. An eviction becomes a graceful eviction task with reason
// ApplicationFailure and the policy's purgeMode and gracePeriodSeconds, and
// an eviction history entry the scheduler honours.
//
// It is guarded like cluster failover: a workload Unhealthy on every
// cluster it is placed on is the application's fault, so nothing is
// evicted (condition ApplicationFailoverHeld says why); an eviction passes
// the fleet guard's per-cluster admission and rate limit; purgeMode
// Directly is applied as Gracefully while no other cluster runs a healthy
// copy; and one update never evicts every cluster of a binding.
package applicationfailover

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/rollout"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Events on the binding.
const (
	// EventEvictWorkload: an unhealthy application was evicted from a
	// cluster.
	EventEvictWorkload = "EvictWorkloadFromCluster"
	// EventApplicationFailoverHeld: the application is Unhealthy
	// everywhere; nothing is evicted.
	EventApplicationFailoverHeld = "ApplicationFailoverHeld"
	// EventApplicationFailoverReleased: that no longer holds.
	EventApplicationFailoverReleased = "ApplicationFailoverReleased"
)

// DefaultTolerationSeconds is decisionConditions.tolerationSeconds when the
// policy leaves it unset (the API's default).
const DefaultTolerationSeconds = 300

// Due reports whether the application on the cluster of item must be
// evicted at now, and otherwise how long until it must (0: it is not
// unhealthy). Only health observed for the binding's current generation
// counts; the binding controller keeps UnhealthySince only while it does.
// Decide adds the policy's preConditions.
func Due(item *workv1alpha1.AggregatedStatusItem, generation int64, tolerationSeconds int32, now time.Time) (bool, time.Duration) {
	v := Decide(item, generation, tolerationSeconds, nil, now)
	return v.Due, v.After
}

// Options tune the controller.
type Options struct {
	// Guard admits clusters for eviction, as for cluster failover. Nil
	// admits every cluster at once (unit tests).
	Guard *clustertaint.FleetGuard
	// EvictionHistoryTTL is how long the scheduler keeps a binding off a
	// cluster it was evicted from: an application failure there still
	// counts towards "unhealthy everywhere" (0: for as long as the
	// history keeps it).
	EvictionHistoryTTL time.Duration
	Clock              clock.Clock
	Metrics            *hubmetrics.Metrics
	Recorder           record.EventRecorder
}

// Controller is the application failover controller.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	clusters clusterlisters.ClusterLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	// waiting is, per binding key, what the preConditions last held back
	// (see noteWaiting).
	waiting sync.Map
}

// NewController wires the controller to factory's informers.
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
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "application-failover"}),
	}
	enabled := func(obj any) {
		if spec := workobjects.SpecOf(obj); spec != nil && (spec.Failover != nil && spec.Failover.Application != nil || held(obj)) {
			workobjects.EnqueueKey(c.queue.Add)(obj)
		}
	}
	for _, inf := range bindingInformers {
		// Status changes are how an application turns unhealthy.
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enabled, UpdateFunc: func(_, n any) { enabled(n) }})
	}
	return c
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("application-failover", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "application-failover", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		c.waiting.Delete(key)
		return nil
	}
	if err != nil || binding.DeletionTimestamp != nil {
		return err
	}
	if binding.Spec.Failover == nil || binding.Spec.Failover.Application == nil {
		// Application failover turned off: a hold it set says nothing now.
		c.waiting.Delete(key)
		_, err := c.setHeld(ctx, binding, false)
		return err
	}
	behavior := binding.Spec.Failover.Application
	toleration := int32(DefaultTolerationSeconds)
	if behavior.DecisionConditions.TolerationSeconds != nil {
		toleration = *behavior.DecisionConditions.TolerationSeconds
	}
	// The application, not the clusters: hold everything and say why.
	everywhere := UnhealthyEverywhere(&binding.Spec, binding.Status.AggregatedStatus, binding.Generation, c.opts.Clock.Now(), c.opts.EvictionHistoryTTL)
	if changed, err := c.setHeld(ctx, binding, everywhere); err != nil || changed || everywhere {
		// A status write re-enqueues the binding through the informer.
		return err
	}
	now := c.opts.Clock.Now()
	var evict []string
	var recheck time.Duration
	requeue := func(d time.Duration) {
		if d > 0 && (recheck == 0 || d < recheck) {
			recheck = d
		}
	}
	var waits []string
	for _, target := range binding.Spec.Clusters {
		v := Decide(statusOf(binding.Status.AggregatedStatus, target.Name), binding.Generation, toleration, behavior.PreConditions, now)
		if v.Due && rollout.OwnsCopy(binding.Status.Rollout, target.Name) {
			// A copy of a revision still in its gates: its failure halts
			// the rollout (and rolls it back) rather than carrying the new
			// revision's trouble to another cluster.
			c.count("rollout")
			continue
		}
		if v.Due {
			evict = append(evict, target.Name)
		}
		if v.Waiting != "" {
			waits = append(waits, v.Waiting)
		}
		requeue(v.After)
	}
	c.noteWaiting(binding, key, waitingSummary(waits))
	evict = KeepOne(evict, binding.Spec.Clusters, binding.Status.AggregatedStatus)
	// The same per-cluster admission as cluster failover: the fleet guard
	// holds evictions in a fleet-wide outage and before its first
	// evaluation, and rate-limits clusters per region.
	admitted := evict[:0:0]
	for _, cluster := range evict {
		region := ""
		if cl, err := c.clusters.Get(cluster); err == nil {
			region = cl.Spec.Region
		}
		if ok, retry := c.admit(cluster, region, now); !ok {
			if c.opts.Guard.RegionEvictionRate(region) == 0 {
				c.count("held")
			} else {
				c.count("rate_limited")
			}
			requeue(retry)
			continue
		}
		admitted = append(admitted, cluster)
	}
	evict = admitted
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	if len(evict) == 0 {
		return nil
	}
	updated := binding.DeepCopy()
	purgeMode, downgraded := taintmanager.SafePurgeMode(behavior.PurgeMode, binding.Spec.Clusters, binding.Status.AggregatedStatus,
		binding.Generation, func(name string) bool { return slices.Contains(evict, name) })
	note := ""
	if downgraded {
		note = "; purgeMode Directly applied as Gracefully: no other cluster runs a healthy copy"
	}
	stamp := metav1.NewTime(now)
	for _, cluster := range evict {
		state, stateNote := statepreservation.Carry(c.opts.Recorder, binding, behavior.StatePreservation, cluster)
		workobjects.EvictCluster(&updated.Spec, workv1alpha1.GracefulEvictionTask{
			FromCluster: cluster, PurgeMode: purgeMode, GracePeriodSeconds: behavior.GracePeriodSeconds, PreservedLabelState: state,
			Reason:   workv1alpha1.EvictionReasonApplicationFailure,
			Message:  fmt.Sprintf("the application has been unhealthy on cluster %s for more than %ds%s%s", cluster, toleration, note, stateNote),
			Producer: workv1alpha1.EvictionProducerApplicationFailover,
		}, stamp)
	}
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		c.count("error")
		return err
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
	for _, cluster := range evict {
		logger.Info("Evicted unhealthy application from cluster", "cluster", cluster, "purgeMode", purgeMode, "downgradedFromDirectly", downgraded)
		c.count("evicted")
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(binding, corev1.EventTypeWarning, EventEvictWorkload,
				"Evicted from cluster %s: unhealthy for more than %ds (purgeMode %s%s)", cluster, toleration, purgeMode, note)
		}
	}
	return nil
}

func (c *Controller) admit(cluster, region string, now time.Time) (bool, time.Duration) {
	if c.opts.Guard == nil {
		return true, 0
	}
	return c.opts.Guard.Admit(cluster, region, now)
}

// held reports whether a binding (of either kind) has
// ApplicationFailoverHeld=True.
func held(obj any) bool {
	var conds []metav1.Condition
	switch b := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		conds = b.Status.Conditions
	case *workv1alpha1.ClusterResourceBinding:
		conds = b.Status.Conditions
	}
	return meta.IsStatusConditionTrue(conds, workv1alpha1.BindingConditionApplicationFailoverHeld)
}

// setHeld puts the ApplicationFailoverHeld condition in line with held,
// writing the status (and recording an event) only when it changes.
func (c *Controller) setHeld(ctx context.Context, binding *workv1alpha1.ResourceBinding, held bool) (bool, error) {
	cur := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionApplicationFailoverHeld)
	isHeld := cur != nil && cur.Status == metav1.ConditionTrue
	if held == isHeld || !held && cur == nil {
		return false, nil
	}
	cond := metav1.Condition{Type: workv1alpha1.BindingConditionApplicationFailoverHeld, ObservedGeneration: binding.Generation}
	eventType, reason := corev1.EventTypeNormal, EventApplicationFailoverReleased
	if held {
		cond.Status, cond.Reason = metav1.ConditionTrue, workv1alpha1.BindingReasonUnhealthyEverywhere
		cond.Message = fmt.Sprintf("the workload is Unhealthy on all %d clusters it is placed on and has failed on at least two clusters: the application fails, not the clusters; application failover evicts nothing", len(binding.Spec.Clusters))
		eventType, reason = corev1.EventTypeWarning, EventApplicationFailoverHeld
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, workv1alpha1.BindingReasonApplicationFailoverReleased
		cond.Message = "the workload is no longer Unhealthy on every cluster it is placed on; application failover acts again"
	}
	updated := binding.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, cond)
	if _, err := c.bindings.PatchStatus(ctx, binding, updated); err != nil {
		return false, err
	}
	klog.FromContext(ctx).Info("Application failover "+map[bool]string{true: "held", false: "released"}[held], "binding", klog.KObj(binding), "reason", cond.Reason)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(binding, eventType, reason, cond.Message)
	}
	return true, nil
}

func (c *Controller) count(result string) {
	if m := c.opts.Metrics; m != nil {
		m.Evictions.WithLabelValues(workv1alpha1.EvictionReasonApplicationFailure, result).Inc()
	}
}

// noteWaiting records an event on the binding when what the preConditions
// hold back changes (not on every sync: a delay re-checks the binding
// until it ends, and status writes bring it back often).
func (c *Controller) noteWaiting(binding *workv1alpha1.ResourceBinding, key, summary string) {
	prev, _ := c.waiting.Load(key)
	if prev == nil {
		prev = ""
	}
	if prev.(string) == summary {
		return
	}
	if summary == "" {
		c.waiting.Delete(key)
		return
	}
	c.waiting.Store(key, summary)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(binding, corev1.EventTypeNormal, EventApplicationFailoverWaiting, "Application failover waits: "+summary)
	}
}
