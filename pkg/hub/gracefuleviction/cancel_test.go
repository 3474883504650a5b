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

package gracefuleviction

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestCancellable(t *testing.T) {
	const gen = 4
	created := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	three := int32(3)
	task := func(mode policyv1alpha1.PurgeMode) *workv1alpha1.GracefulEvictionTask {
		return &workv1alpha1.GracefulEvictionTask{FromCluster: "member1", PurgeMode: mode, Replicas: &three, CreationTimestamp: &created}
	}
	ready := func(mut func(*clusterv1alpha1.Cluster)) *clusterv1alpha1.Cluster {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1", Labels: map[string]string{"env": "prod"}},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	// The seed: pinned to member1, evicted, the scheduler found nothing.
	binding := func(mut func(*workv1alpha1.ResourceBinding)) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: &policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}}},
			Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: gen,
				Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionFalse}}}}
		if mut != nil {
			mut(b)
		}
		return b
	}
	duplicated := func(b *workv1alpha1.ResourceBinding) {
		b.Spec.Placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
	}
	scheduledOn := func(targets ...workv1alpha1.TargetCluster) func(*workv1alpha1.ResourceBinding) {
		return func(b *workv1alpha1.ResourceBinding) {
			b.Spec.Clusters = targets
			b.Status.Conditions[0].Status = metav1.ConditionTrue
		}
	}
	for _, c := range []struct {
		name     string
		task     *workv1alpha1.GracefulEvictionTask
		binding  *workv1alpha1.ResourceBinding
		cluster  *clusterv1alpha1.Cluster
		live     bool
		cancel   bool
		replicas int32
	}{
		{name: "pinned, back Ready: cancelled with its replicas", task: task(""), binding: binding(nil), cluster: ready(nil), live: true, cancel: true, replicas: 3},
		{name: "Graciously is Gracefully", task: task(policyv1alpha1.PurgeModeGraciously), binding: binding(nil), cluster: ready(nil), live: true, cancel: true, replicas: 3},
		{name: "Never is a person's to remove", task: task(policyv1alpha1.PurgeModeNever), binding: binding(nil), cluster: ready(nil), live: true},
		{name: "Directly: the copy is going", task: task(policyv1alpha1.PurgeModeDirectly), binding: binding(nil), cluster: ready(nil), live: true},
		{name: "the scheduler's own removal", binding: binding(nil), cluster: ready(nil), live: true,
			task: func() *workv1alpha1.GracefulEvictionTask {
				t := task("")
				t.Producer, t.Reason = workv1alpha1.EvictionProducerScheduler, workv1alpha1.EvictionReasonRescheduled
				return t
			}()},
		{name: "old Work gone or deleting", task: task(""), binding: binding(nil), cluster: ready(nil)},
		{name: "cluster gone", task: task(""), binding: binding(nil), live: true},
		{name: "cluster deleting", task: task(""), binding: binding(nil), live: true,
			cluster: ready(func(c *clusterv1alpha1.Cluster) { c.DeletionTimestamp = &created })},
		{name: "cluster not Ready", task: task(""), binding: binding(nil), live: true,
			cluster: ready(func(c *clusterv1alpha1.Cluster) { c.Status.Conditions[0].Status = metav1.ConditionUnknown })},
		{name: "untolerated NoExecute taint", task: task(""), binding: binding(nil), live: true,
			cluster: ready(func(c *clusterv1alpha1.Cluster) {
				c.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
			})},
		{name: "untolerated NoSchedule taint", task: task(""), binding: binding(nil), live: true,
			cluster: ready(func(c *clusterv1alpha1.Cluster) {
				c.Spec.Taints = []corev1.Taint{{Key: "cluster.flotilla.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
			})},
		{name: "tolerated taint", task: task(""), live: true, cancel: true, replicas: 3,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				b.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
			}),
			cluster: ready(func(c *clusterv1alpha1.Cluster) {
				c.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
			})},
		{name: "PreferNoSchedule taint does not keep it out", task: task(""), binding: binding(nil), live: true, cancel: true, replicas: 3,
			cluster: ready(func(c *clusterv1alpha1.Cluster) {
				c.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			})},
		{name: "affinity no longer matches", task: task(""), cluster: ready(nil), live: true,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				b.Spec.Placement.ClusterAffinity.ClusterNames = []string{"member2"}
			})},
		{name: "some clusterAffinities term matches", task: task(""), cluster: ready(nil), live: true, cancel: true, replicas: 3,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				b.Spec.Placement.ClusterAffinity = nil
				b.Spec.Placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "a", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}},
					{AffinityName: "b", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}}
			})},
		{name: "no clusterAffinities term matches", task: task(""), cluster: ready(nil), live: true,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				b.Spec.Placement.ClusterAffinity = nil
				b.Spec.Placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "a", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}}
			})},
		{name: "the scheduler has not seen the eviction (application failover just evicted)", task: task(""), cluster: ready(nil), live: true,
			binding: binding(func(b *workv1alpha1.ResourceBinding) { b.Status.SchedulerObservedGeneration = gen - 1 })},
		{name: "Divided: replacement took all replicas", task: task(""), cluster: ready(nil), live: true,
			binding: binding(scheduledOn(workv1alpha1.TargetCluster{Name: "member2", Replicas: 3}))},
		{name: "Divided: replacement took some: the rest come back", task: task(""), cluster: ready(nil), live: true, cancel: true, replicas: 1,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				b.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 2}}
			})},
		{name: "Divided: scaled up since: the recorded share", task: task(""), cluster: ready(nil), live: true, cancel: true, replicas: 3,
			binding: binding(func(b *workv1alpha1.ResourceBinding) { b.Spec.Replicas = 5 })},
		{name: "Duplicated: placed on another cluster", task: task(""), cluster: ready(nil), live: true,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				duplicated(b)
				scheduledOn(workv1alpha1.TargetCluster{Name: "member2", Replicas: 3})(b)
			})},
		{name: "Duplicated: others kept but unschedulable", task: task(""), cluster: ready(nil), live: true, cancel: true, replicas: 3,
			binding: binding(func(b *workv1alpha1.ResourceBinding) {
				duplicated(b)
				b.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 3}}
			})},
		{name: "Duplicated, nothing else: spec.replicas", task: task(""), cluster: ready(nil), live: true, cancel: true, replicas: 3,
			binding: binding(duplicated)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Cancellable(c.task, c.binding, c.cluster, c.live)
			if got.Cancel != c.cancel || got.Replicas != c.replicas {
				t.Errorf("Cancellable = cancel %v replicas %d (%s), want cancel %v replicas %d", got.Cancel, got.Replicas, got.Why, c.cancel, c.replicas)
			}
		})
	}
}

func TestCancelTask(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 23, 12, min, 0, 0, time.UTC)) }
	created := at(10)
	two := int32(2)
	task := workv1alpha1.GracefulEvictionTask{FromCluster: "member1", Replicas: &two, CreationTimestamp: &created}
	spec := workv1alpha1.ResourceBindingSpec{
		Clusters:              []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 1}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{task, {FromCluster: "member3"}},
		EvictionHistory: []workv1alpha1.EvictionHistoryEntry{
			{ClusterName: "member1", EvictedAt: at(1)}, // an earlier eviction: kept
			{ClusterName: "member3", EvictedAt: at(10)},
			{ClusterName: "member1", EvictedAt: at(10)}, // this eviction's
		},
	}
	cancelTask(&spec, task, 2)
	want := workv1alpha1.ResourceBindingSpec{
		Clusters:              []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member3"}},
		EvictionHistory: []workv1alpha1.EvictionHistoryEntry{
			{ClusterName: "member1", EvictedAt: at(1)}, {ClusterName: "member3", EvictedAt: at(10)}},
	}
	if !apiequality.Semantic.DeepEqual(spec, want) {
		t.Errorf("cancelTask:\n got %+v\nwant %+v", spec, want)
	}
}

// Two tasks of a Divided binding cancelled in one pass: each is judged
// against the spec as the first cancel left it, so together they restore
// at most spec.replicas (the fault-schedule suite's seed 508576395961 had
// both restore all 4, running 8).
func TestCancelTwoTasksInOnePassRestoresAtMostTheReplicas(t *testing.T) {
	const gen = 2
	four := int32(4)
	created := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: 4, Placement: &policyv1alpha1.Placement{
			ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1", "m2"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}},
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{
				{FromCluster: "m1", Replicas: &four, CreationTimestamp: &created},
				{FromCluster: "m2", Replicas: &four, CreationTimestamp: &created}}},
		Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: gen,
			Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionFalse}}}}
	ready := func(name string) *clusterv1alpha1.Cluster {
		return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}}}
	}
	updated := b.DeepCopy()
	for i := range b.Spec.GracefulEvictionTasks {
		task := &b.Spec.GracefulEvictionTasks[i]
		if cn := Cancellable(task, updated, ready(task.FromCluster), true); cn.Cancel {
			cancelTask(&updated.Spec, *task, cn.Replicas)
		}
	}
	var sum int32
	for _, tc := range updated.Spec.Clusters {
		sum += tc.Replicas
	}
	if sum != 4 || len(updated.Spec.Clusters) != 1 || updated.Spec.Clusters[0].Name != "m1" {
		t.Fatalf("placement after both cancels %v, want m1(4) only", updated.Spec.Clusters)
	}
}
