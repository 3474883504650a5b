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

// Package workloadrebalancer runs WorkloadRebalancers (apps.flotilla.io):
// each names workloads to schedule again from scratch, once. For every
// workload of its spec the controller finds the binding, asks it for a
// fresh schedule (rescheduleTriggeredAt, rescheduleReason Rebalance, its
// eviction history cleared) and records the result; the scheduler then
// divides the replicas as if the workload were new, and every copy that
// shrinks or leaves goes through a graceful task, so the workload keeps
// running while it moves. ttlSecondsAfterFinished deletes the object after
// every workload has a result. The decisions are the pure functions of
// decision.go.
package workloadrebalancer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	appslisters "github.com/flotilla-io/flotilla/pkg/generated/listers/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Event reasons, on the WorkloadRebalancer (and the binding it triggers).
const (
	EventRescheduleTriggered = "RescheduleTriggered"
	EventBindingNotFound     = string(appsv1alpha1.RebalanceObjectNotFound)
	EventFinished            = "RebalanceFinished"
	EventTriggerFailed       = "RescheduleTriggerFailed"
)

// Options tune the controller.
type Options struct {
	Clock    clock.Clock
	Recorder record.EventRecorder
}

// Controller runs WorkloadRebalancers.
type Controller struct {
	opts     Options
	client   flotillaclient.Interface
	bindings *workobjects.Bindings
	lister   appslisters.WorkloadRebalancerLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's WorkloadRebalancer
// informer. Bindings are read live, not cached: a rebalancer is rare, and
// a binding the detector made a moment ago must not be reported missing.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	inf := factory.Apps().V1alpha1().WorkloadRebalancers()
	c := &Controller{opts: opts, client: client,
		bindings: &workobjects.Bindings{Client: client},
		lister:   inf.Lister(),
		synced:   inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "workload-rebalancer"}),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// Add covers a hub restart: finished ones only get their TTL.
		AddFunc: enqueue,
		UpdateFunc: func(o, n any) {
			// Our own status writes change nothing to do; a spec change
			// (a workload added) or a new TTL does.
			if o.(*appsv1alpha1.WorkloadRebalancer).Generation != n.(*appsv1alpha1.WorkloadRebalancer).Generation {
				enqueue(n)
			}
		},
	})
	return c
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("workload-rebalancer", ctx.Done(), c.synced) {
		return
	}
	queueworker.Run(ctx, "workload-rebalancer", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	r, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || r.DeletionTimestamp != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("workloadRebalancer", name)
	now := c.opts.Clock.Now()
	observed := Observe(r)
	var failed []error
	for i := range observed {
		if observed[i].Result != "" {
			continue
		}
		w := observed[i].Workload
		outcome, binding, err := c.trigger(ctx, r, w)
		if !Record(&observed[i], outcome) {
			failed = append(failed, err)
			c.event(r, corev1.EventTypeWarning, EventTriggerFailed, fmt.Sprintf("%s: %v (retrying)", describe(w), err))
			continue
		}
		switch outcome {
		case OutcomeNotFound:
			logger.Info("Workload has no binding", "workload", describe(w))
			c.event(r, corev1.EventTypeWarning, EventBindingNotFound,
				fmt.Sprintf("%s: no binding %s found (no template holds it, or no policy propagates it)", describe(w), bindingKey(w)))
		case OutcomeTriggered:
			logger.Info("Workload rescheduled from scratch", "workload", describe(w), "binding", bindingKey(w))
			msg := fmt.Sprintf("%s: binding %s asked to schedule from scratch; copies that shrink or leave stay until the new placement is healthy",
				describe(w), bindingKey(w))
			c.event(r, corev1.EventTypeNormal, EventRescheduleTriggered, msg)
			if binding != nil && c.opts.Recorder != nil {
				c.opts.Recorder.Event(binding, corev1.EventTypeNormal, EventRescheduleTriggered, "WorkloadRebalancer "+r.Name+" asked for a schedule from scratch")
			}
		}
	}
	status := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: observed, ObservedGeneration: r.Generation,
		FinishTime: FinishTime(&r.Status, observed, now)}
	if !apiequality.Semantic.DeepEqual(status, r.Status) {
		finished := status.FinishTime != nil && !status.FinishTime.Equal(r.Status.FinishTime)
		updated := r.DeepCopy()
		updated.Status = status
		if r, err = c.client.AppsV1alpha1().WorkloadRebalancers().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if finished {
			c.event(r, corev1.EventTypeNormal, EventFinished, summary(observed))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d workload(s) could not be triggered: %v", len(failed), failed[0])
	}
	at, ok := DeleteAt(r)
	if !ok {
		return nil
	}
	if left := at.Sub(now); left > 0 {
		c.queue.AddAfter(name, left)
		return nil
	}
	// The precondition keeps a rebalancer re-created under the same name.
	err = c.client.AppsV1alpha1().WorkloadRebalancers().Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		logger.Info("Deleted finished WorkloadRebalancer", "ttlSecondsAfterFinished", *r.Spec.TTLSecondsAfterFinished)
	}
	return err
}

// trigger asks the workload's binding for a fresh schedule. It returns the
// outcome, the binding (for its event) and, for a retry, the error.
func (c *Controller) trigger(ctx context.Context, r *appsv1alpha1.WorkloadRebalancer, w appsv1alpha1.ObjectReference) (Outcome, *workv1alpha1.ResourceBinding, error) {
	name := workobjects.BindingName(w.Kind, w.Name)
	var binding *workv1alpha1.ResourceBinding
	var err error
	if w.Namespace != "" {
		binding, err = c.client.WorkV1alpha1().ResourceBindings(w.Namespace).Get(ctx, name, metav1.GetOptions{})
	} else {
		var crb *workv1alpha1.ClusterResourceBinding
		if crb, err = c.client.WorkV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{}); err == nil {
			binding = workobjects.FromClusterBinding(crb)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return OutcomeNotFound, nil, nil
	case err != nil:
		return OutcomeRetry, nil, err
	case binding.DeletionTimestamp != nil || !Matches(w, binding):
		return OutcomeNotFound, nil, nil
	}
	updated := binding.DeepCopy()
	if !Trigger(updated, r.UID, c.opts.Clock.Now()) {
		return OutcomeTriggered, nil, nil // this rebalancer did it before its status was written
	}
	stored, err := c.bindings.Update(ctx, updated)
	switch {
	case apierrors.IsNotFound(err):
		return OutcomeNotFound, nil, nil
	case err != nil:
		return OutcomeRetry, nil, err
	}
	return OutcomeTriggered, stored, nil
}

// bindingKey names the binding of a workload.
func bindingKey(w appsv1alpha1.ObjectReference) string {
	name := workobjects.BindingName(w.Kind, w.Name)
	if w.Namespace == "" {
		return "ClusterResourceBinding " + name
	}
	return "ResourceBinding " + w.Namespace + "/" + name
}

// summary counts the results, for the finished event.
func summary(observed []appsv1alpha1.ObservedWorkload) string {
	var ok, failed int
	for _, o := range observed {
		if o.Result == appsv1alpha1.RebalanceSuccessful {
			ok++
		} else {
			failed++
		}
	}
	return fmt.Sprintf("every workload has a result: %d rescheduled, %d failed", ok, failed)
}

func (c *Controller) event(r *appsv1alpha1.WorkloadRebalancer, eventType, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(r, eventType, reason, msg)
	}
}
