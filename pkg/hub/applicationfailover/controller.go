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
package applicationfailover

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// EventEvictWorkload is recorded on the binding when an unhealthy
// application is evicted from a cluster.
const EventEvictWorkload = "EvictWorkloadFromCluster"

// DefaultTolerationSeconds is decisionConditions.tolerationSeconds when the
// policy leaves it unset (the API's default).
const DefaultTolerationSeconds = 300

// Due reports whether the application on the cluster of item must be
// evicted at now, and otherwise how long until it must (0: it is not
// unhealthy). Only health observed for the binding's current generation
// counts; the binding controller keeps UnhealthySince only while it does.
func Due(item *workv1alpha1.AggregatedStatusItem, generation int64, tolerationSeconds int32, now time.Time) (bool, time.Duration) {
	if item == nil || item.Health != workv1alpha1.ResourceUnhealthy || item.UnhealthySince == nil || item.ObservedGeneration != generation {
		return false, 0
	}
	left := item.UnhealthySince.Add(time.Duration(max(tolerationSeconds, 0)) * time.Second).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// Options tune the controller.
type Options struct {
	Clock    clock.Clock
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
}

// Controller is the application failover controller.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	c := &Controller{opts: opts,
		bindings: bindings,
		synced:   workobjects.Synced(bindingInformers...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "application-failover"}),
	}
	enabled := func(obj any) {
		if spec := workobjects.SpecOf(obj); spec != nil && spec.Failover != nil && spec.Failover.Application != nil {
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
		return nil
	}
	if err != nil || binding.DeletionTimestamp != nil || binding.Spec.Failover == nil || binding.Spec.Failover.Application == nil {
		return err
	}
	behavior := binding.Spec.Failover.Application
	toleration := int32(DefaultTolerationSeconds)
	if behavior.DecisionConditions.TolerationSeconds != nil {
		toleration = *behavior.DecisionConditions.TolerationSeconds
	}
	now := c.opts.Clock.Now()
	var evict []string
	var recheck time.Duration
	for _, target := range binding.Spec.Clusters {
		var item *workv1alpha1.AggregatedStatusItem
		for i := range binding.Status.AggregatedStatus {
			if binding.Status.AggregatedStatus[i].ClusterName == target.Name {
				item = &binding.Status.AggregatedStatus[i]
			}
		}
		due, after := Due(item, binding.Generation, toleration, now)
		switch {
		case due:
			evict = append(evict, target.Name)
		case after > 0 && (recheck == 0 || after < recheck):
			recheck = after
		}
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	if len(evict) == 0 {
		return nil
	}
	updated := binding.DeepCopy()
	purgeMode := policyv1alpha1.NormalizePurgeMode(behavior.PurgeMode)
	stamp := metav1.NewTime(now)
	for _, cluster := range evict {
		workobjects.EvictCluster(&updated.Spec, workv1alpha1.GracefulEvictionTask{
			FromCluster: cluster, PurgeMode: purgeMode, GracePeriodSeconds: behavior.GracePeriodSeconds,
			Reason:   workv1alpha1.EvictionReasonApplicationFailure,
			Message:  fmt.Sprintf("the application has been unhealthy on cluster %s for more than %ds", cluster, toleration),
			Producer: workv1alpha1.EvictionProducerApplicationFailover,
		}, stamp)
	}
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		c.count("error")
		return err
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
	for _, cluster := range evict {
		logger.Info("Evicted unhealthy application from cluster", "cluster", cluster, "purgeMode", purgeMode)
		c.count("evicted")
		if c.opts.Recorder != nil {
			c.opts.Recorder.Eventf(binding, corev1.EventTypeWarning, EventEvictWorkload,
				"Evicted from cluster %s: unhealthy for more than %ds (purgeMode %s)", cluster, toleration, purgeMode)
		}
	}
	return nil
}

func (c *Controller) count(result string) {
	if m := c.opts.Metrics; m != nil {
		m.Evictions.WithLabelValues(workv1alpha1.EvictionReasonApplicationFailure, result).Inc()
	}
}
