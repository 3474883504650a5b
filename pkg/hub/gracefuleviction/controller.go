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

// Package gracefuleviction ends graceful eviction tasks when it is safe: the
// old copy of a workload on the cluster it was evicted from stays until the
// new placement is healthy (or its grace has passed, or, with purgeMode
// Directly, at once). Ending a task lets the binding controller delete the
// old Work. See Assess for the rules.
package gracefuleviction

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/priorityqueue"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// EventEvictSucceed is recorded on the binding and its template when a task
// ends and the old copy may go.
const EventEvictSucceed = "EvictWorkloadFromClusterSucceed"

// Options tune the controller.
type Options struct {
	// GracefulEvictionTimeout is the grace of tasks that set none.
	GracefulEvictionTimeout time.Duration
	Clock                   clock.Clock
	Metrics                 *hubmetrics.Metrics
	Recorder                record.EventRecorder
}

// Controller ends graceful eviction tasks.
type Controller struct {
	opts      Options
	bindings  *workobjects.Bindings
	templates *workobjects.Templates
	works     worklisters.WorkLister
	clusters  clusterlisters.ClusterLister
	synced    []cache.InformerSynced
	// bindingIndexers index both binding kinds by their tasks' clusters.
	bindingIndexers []cache.Indexer
	queue           workqueue.TypedRateLimitingInterface[string]
	// requiredBy index bindings by the bindings that require them
	// (dependencies.go).
	requiredBy []cache.Indexer
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
		// Higher schedulePriority first, ties in arrival order; retries
		// and delayed keys too, once they are due.
		queue: priorityqueue.NewRateLimitingQueue("graceful-eviction", bindings.Priority),
	}
	withTasks := func(obj any) {
		if spec := workobjects.SpecOf(obj); spec != nil && len(spec.GracefulEvictionTasks) > 0 {
			workobjects.EnqueueKey(c.queue.Add)(obj)
		}
	}
	for _, inf := range bindingInformers {
		// Status changes matter: they are how the new placement turns healthy.
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: withTasks, UpdateFunc: func(_, n any) { withTasks(n) }})
		utilruntime.Must(inf.AddIndexers(cache.Indexers{taskClusterIndex: taskClusters}))
		c.bindingIndexers = append(c.bindingIndexers, inf.GetIndexer())
	}
	c.watchDependencies(bindingInformers)
	// A cluster that turns fit again may cancel the evictions from it that
	// nothing replaced (Cancellable).
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueTasksOn(obj.(*clusterv1alpha1.Cluster).Name) },
		UpdateFunc: func(o, n any) {
			oc, nc := o.(*clusterv1alpha1.Cluster), n.(*clusterv1alpha1.Cluster)
			if fitnessChanged(oc, nc) {
				c.enqueueTasksOn(nc.Name)
			}
		},
	})
	_, _ = works.Informer().AddEventHandler(c.preservedStateHandler())
	// A deleted old Work ends a Directly task.
	_, _ = works.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if w, ok := obj.(*workv1alpha1.Work); ok {
			ns, name := w.Annotations[workobjects.AnnotationBindingNamespace], w.Annotations[workobjects.AnnotationBindingName]
			if name != "" {
				c.queue.Add(workobjects.Key(&metav1.ObjectMeta{Namespace: ns, Name: name}))
			}
		}
	}})
	return c
}

const taskClusterIndex = "gracefulEvictionTaskCluster"

// taskClusters indexes a binding by the clusters it has tasks for.
func taskClusters(obj any) ([]string, error) {
	spec := workobjects.SpecOf(obj)
	if spec == nil {
		return nil, nil
	}
	out := make([]string, 0, len(spec.GracefulEvictionTasks))
	for _, t := range spec.GracefulEvictionTasks {
		out = append(out, t.FromCluster)
	}
	return out, nil
}

func (c *Controller) enqueueTasksOn(cluster string) {
	for _, indexer := range c.bindingIndexers {
		objs, _ := indexer.ByIndex(taskClusterIndex, cluster)
		for _, o := range objs {
			workobjects.EnqueueKey(c.queue.Add)(o)
		}
	}
}

// fitnessChanged: what Cancellable reads of a cluster changed.
func fitnessChanged(o, n *clusterv1alpha1.Cluster) bool {
	return !apiequality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		!apiequality.Semantic.DeepEqual(o.Labels, n.Labels) || !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		meta.IsStatusConditionTrue(o.Status.Conditions, clusterv1alpha1.ClusterConditionReady) !=
			meta.IsStatusConditionTrue(n.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("graceful-eviction", ctx.Done(), c.synced...) {
		return
	}
	go wait.UntilWithContext(ctx, c.countOpen, 10*time.Second)
	queueworker.Run(ctx, "graceful-eviction", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || binding.DeletionTimestamp != nil || len(binding.Spec.GracefulEvictionTasks) == 0 {
		return err
	}
	now := c.opts.Clock.Now()
	var keep []workv1alpha1.GracefulEvictionTask
	type ended struct {
		task *workv1alpha1.GracefulEvictionTask
		a    Assessment
	}
	var done, cancelled []ended
	var recheck time.Duration
	updated := binding.DeepCopy()
	// Not healthy where the workload's dependencies are not applied yet.
	gated := c.gateOnDependencies(binding)
	for i := range binding.Spec.GracefulEvictionTasks {
		task := &binding.Spec.GracefulEvictionTasks[i]
		// Judged against the spec as already updated: two tasks cancelled
		// in one pass must not each restore the same missing replicas
		// (the fault-schedule suite's seed 508576395961 ran 8 of 4).
		if cn := CancellableAt(task, updated, c.cluster(task.FromCluster), c.oldWorkLive(binding, task.FromCluster), now); cn.Cancel {
			cancelTask(&updated.Spec, *task, cn.Replicas)
			cancelled = append(cancelled, ended{task, Assessment{Done: true, Why: cn.Why, Outcome: "cancelled"}})
			continue
		}
		a := Assess(task, gated, c.oldWorkGone(binding, task.FromCluster), c.opts.GracefulEvictionTimeout, now)
		a = HoldForPreservedState(a, task, binding, c.carriesPreservedState(binding, task.PreservedLabelState), c.opts.GracefulEvictionTimeout, now)
		if a.Done {
			done = append(done, ended{task, a})
			continue
		}
		keep = append(keep, *task)
		if a.Recheck > 0 && (recheck == 0 || a.Recheck < recheck) {
			recheck = a.Recheck
		}
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	if len(done) == 0 && len(cancelled) == 0 {
		return nil
	}
	// One update: the tasks that ended or were cancelled go, and a
	// cancelled task's cluster is back in the placement (cancelTask).
	updated.Spec.GracefulEvictionTasks = keep
	if _, err := c.bindings.Update(ctx, updated); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("binding", key)
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
	for _, d := range cancelled {
		logger.Info("Graceful eviction cancelled", "cluster", d.task.FromCluster, "why", d.a.Why)
		c.observeEnd(d.task, d.a, now)
		record(EventEvictionCancelled, "Eviction from cluster "+d.task.FromCluster+" cancelled: "+d.a.Why)
	}
	for _, d := range done {
		logger.Info("Graceful eviction ended", "cluster", d.task.FromCluster, "why", d.a.Why)
		c.observeEnd(d.task, d.a, now)
		record(EventEvictSucceed, endedMessage(d.task, binding)+": "+d.a.Why)
	}
	return nil
}

// observeEnd records an ended task: how long it was open and, for a
// cluster failover that ended healthy, the time from the cluster's
// NoExecute taint to the replacement being Healthy.
func (c *Controller) observeEnd(task *workv1alpha1.GracefulEvictionTask, a Assessment, now time.Time) {
	m := c.opts.Metrics
	if m == nil || task.CreationTimestamp == nil {
		return
	}
	mode := string(policyv1alpha1.NormalizePurgeMode(task.PurgeMode))
	m.GracefulTaskDuration.WithLabelValues(mode, a.Outcome).Observe(now.Sub(task.CreationTimestamp.Time).Seconds())
	if a.Outcome != "healthy" || task.Reason != workv1alpha1.EvictionReasonTaintUntolerated {
		return
	}
	cl, err := c.clusters.Get(task.FromCluster)
	if err != nil {
		return
	}
	var first *time.Time
	for _, t := range cl.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded != nil && (first == nil || t.TimeAdded.Time.Before(*first)) {
			first = &t.TimeAdded.Time
		}
	}
	if first != nil {
		m.TaintToHealthy.Observe(now.Sub(*first).Seconds())
	}
}

// countOpen sets the open-tasks gauge from the informer caches.
func (c *Controller) countOpen(context.Context) {
	m := c.opts.Metrics
	if m == nil {
		return
	}
	counts := map[string]float64{}
	for _, mode := range []policyv1alpha1.PurgeMode{policyv1alpha1.PurgeModeGracefully, policyv1alpha1.PurgeModeDirectly, policyv1alpha1.PurgeModeNever} {
		counts[string(mode)] = 0
	}
	c.bindings.Each(func(_ string, spec *workv1alpha1.ResourceBindingSpec) {
		for _, t := range spec.GracefulEvictionTasks {
			counts[string(policyv1alpha1.NormalizePurgeMode(t.PurgeMode))]++
		}
	})
	for mode, n := range counts {
		m.GracefulTasks.WithLabelValues(mode).Set(n)
	}
}

// oldWorkGone: the evicted cluster's Work no longer exists, or is being
// deleted on a cluster that is not Ready (its agent cannot confirm; the
// binding controller does not wait for it either).
func (c *Controller) oldWorkGone(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	w, err := c.works.Works(clusterlifecycle.Namespace(cluster)).Get(workobjects.WorkName(binding.Namespace, binding.Name))
	if apierrors.IsNotFound(err) || err == nil && !workobjects.OwnsWork(binding, w) {
		return true // another binding's Work is not this binding's copy
	}
	if err != nil || w.DeletionTimestamp == nil {
		return false
	}
	cl, err := c.clusters.Get(cluster)
	return err != nil || !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
}

// oldWorkLive: the cluster's Work exists and is not being deleted.
func (c *Controller) oldWorkLive(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	w, err := c.works.Works(clusterlifecycle.Namespace(cluster)).Get(workobjects.WorkName(binding.Namespace, binding.Name))
	return err == nil && w.DeletionTimestamp == nil && workobjects.OwnsWork(binding, w)
}

// cluster is the named cluster, nil if it does not exist.
func (c *Controller) cluster(name string) *clusterv1alpha1.Cluster {
	cl, err := c.clusters.Get(name)
	if err != nil {
		return nil
	}
	return cl
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
