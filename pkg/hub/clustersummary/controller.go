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

// Package clustersummary says on each Cluster whether the hub uses its
// resource summary: the ResourceSummaryInRange condition is False, with
// the value named, while quantities.CheckSummary refuses the summary —
// the same check by which the scheduler gives the cluster no room
// (core.SummaryVerdicts) — and True once it passes again.
//
// The agent writes the Cluster's status too, from its own copy, keeping
// the conditions it does not own (as it keeps the hub's Ready=Unknown), so
// the two writers do not undo each other; a write on a stale copy is a
// conflict, retried.
package clustersummary

import (
	"context"

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
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

// Condition is the ResourceSummaryInRange condition c should show, nil
// to leave it as it is (absent on a cluster whose summary was never out
// of range: no write for the healthy fleet).
func Condition(c *clusterv1alpha1.Cluster) *metav1.Condition {
	if err := quantities.CheckSummary(c.Status.ResourceSummary); err != nil {
		return &metav1.Condition{Type: clusterv1alpha1.ClusterConditionResourceSummaryInRange, Status: metav1.ConditionFalse,
			Reason: clusterv1alpha1.ClusterReasonInvalidQuantity,
			Message: err.Error() + "; the hub does not use this summary: the cluster gets no replicas divided by available " +
				"resources (dynamic weights, Aggregated) until its agent reports one in range"}
	}
	if meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionResourceSummaryInRange) == nil {
		return nil
	}
	return &metav1.Condition{Type: clusterv1alpha1.ClusterConditionResourceSummaryInRange, Status: metav1.ConditionTrue,
		Reason: clusterv1alpha1.ClusterReasonQuantitiesInRange, Message: "every value of status.resourceSummary is in range"}
}

// Controller writes the ResourceSummaryInRange condition.
type Controller struct {
	flotilla flotillaclient.Interface
	clusters clusterlisters.ClusterLister
	recorder record.EventRecorder
	clock    clock.Clock
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewController returns a Controller fed by the Cluster informer; recorder
// may be nil.
func NewController(flotilla flotillaclient.Interface, clusters cache.SharedIndexInformer, recorder record.EventRecorder) *Controller {
	c := &Controller{flotilla: flotilla, clusters: clusterlisters.NewClusterLister(clusters.GetIndexer()),
		recorder: recorder, clock: clock.RealClock{}, synced: clusters.HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cluster-summary"})}
	enqueue := func(obj any) {
		if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
			c.queue.Add(cl.Name)
		}
	}
	// Every update: the check costs well under a microsecond, and a
	// write is made only when the condition should change.
	_, _ = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
	})
	return c
}

func conditionEqual(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("cluster-summary", ctx.Done(), c.synced) {
		return
	}
	queueworker.Run(ctx, "cluster-summary", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cluster, err := c.clusters.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || cluster.DeletionTimestamp != nil {
		return err
	}
	want := Condition(cluster)
	if want == nil || conditionEqual(want, meta.FindStatusCondition(cluster.Status.Conditions, want.Type)) {
		return nil
	}
	updated := cluster.DeepCopy()
	want.LastTransitionTime = metav1.NewTime(c.clock.Now())
	meta.SetStatusCondition(&updated.Status.Conditions, *want)
	if _, err := c.flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err // a conflict: the informer brings the newer Cluster
	}
	klog.FromContext(ctx).Info("Cluster resource summary", "cluster", name, "inRange", want.Status, "message", want.Message)
	if c.recorder != nil {
		if want.Status == metav1.ConditionFalse {
			c.recorder.Event(cluster, "Warning", want.Reason, want.Message)
		} else {
			c.recorder.Event(cluster, "Normal", want.Reason, want.Message)
		}
	}
	return nil
}
