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

// Package remedy turns admin-written Remedies into each Cluster's
// status.remedyActions: the sorted union of the actions of every Remedy that
// selects the cluster and whose decision matches hold. Other controllers act
// on the actions (the MultiClusterIngress controller takes a cluster with
// TrafficControl out of rotation); this one only records the decision, so
// it is cheap, idempotent and safe to run twice.
package remedy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	remedylisters "github.com/flotilla-io/flotilla/pkg/generated/listers/remedy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

// EventRemedyActionsChanged is recorded on a Cluster whose remedy actions
// changed.
const EventRemedyActionsChanged = "RemedyActionsChanged"

// Selects reports whether remedy watches cluster: a nil clusterAffinity
// selects every cluster, otherwise only the clusters it names (Karmada's
// rule, so an affinity with no names selects none).
func Selects(remedy *remedyv1alpha1.Remedy, cluster *clusterv1alpha1.Cluster) bool {
	if remedy.Spec.ClusterAffinity == nil {
		return true
	}
	return slices.Contains(remedy.Spec.ClusterAffinity.ClusterNames, cluster.Name)
}

// Matches reports whether remedy's decision matches hold on cluster: no
// matches means at once (a planned action), otherwise any one that holds.
// A condition the cluster does not report matches neither Equal nor
// NotEqual, as in Karmada: a cluster whose agent has not reported DNS yet
// is not taken out of traffic by "NotEqual True".
func Matches(remedy *remedyv1alpha1.Remedy, cluster *clusterv1alpha1.Cluster) bool {
	if len(remedy.Spec.DecisionMatches) == 0 {
		return true
	}
	for _, m := range remedy.Spec.DecisionMatches {
		req := m.ClusterConditionMatch
		if req == nil {
			continue
		}
		cond := meta.FindStatusCondition(cluster.Status.Conditions, string(req.ConditionType))
		if cond == nil {
			continue
		}
		switch req.Operator {
		case remedyv1alpha1.ClusterConditionEqual:
			if string(cond.Status) == req.ConditionStatus {
				return true
			}
		case remedyv1alpha1.ClusterConditionNotEqual:
			if string(cond.Status) != req.ConditionStatus {
				return true
			}
		}
	}
	return false
}

// Actions returns the sorted union of the actions the remedies ask for on
// cluster (nil if none) and the sorted names of the remedies that ask.
func Actions(cluster *clusterv1alpha1.Cluster, remedies []*remedyv1alpha1.Remedy) (actions, from []string) {
	for _, r := range remedies {
		if r.DeletionTimestamp != nil || !Selects(r, cluster) || !Matches(r, cluster) {
			continue
		}
		if len(r.Spec.Actions) > 0 {
			from = append(from, r.Name)
		}
		for _, a := range r.Spec.Actions {
			actions = append(actions, string(a))
		}
	}
	slices.Sort(actions)
	slices.Sort(from)
	return slices.Compact(actions), from
}

// Options tune the controller.
type Options struct {
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
}

// Controller keeps Cluster.status.remedyActions.
type Controller struct {
	opts     Options
	client   flotillaclient.Interface
	clusters clusterlisters.ClusterLister
	remedies remedylisters.RemedyLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's Cluster and Remedy informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	clusters := factory.Cluster().V1alpha1().Clusters()
	remedies := factory.Remedy().V1alpha1().Remedies()
	c := &Controller{opts: opts, client: client,
		clusters: clusters.Lister(), remedies: remedies.Lister(),
		synced: []cache.InformerSynced{clusters.Informer().HasSynced, remedies.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "remedy"}),
	}
	enqueue := func(obj any) {
		if name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(name) // a Cluster's key is its name
		}
	}
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*clusterv1alpha1.Cluster), cur.(*clusterv1alpha1.Cluster)
			// Only conditions and the actions themselves decide; the
			// agents' inventory updates do not.
			if !conditionStatusesEqual(o.Status.Conditions, n.Status.Conditions) || !slices.Equal(o.Status.RemedyActions, n.Status.RemedyActions) {
				enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cl, ok := obj.(*clusterv1alpha1.Cluster); ok && c.opts.Metrics != nil {
				c.opts.Metrics.RemedyActions.DeletePartialMatch(map[string]string{"cluster": cl.Name})
			}
		},
	})
	all := func(any) { c.enqueueAll() }
	_, _ = remedies.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, n any) { all(n) }, DeleteFunc: all})
	return c
}

func conditionStatusesEqual(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool { return x.Type == y.Type && x.Status == y.Status })
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
	if !cache.WaitForNamedCacheSync("remedy", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "remedy", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cluster, err := c.clusters.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	remedies, err := c.remedies.List(labels.Everything())
	if err != nil {
		return err
	}
	actions, from := Actions(cluster, remedies)
	c.observe(cluster.Name, actions)
	if slices.Equal(actions, cluster.Status.RemedyActions) {
		return nil
	}
	updated := cluster.DeepCopy()
	updated.Status.RemedyActions = actions
	if _, err := c.client.ClusterV1alpha1().Clusters().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing remedy actions of cluster %s: %w", name, err)
	}
	msg := fmt.Sprintf("remedy actions %s (was %s)", list(actions), list(cluster.Status.RemedyActions))
	if len(from) > 0 {
		msg += ", from Remedy " + strings.Join(from, ", ")
	}
	klog.FromContext(ctx).Info("Remedy actions changed", "cluster", name, "actions", actions, "before", cluster.Status.RemedyActions, "remedies", from)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(updated, corev1.EventTypeNormal, EventRemedyActionsChanged, msg)
	}
	return nil
}

// observe exports the cluster's current actions, one series per action.
func (c *Controller) observe(cluster string, actions []string) {
	if c.opts.Metrics == nil {
		return
	}
	c.opts.Metrics.RemedyActions.DeletePartialMatch(map[string]string{"cluster": cluster})
	for _, a := range actions {
		c.opts.Metrics.RemedyActions.WithLabelValues(cluster, a).Set(1)
	}
}

func list(actions []string) string {
	if len(actions) == 0 {
		return "none"
	}
	return "[" + strings.Join(actions, ", ") + "]"
}
