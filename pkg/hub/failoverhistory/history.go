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

package failoverhistory

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
)

// ReasonRescheduled is the reason of a task that names none: the scheduler
// moved the workload on its own (a placement change).
const ReasonRescheduled = "Rescheduled"

// Next is the binding's failover history after observing binding at now.
// oldCopies is the last status of the copies still running on clusters the
// workload is being evicted from (only clusters that are Ready: a dead
// cluster's last report says nothing about what serves now); they count
// as available while the replacement comes up. The rules:
//   - each graceful-eviction task (fromCluster + creationTimestamp) opens
//     one item, with the task's reason, message, purge mode, carried state
//     and the clusters before;
//   - clustersAfterFailover is filled once the scheduler has placed the
//     binding's current generation (which is later than the task: making
//     the task changed the spec), and follows the placement until the
//     item closes;
//   - degradedSince/degradedSeconds follow whether fewer replicas are
//     available than wanted (kinds without replicas: fewer Healthy copies
//     than target clusters);
//   - an item closes (endTime) when the current generation is placed and
//     every target cluster reports it Healthy with every wanted replica
//     available; a closed item never changes again;
//   - at most FailoverHistoryLimit items are kept, the oldest (by
//     startTime) dropped, so a task whose item was dropped is not opened
//     again and again.
//
// now is the hub's clock; times are kept to the second, as the API stores
// them, so that Next of its own stored output changes nothing.
//
// outages maps a cluster to when the hub saw it fail (its not-ready or
// unreachable taint's timeAdded): a copy on a failed cluster served nothing
// from then, so an item opened for that cluster starts with that time
// already degraded, before the eviction.
func Next(history []workv1alpha1.FailoverHistoryItem, binding *workv1alpha1.ResourceBinding,
	oldCopies []workv1alpha1.AggregatedStatusItem, outages map[string]time.Time, now time.Time) []workv1alpha1.FailoverHistoryItem {
	stamp := metav1.NewTime(now.Truncate(time.Second))
	out := make([]workv1alpha1.FailoverHistoryItem, 0, len(history)+len(binding.Spec.GracefulEvictionTasks))
	for i := range history {
		out = append(out, *history[i].DeepCopy())
	}
	// Items opened now: the workload has been leaving since the task was
	// made, so a degradation seen now started then.
	fresh := map[string]bool{}
	for i := range binding.Spec.GracefulEvictionTasks {
		task := &binding.Spec.GracefulEvictionTasks[i]
		if j := slices.IndexFunc(out, func(it workv1alpha1.FailoverHistoryItem) bool { return matches(&it, task) }); j >= 0 {
			// State preservation may fill the task after it was made.
			if it := &out[j]; it.EndTime == nil && len(task.PreservedLabelState) > 0 && len(it.PreservedLabelState) == 0 {
				it.PreservedLabelState = copyMap(task.PreservedLabelState)
			}
			continue
		}
		it := open(task, stamp)
		if failed, ok := outages[task.FromCluster]; ok && task.Replicas != nil && *task.Replicas > 0 {
			if d := it.StartTime.Sub(failed.Truncate(time.Second)); d > 0 {
				it.DegradedSeconds = int64(d / time.Second)
			}
		}
		out = append(out, it)
		fresh[itemKey(&out[len(out)-1])] = true
	}
	// A failure eviction whose task ended before this controller read the
	// binding (a survivor already Healthy ends a Duplicated task at once)
	// left only its eviction-history entry: it still gets its item.
	for _, e := range Unrecorded(binding.Spec.EvictionHistory, out) {
		it := workv1alpha1.FailoverHistoryItem{Reason: e.Reason, OriginCluster: e.ClusterName,
			Message:   "the eviction's graceful task ended before its item was recorded",
			StartTime: metav1.NewTime(e.EvictedAt.Truncate(time.Second))}
		out = append(out, it)
		fresh[itemKey(&out[len(out)-1])] = true
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartTime.Equal(&out[j].StartTime) {
			return out[i].StartTime.Before(&out[j].StartTime)
		}
		return out[i].OriginCluster < out[j].OriginCluster
	})
	if n := len(out); n > workv1alpha1.FailoverHistoryLimit {
		out = out[n-workv1alpha1.FailoverHistoryLimit:]
	}

	a := Measure(binding, oldCopies)
	placed := placedCurrent(binding)
	for i := range out {
		it := &out[i]
		if it.EndTime != nil {
			continue
		}
		// Where the scheduler has put it, for as long as the item is open:
		// the placement it ends on (a cancelled eviction puts the origin
		// back; a later schedule may add a cluster).
		if placed {
			if after := targetNames(binding); !slices.Equal(after, it.ClustersAfterFailover) {
				it.ClustersAfterFailover = after
			}
		}
		switch {
		case a.Restored:
			stopDegraded(it, stamp)
			end := stamp
			it.EndTime = &end
		case a.Degraded:
			if it.DegradedSince == nil {
				since := stamp
				if fresh[itemKey(it)] && it.StartTime.Before(&stamp) {
					since = it.StartTime
				}
				it.DegradedSince = &since
			}
		default:
			stopDegraded(it, stamp)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Unrecorded returns the eviction-history entries no item was opened for.
// When history is full, entries older than its oldest item are not
// returned: their items were dropped on purpose and must not come back.
func Unrecorded(evictions []workv1alpha1.EvictionHistoryEntry, history []workv1alpha1.FailoverHistoryItem) []workv1alpha1.EvictionHistoryEntry {
	var out []workv1alpha1.EvictionHistoryEntry
	for _, e := range evictions {
		start := metav1.NewTime(e.EvictedAt.Truncate(time.Second))
		if slices.ContainsFunc(history, func(it workv1alpha1.FailoverHistoryItem) bool {
			return it.OriginCluster == e.ClusterName && it.StartTime.Equal(&start)
		}) {
			continue
		}
		if len(history) >= workv1alpha1.FailoverHistoryLimit && slices.ContainsFunc(history, func(it workv1alpha1.FailoverHistoryItem) bool {
			return start.Before(&it.StartTime)
		}) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func itemKey(it *workv1alpha1.FailoverHistoryItem) string {
	return it.OriginCluster + "@" + it.StartTime.UTC().Format(time.RFC3339)
}

// matches: the item was opened for the task.
func matches(it *workv1alpha1.FailoverHistoryItem, task *workv1alpha1.GracefulEvictionTask) bool {
	if it.OriginCluster != task.FromCluster {
		return false
	}
	if task.CreationTimestamp == nil {
		// A task without a time (not made by Flotilla): the open item of
		// the same cluster and reason is its.
		return it.EndTime == nil && it.Reason == reasonOf(task)
	}
	return it.StartTime.Equal(task.CreationTimestamp)
}

func open(task *workv1alpha1.GracefulEvictionTask, now metav1.Time) workv1alpha1.FailoverHistoryItem {
	start := now
	if task.CreationTimestamp != nil {
		start = metav1.NewTime(task.CreationTimestamp.Truncate(time.Second))
	}
	return workv1alpha1.FailoverHistoryItem{
		Reason:                 reasonOf(task),
		Message:                task.Message,
		OriginCluster:          task.FromCluster,
		ClustersBeforeFailover: slices.Clone(task.ClustersBeforeFailover),
		PurgeMode:              policyv1alpha1.NormalizePurgeMode(task.PurgeMode),
		PreservedLabelState:    copyMap(task.PreservedLabelState),
		StartTime:              start,
	}
}

func reasonOf(task *workv1alpha1.GracefulEvictionTask) string {
	if task.Reason == "" {
		return ReasonRescheduled
	}
	return task.Reason
}

func stopDegraded(it *workv1alpha1.FailoverHistoryItem, now metav1.Time) {
	if it.DegradedSince == nil {
		return
	}
	if d := now.Sub(it.DegradedSince.Time); d > 0 {
		it.DegradedSeconds += int64(d.Round(time.Second) / time.Second)
	}
	it.DegradedSince = nil
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Availability is how much of a workload serves.
type Availability struct {
	// ReplicaKind: the kind has replicas and Available/Wanted count them;
	// otherwise they count Healthy copies and target clusters.
	ReplicaKind bool
	// Available counts the target clusters' copies and the old copies.
	Available int64
	// Wanted is what the placement asks for.
	Wanted int64
	// Degraded: fewer available than wanted.
	Degraded bool
	// Restored: the current generation is placed, every target reports it
	// Healthy, and (for replica kinds) the targets alone have every wanted
	// replica available.
	Restored bool
}

// replicaKinds are the kinds whose available replicas are counted (their
// aggregated status has availableReplicas). Other kinds, Jobs included (a
// finished Job has no available pods), are judged by health.
var replicaKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "ReplicaSet": true}

// Measure judges binding's availability from its aggregated status (target
// clusters only) and oldCopies.
func Measure(binding *workv1alpha1.ResourceBinding, oldCopies []workv1alpha1.AggregatedStatusItem) Availability {
	spec := &binding.Spec
	var targets []workv1alpha1.AggregatedStatusItem
	for _, it := range binding.Status.AggregatedStatus {
		if slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == it.ClusterName }) {
			targets = append(targets, it)
		}
	}
	current := len(spec.Clusters) > 0 && placedCurrent(binding)
	for _, t := range spec.Clusters {
		i := slices.IndexFunc(targets, func(it workv1alpha1.AggregatedStatusItem) bool { return it.ClusterName == t.Name })
		if i < 0 || !targets[i].Applied || targets[i].ObservedGeneration != binding.Generation || targets[i].Health != workv1alpha1.ResourceHealthy {
			current = false
		}
	}
	var a Availability
	if spec.Replicas > 0 && replicaKinds[spec.Resource.Kind] && strings.HasPrefix(spec.Resource.APIVersion, "apps/") {
		a.ReplicaKind = true
		for _, t := range spec.Clusters {
			a.Wanted += int64(t.Replicas)
		}
		a.Wanted = max(a.Wanted, int64(spec.Replicas))
		onTargets := available(spec.Resource.Kind, targets)
		a.Available = onTargets + available(spec.Resource.Kind, oldCopies)
		a.Restored = current && onTargets >= a.Wanted
	} else {
		a.Wanted = int64(len(spec.Clusters))
		for _, it := range slices.Concat(targets, oldCopies) {
			if it.Health == workv1alpha1.ResourceHealthy {
				a.Available++
			}
		}
		a.Restored = current
	}
	a.Degraded = !a.Restored && (a.Available < a.Wanted || a.Wanted == 0)
	return a
}

// available sums availableReplicas over items (resourceinterpreter's
// aggregation, as `kubectl get` would show it).
func available(kind string, items []workv1alpha1.AggregatedStatusItem) int64 {
	statuses := make([]*runtime.RawExtension, 0, len(items))
	for _, it := range items {
		statuses = append(statuses, it.Status)
	}
	agg, err := resourceinterpreter.AggregateStatus(kind, statuses)
	if err != nil || agg == nil {
		return 0
	}
	var s struct {
		AvailableReplicas int64 `json:"availableReplicas"`
	}
	if json.Unmarshal(agg.Raw, &s) != nil {
		return 0
	}
	return s.AvailableReplicas
}

// SchedulerBehind: the scheduler has not yet acted on the binding's
// current generation (an eviction it is to replace). The history waits:
// its items' times come from the binding (the eviction's evictedAt, the
// outage's taint), not from when they are written, so nothing is lost,
// and a status write in between would make the scheduler's write of the
// new placement conflict and go round again (measured: one conflict in
// most failovers of hack/bench/failover, each a write and a retry on the
// path to the new copy). A binding without a placement is never scheduled
// and never waits.
func SchedulerBehind(binding *workv1alpha1.ResourceBinding) bool {
	return binding.Spec.Placement != nil && binding.Status.SchedulerObservedGeneration != binding.Generation
}

// placedCurrent: the scheduler has placed the binding's current generation.
func placedCurrent(binding *workv1alpha1.ResourceBinding) bool {
	return binding.Status.SchedulerObservedGeneration == binding.Generation &&
		meta.IsStatusConditionTrue(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
}

func targetNames(binding *workv1alpha1.ResourceBinding) []string {
	out := make([]string, 0, len(binding.Spec.Clusters))
	for _, t := range binding.Spec.Clusters {
		out = append(out, t.Name)
	}
	return out
}
