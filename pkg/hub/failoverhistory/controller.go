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

// Package failoverhistory keeps each binding's status.failoverHistory: one
// bounded item per failover, rebalance and failback (a graceful-eviction
// task), saying when, from where to where, why, how the old copy went,
// what state was carried, how long the workload was short of replicas and
// when it was whole again. It is the only writer of that field; everything
// it knows is in the binding's status, so a hub restart loses nothing. See
// Next for the rules.
package failoverhistory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Events recorded on the binding and its template.
const (
	// EventFailoverStarted: a history item opened.
	EventFailoverStarted = "FailoverStarted"
	// EventFailoverCompleted: a history item closed.
	EventFailoverCompleted = "FailoverCompleted"
)

// Options tune the controller.
type Options struct {
	Clock    clock.Clock
	Metrics  *Metrics
	Recorder record.EventRecorder
}

// Controller keeps bindings' failover history.
type Controller struct {
	opts      Options
	bindings  *workobjects.Bindings
	templates *workobjects.Templates
	works     worklisters.WorkLister
	clusters  clusterlisters.ClusterLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	work := factory.Work().V1alpha1()
	works, clusters := work.Works(), factory.Cluster().V1alpha1().Clusters()
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	c := &Controller{opts: opts,
		bindings:  bindings,
		templates: &workobjects.Templates{Client: client, Namespaced: work.ResourceTemplates().Lister(), ClusterScoped: work.ClusterResourceTemplates().Lister()},
		works:     works.Lister(),
		clusters:  clusters.Lister(),
		synced: workobjects.Synced(append(bindingInformers, clusters.Informer(), works.Informer(),
			work.ResourceTemplates().Informer(), work.ClusterResourceTemplates().Informer())...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "failover-history"}),
	}
	// Only bindings in a failover (a task, or an item still open) have
	// anything to record; the rest of the fleet costs a check per event.
	relevant := func(obj any) {
		if interesting(obj) {
			workobjects.EnqueueKey(c.queue.Add)(obj)
		}
	}
	for _, inf := range bindingInformers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: relevant, UpdateFunc: func(_, n any) { relevant(n) }})
	}
	// An old copy's status counts while the replacement comes up; it is in
	// its Work, not in the binding.
	_, _ = works.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		w, ok := n.(*workv1alpha1.Work)
		if !ok || w.Annotations[workobjects.AnnotationBindingName] == "" {
			return
		}
		key := workobjects.Key(&metav1.ObjectMeta{Namespace: w.Annotations[workobjects.AnnotationBindingNamespace], Name: w.Annotations[workobjects.AnnotationBindingName]})
		if b, err := c.bindings.Get(key); err == nil && hasOpen(b.Status.FailoverHistory) {
			c.queue.Add(key)
		}
	}})
	return c
}

func interesting(obj any) bool {
	switch b := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		return len(b.Spec.GracefulEvictionTasks) > 0 || hasOpen(b.Status.FailoverHistory) ||
			len(Unrecorded(b.Spec.EvictionHistory, b.Status.FailoverHistory)) > 0
	case *workv1alpha1.ClusterResourceBinding:
		return len(b.Spec.GracefulEvictionTasks) > 0 || hasOpen(b.Status.FailoverHistory) ||
			len(Unrecorded(b.Spec.EvictionHistory, b.Status.FailoverHistory)) > 0
	}
	return false
}

func hasOpen(history []workv1alpha1.FailoverHistoryItem) bool {
	for i := range history {
		if history[i].EndTime == nil {
			return true
		}
	}
	return false
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("failover-history", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "failover-history", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || binding.DeletionTimestamp != nil {
		return err
	}
	if SchedulerBehind(binding) {
		// The scheduler's write of this generation is on the failover's
		// path; a status write now would only make it conflict. Its status
		// write (schedulerObservedGeneration) brings the binding back.
		return nil
	}
	now := c.opts.Clock.Now()
	old := binding.Status.FailoverHistory
	oldCopies := c.oldCopies(binding)
	history := Next(old, binding, oldCopies, c.outages(binding), now)
	// No write unless the history changed: most events of a binding in a
	// failover (status reports, other controllers' writes) change nothing
	// here.
	if apiequality.Semantic.DeepEqual(history, old) {
		return nil
	}
	updated := binding.DeepCopy()
	updated.Status.FailoverHistory = history
	if _, err := c.bindings.PatchStatus(ctx, binding, updated); err != nil {
		return err
	}
	c.report(ctx, binding, old, history, Measure(binding, oldCopies), now)
	return nil
}

// report records events and metrics for items opened and closed by a
// write that succeeded (so each is reported once, also across restarts).
func (c *Controller) report(ctx context.Context, binding *workv1alpha1.ResourceBinding, old, history []workv1alpha1.FailoverHistoryItem,
	a Availability, now time.Time) {
	before := map[string]*workv1alpha1.FailoverHistoryItem{}
	for i := range old {
		before[itemKey(&old[i])] = &old[i]
	}
	logger := klog.FromContext(ctx).WithValues("binding", workobjects.Key(binding))
	tmpl := c.template(binding)
	record := func(reason, msg string) {
		if c.opts.Recorder == nil {
			return
		}
		c.opts.Recorder.Event(binding, corev1.EventTypeNormal, reason, msg)
		if tmpl != nil {
			c.opts.Recorder.Event(tmpl, corev1.EventTypeNormal, reason, msg)
		}
	}
	for i := range history {
		it := &history[i]
		prev, seen := before[itemKey(it)]
		if !seen {
			msg := StartedMessage(it)
			logger.Info("Failover started", "from", it.OriginCluster, "reason", it.Reason)
			record(EventFailoverStarted, msg)
		}
		if it.EndTime != nil && (!seen || prev.EndTime == nil) {
			msg := CompletedMessage(it, a)
			logger.Info("Failover completed", "from", it.OriginCluster, "to", it.ClustersAfterFailover, "reason", it.Reason,
				"seconds", it.EndTime.Sub(it.StartTime.Time).Seconds(), "degradedSeconds", it.DegradedSeconds)
			record(EventFailoverCompleted, msg)
			if m := c.opts.Metrics; m != nil {
				// The hub's clock to the second both ways (startTime is the
				// task's stored time).
				m.Duration.WithLabelValues(it.Reason).Observe(max(0, now.Sub(it.StartTime.Time).Seconds()))
				m.Degraded.WithLabelValues(it.Reason).Observe(float64(it.DegradedSeconds))
			}
		}
	}
}

// StartedMessage is the FailoverStarted event's message.
func StartedMessage(it *workv1alpha1.FailoverHistoryItem) string {
	msg := fmt.Sprintf("%s from %s (%s, purgeMode %s)", verb(it.Reason, false), it.OriginCluster, it.Reason, it.PurgeMode)
	if it.Message != "" {
		msg += ": " + it.Message
	}
	return msg
}

// CompletedMessage is the FailoverCompleted event's message, e.g. "Failed
// over from member1 to member2 (TaintUntolerated); 3/3 available after
// 12s, degraded 4s".
func CompletedMessage(it *workv1alpha1.FailoverHistoryItem, a Availability) string {
	to := strings.Join(it.ClustersAfterFailover, ",")
	if to == "" {
		to = "nowhere"
	}
	unit := "available"
	if !a.ReplicaKind {
		unit = "clusters healthy"
	}
	took := time.Duration(0)
	if it.EndTime != nil {
		took = it.EndTime.Sub(it.StartTime.Time)
	}
	where := "to " + to
	if back(it) {
		where = "back on " + to
	}
	return fmt.Sprintf("%s from %s %s (%s); %d/%d %s after %s, degraded %ds", verb(it.Reason, true), it.OriginCluster, where,
		it.Reason, a.Available, a.Wanted, unit, took.Round(time.Second), it.DegradedSeconds)
}

// back: a failure eviction ended with the workload on its origin again
// (the eviction was cancelled when the cluster recovered, nothing having
// replaced it). A scheduler's shrink keeps its origin by design.
func back(it *workv1alpha1.FailoverHistoryItem) bool {
	return (it.Reason == workv1alpha1.EvictionReasonTaintUntolerated || it.Reason == workv1alpha1.EvictionReasonApplicationFailure) &&
		slices.Contains(it.ClustersAfterFailover, it.OriginCluster)
}

func verb(reason string, done bool) string {
	switch reason {
	case workv1alpha1.EvictionReasonFailback:
		if done {
			return "Failed back"
		}
		return "Failing back"
	case workv1alpha1.EvictionReasonRebalance:
		if done {
			return "Rebalanced"
		}
		return "Rebalancing"
	case ReasonRescheduled:
		if done {
			return "Rescheduled"
		}
		return "Rescheduling"
	}
	if done {
		return "Failed over"
	}
	return "Failing over"
}

// outages: for each cluster the binding is being evicted from that is not
// Ready, when the hub tainted it not-ready or unreachable (the hub's clock).
func (c *Controller) outages(binding *workv1alpha1.ResourceBinding) map[string]time.Time {
	var out map[string]time.Time
	for _, task := range binding.Spec.GracefulEvictionTasks {
		cl, err := c.clusters.Get(task.FromCluster)
		if err != nil || meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			continue
		}
		for _, t := range cl.Spec.Taints {
			if (t.Key == clusterv1alpha1.TaintClusterNotReady || t.Key == clusterv1alpha1.TaintClusterUnreachable) &&
				t.Effect == corev1.TaintEffectNoSchedule && t.TimeAdded != nil {
				if out == nil {
					out = map[string]time.Time{}
				}
				out[task.FromCluster] = t.TimeAdded.Time
			}
		}
	}
	return out
}

// oldCopies is the last reported status of the copies on the clusters the
// binding is being evicted from, for Ready clusters whose Work is not being
// deleted: those still serve.
func (c *Controller) oldCopies(binding *workv1alpha1.ResourceBinding) []workv1alpha1.AggregatedStatusItem {
	var out []workv1alpha1.AggregatedStatusItem
	for _, task := range binding.Spec.GracefulEvictionTasks {
		placed := false
		for _, t := range binding.Spec.Clusters {
			placed = placed || t.Name == task.FromCluster
		}
		if placed {
			continue
		}
		cl, err := c.clusters.Get(task.FromCluster)
		if err != nil || !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			continue
		}
		w, err := c.works.Works(clusterlifecycle.Namespace(task.FromCluster)).Get(workobjects.WorkName(binding.Namespace, binding.Name))
		if err != nil || w.DeletionTimestamp != nil || !workobjects.OwnsWork(binding, w) || len(w.Status.ManifestStatuses) == 0 ||
			!meta.IsStatusConditionTrue(w.Status.Conditions, workv1alpha1.WorkConditionApplied) {
			continue
		}
		ms := w.Status.ManifestStatuses[0]
		out = append(out, workv1alpha1.AggregatedStatusItem{ClusterName: task.FromCluster, Status: ms.Status, Applied: true, Health: ms.Health})
	}
	return out
}

// template is the binding's owning template, for events; nil if unknown.
func (c *Controller) template(binding *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceTemplate {
	keys, _ := workobjects.OwnerTemplateKey(binding)
	if len(keys) == 0 {
		return nil
	}
	tmpl, err := c.templates.Get(keys[0])
	if err != nil {
		return nil
	}
	return tmpl
}
