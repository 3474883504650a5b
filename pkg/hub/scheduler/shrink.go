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

package scheduler

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// taskReason is the reason of the graceful tasks a schedule of
// scheduleType makes: whoever asked for a reschedule (a WorkloadRebalancer,
// a failback) names it in spec.rescheduleReason; anything else is the
// scheduler's own Rescheduled.
func taskReason(spec *workv1alpha1.ResourceBindingSpec, scheduleType string) string {
	if scheduleType == TypeRescheduleAsked && spec.RescheduleReason != "" {
		return spec.RescheduleReason
	}
	return workv1alpha1.EvictionReasonRescheduled
}

// shrinksGracefully: a schedule of this type that lowers a kept cluster's
// replicas keeps the old count there until the new placement is healthy.
// A reschedule someone asked for divides from scratch (Fresh) and may move
// replicas between healthy clusters: lowering one at once while the
// replicas it gives away are not yet up elsewhere dips the workload below
// what it wants. A plain scale-down (ReplicasChanged) stays immediate.
func shrinksGracefully(scheduleType string) bool {
	return scheduleType == TypeRescheduleAsked
}

// scaledDown: the clusters run more than spec.replicas asks for, i.e. the
// user scaled the workload down; a shrink then is what was asked for and
// nothing is kept for it.
func scaledDown(spec *workv1alpha1.ResourceBindingSpec) bool {
	var sum int32
	for _, t := range spec.Clusters {
		if t.Replicas > spec.Replicas && spec.Placement != nil && duplicated(spec) {
			return true
		}
		sum += t.Replicas
	}
	return spec.Placement != nil && !duplicated(spec) && sum > spec.Replicas
}

// placedTasks returns spec's graceful eviction tasks after the schedule
// that placed result, as far as the clusters of result are concerned:
//   - a cluster whose replicas a graceful schedule (shrinksGracefully)
//     lowers gets a scheduler task with the replicas its copy runs now
//     (the most of its old share and an open scheduler task's), so the
//     binding controller keeps rendering that many until the task ends;
//   - an open shrink task (of a cluster that stayed placed) stays while
//     the new share is still below what the copy runs (unless the user
//     scaled down); any other scheduler task of a placed cluster goes: a
//     cluster placed again keeps its copy;
//   - a failure's task (taint manager, application failover) is never
//     touched here.
//
// The tasks of clusters result does not place are returned unchanged.
func placedTasks(spec *workv1alpha1.ResourceBindingSpec, result []workv1alpha1.TargetCluster, now metav1.Time,
	scheduleType, reason string, before []string) []workv1alpha1.GracefulEvictionTask {
	out := slices.Clone(spec.GracefulEvictionTasks)
	graceful := shrinksGracefully(scheduleType)
	shrinkAllowed := spec.Replicas > 0 && !scaledDown(spec)
	for _, t := range result {
		i := slices.IndexFunc(out, func(task workv1alpha1.GracefulEvictionTask) bool { return task.FromCluster == t.Name })
		if i >= 0 && out[i].Producer != workv1alpha1.EvictionProducerScheduler {
			continue
		}
		running := int32(0)
		j := slices.IndexFunc(spec.Clusters, func(old workv1alpha1.TargetCluster) bool { return old.Name == t.Name })
		if j >= 0 {
			running = spec.Clusters[j].Replicas
		}
		if i >= 0 && out[i].Replicas != nil {
			running = max(running, *out[i].Replicas)
		}
		// Outside a graceful schedule only an open shrink (a cluster that
		// stayed placed) is kept; a removed cluster placed again keeps its
		// copy at the new share, as before.
		keep := shrinkAllowed && t.Replicas < running && (graceful || i >= 0 && j >= 0)
		switch {
		case !keep && i >= 0:
			out = slices.Delete(out, i, i+1)
		case keep && graceful:
			task := workv1alpha1.GracefulEvictionTask{
				FromCluster: t.Name,
				PurgeMode:   policyv1alpha1.PurgeModeGracefully,
				Replicas:    &running,
				Reason:      reason,
				Producer:    workv1alpha1.EvictionProducerScheduler,
				Message: fmt.Sprintf("the scheduler lowered the cluster's replicas from %d to %d (%s); its copy keeps %d until the new placement is healthy",
					running, t.Replicas, scheduleType, running),
				ClustersBeforeFailover: before,
				CreationTimestamp:      &now,
			}
			if i >= 0 {
				out[i] = task
			} else {
				out = append(out, task)
			}
		case keep:
			// An open shrink outlives a later, ungraceful schedule: the
			// copy still runs its old count until the placement is healthy.
			out[i].Replicas = &running
		}
	}
	return out
}

// splitPlaced splits clusters into those result does not place (removed)
// and those it does (shrunk), for the schedule's event.
func splitPlaced(clusters []string, result []workv1alpha1.TargetCluster) (removed, shrunk []string) {
	for _, c := range clusters {
		if slices.ContainsFunc(result, func(t workv1alpha1.TargetCluster) bool { return t.Name == c }) {
			shrunk = append(shrunk, c)
		} else {
			removed = append(removed, c)
		}
	}
	return removed, shrunk
}

// servedAt is the lastScheduledTime a schedule at now records. A served
// reschedule request records at least its rescheduleTriggeredAt: both are
// stored to the second, and a request stamped in the second after the last
// schedule (as the WorkloadRebalancer does, so that it is after it) would
// otherwise still look pending after it was served, and the next unrelated
// event would divide the workload from scratch again.
func servedAt(spec *workv1alpha1.ResourceBindingSpec, scheduleType string, now time.Time) *time.Time {
	if scheduleType == TypeRescheduleAsked && spec.RescheduleTriggeredAt != nil && spec.RescheduleTriggeredAt.After(now) {
		t := spec.RescheduleTriggeredAt.Time
		return &t
	}
	return &now
}
