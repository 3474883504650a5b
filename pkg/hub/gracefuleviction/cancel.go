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
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
)

// EventEvictionCancelled is recorded on the binding and its template when
// an eviction nothing replaced is undone because its cluster is fit again.
const EventEvictionCancelled = "EvictionCancelled"

// Cancellation says whether a graceful eviction task is undone.
type Cancellation struct {
	// Cancel: remove the task and its history, and put the cluster back
	// into the placement with Replicas.
	Cancel   bool
	Replicas int32
	// Why explains the decision, for events and logs.
	Why string
}

// Cancellable decides whether task is undone (Karmada #5782): the old copy
// still runs on task.FromCluster, nothing replaced it, and the cluster can
// run the workload again. Without this the task never ends (Assess waits
// for a new placement that cannot come), and the scheduler keeps the
// cluster out because of the task: the workload is frozen on a copy no
// template change reaches. cluster is nil when it no longer exists;
// oldWorkLive says the cluster's Work exists and is not being deleted.
//
// The rules:
//   - purgeMode Never is a person's to end, Directly's copy is going, and
//     the scheduler's own removals (Rescheduled) are its to undo: no.
//   - the cluster must exist, not be deleting, be Ready, have no
//     NoSchedule/NoExecute taint the placement does not tolerate, and be
//     matched by the placement's affinity (or one of its terms).
//   - the scheduler must have seen the binding since the eviction
//     (schedulerObservedGeneration is current): right after an eviction
//     nothing has been replaced yet, and undoing it then would undo every
//     application failover.
//   - nothing replaced it: no other cluster; or, Divided, the others'
//     replicas fall short of spec.replicas; or, otherwise, the binding is
//     not Scheduled.
func Cancellable(task *workv1alpha1.GracefulEvictionTask, binding *workv1alpha1.ResourceBinding,
	cluster *clusterv1alpha1.Cluster, oldWorkLive bool) Cancellation {
	if mode := policyv1alpha1.NormalizePurgeMode(task.PurgeMode); mode != policyv1alpha1.PurgeModeGracefully {
		return Cancellation{Why: fmt.Sprintf("purgeMode %s is never cancelled", mode)}
	}
	if task.Producer == workv1alpha1.EvictionProducerScheduler {
		// The scheduler's own move: it takes the cluster back itself.
		return Cancellation{Why: "the scheduler took the cluster out of the placement"}
	}
	if !oldWorkLive {
		return Cancellation{Why: "the old copy is gone or going"}
	}
	if why := unfit(binding.Spec.Placement, cluster); why != "" {
		return Cancellation{Why: why}
	}
	if binding.Status.SchedulerObservedGeneration != binding.Generation {
		return Cancellation{Why: "the scheduler has not seen the eviction yet"}
	}
	var others []workv1alpha1.TargetCluster
	for _, t := range binding.Spec.Clusters {
		if t.Name == task.FromCluster {
			return Cancellation{Why: "the cluster is scheduled again"}
		}
		others = append(others, t)
	}
	spec := &binding.Spec
	if !divided(spec) {
		scheduled := meta.IsStatusConditionTrue(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		if len(others) > 0 && scheduled {
			return Cancellation{Why: "the workload was placed on other clusters"}
		}
		return Cancellation{Cancel: true, Replicas: spec.Replicas, Why: whyNothing(task.FromCluster, others)}
	}
	var sum int32
	for _, t := range others {
		sum += t.Replicas
	}
	missing := spec.Replicas - sum
	if missing <= 0 {
		return Cancellation{Why: "the other clusters run all replicas"}
	}
	replicas := missing
	// The recorded share, unless the template was scaled since: the
	// placement must not run more than spec.replicas.
	if task.Replicas != nil && *task.Replicas < missing {
		replicas = *task.Replicas
	}
	return Cancellation{Cancel: true, Replicas: replicas, Why: whyNothing(task.FromCluster, others)}
}

func whyNothing(cluster string, others []workv1alpha1.TargetCluster) string {
	if len(others) == 0 {
		return fmt.Sprintf("cluster %s is fit again and nothing replaced its copy (no other cluster runs the workload)", cluster)
	}
	return fmt.Sprintf("cluster %s is fit again and the other clusters did not take over its copy", cluster)
}

// divided mirrors the scheduler: replicas are split only for a Divided
// placement of an object with replicas.
func divided(spec *workv1alpha1.ResourceBindingSpec) bool {
	if spec.Replicas == 0 || spec.Placement == nil {
		return false
	}
	rs := spec.Placement.ReplicaScheduling
	return rs != nil && rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided
}

// unfit says why cluster cannot take the workload back, or "".
func unfit(placement *policyv1alpha1.Placement, cluster *clusterv1alpha1.Cluster) string {
	switch {
	case cluster == nil:
		return "the cluster no longer exists"
	case cluster.DeletionTimestamp != nil:
		return "the cluster is being deleted"
	case !meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady):
		return "the cluster is not Ready"
	}
	if placement == nil {
		return ""
	}
	if t := core.Untolerated(placement.ClusterTolerations, cluster.Spec.Taints); t != nil {
		return fmt.Sprintf("the cluster has the untolerated taint {%s: %s}", t.Key, t.Effect)
	}
	if len(placement.ClusterAffinities) > 0 {
		if !slices.ContainsFunc(placement.ClusterAffinities, func(t policyv1alpha1.ClusterAffinityTerm) bool {
			return clusteraffinity.Matches(&t.ClusterAffinity, cluster)
		}) {
			return "no clusterAffinities term matches the cluster"
		}
	} else if !clusteraffinity.Matches(placement.ClusterAffinity, cluster) {
		return "the cluster affinity no longer matches the cluster"
	}
	return ""
}

// cancelTask undoes task in spec: the task goes, with the history entries
// this eviction made (at or after the task's creation), and the cluster is
// back in the placement with replicas.
func cancelTask(spec *workv1alpha1.ResourceBindingSpec, task workv1alpha1.GracefulEvictionTask, replicas int32) {
	spec.GracefulEvictionTasks = slices.DeleteFunc(spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool {
		return t.FromCluster == task.FromCluster
	})
	spec.EvictionHistory = slices.DeleteFunc(spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return h.ClusterName == task.FromCluster && (task.CreationTimestamp == nil || !h.EvictedAt.Before(task.CreationTimestamp))
	})
	if !slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == task.FromCluster }) {
		spec.Clusters = append(spec.Clusters, workv1alpha1.TargetCluster{Name: task.FromCluster, Replicas: replicas})
		slices.SortFunc(spec.Clusters, func(a, b workv1alpha1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	}
}
