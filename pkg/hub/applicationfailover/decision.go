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

package applicationfailover

import (
	"maps"
	"slices"
	"time"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func statusOf(status []workv1alpha1.AggregatedStatusItem, cluster string) *workv1alpha1.AggregatedStatusItem {
	for i := range status {
		if status[i].ClusterName == cluster {
			return &status[i]
		}
	}
	return nil
}

// UnhealthyEverywhere reports whether the application, not the clusters,
// is at fault: it is Unhealthy, for the binding's current generation, on
// every cluster it is placed on, and it has failed on at least two
// clusters. Moving it would only break it somewhere else (and, with
// purgeMode Directly, delete every copy), so application failover evicts
// nothing.
//
// "At least two" counts the placed clusters plus the clusters it was
// evicted from for ApplicationFailure that the scheduler still keeps it
// off (open ApplicationFailure tasks, eviction history entries younger
// than historyTTL (0 counts all), and clusters blockPredecessorSeconds
// blocks). A workload placed on one cluster is
// moved once (it may be that cluster), and held if it fails on the next
// one too, or again on the same one (it came back, nothing else could take
// it). A placed cluster that has not reported the current generation,
// or reports Healthy or Unknown, breaks the rule: the application may yet
// run somewhere.
func UnhealthyEverywhere(spec *workv1alpha1.ResourceBindingSpec, status []workv1alpha1.AggregatedStatusItem, generation int64,
	now time.Time, historyTTL time.Duration) bool {
	if len(spec.Clusters) == 0 {
		return false
	}
	placed := map[string]bool{}
	for _, t := range spec.Clusters {
		item := statusOf(status, t.Name)
		if item == nil || item.Health != workv1alpha1.ResourceUnhealthy || item.ObservedGeneration != generation {
			return false
		}
		placed[t.Name] = true
	}
	failed := maps.Clone(placed)
	again := false // failing again on a cluster it was moved off for failing
	note := func(cluster string) {
		failed[cluster] = true
		again = again || placed[cluster]
	}
	for _, task := range spec.GracefulEvictionTasks {
		if task.Reason == workv1alpha1.EvictionReasonApplicationFailure {
			note(task.FromCluster)
		}
	}
	// A cluster blockPredecessorSeconds still blocks is kept off however
	// old its entry is.
	blocked := map[string]bool{}
	for _, b := range workobjects.PredecessorBlocks(spec, now) {
		blocked[b.Cluster] = true
	}
	for _, h := range spec.EvictionHistory {
		if h.Reason == workv1alpha1.EvictionReasonApplicationFailure && (historyTTL <= 0 || now.Sub(h.EvictedAt.Time) < historyTTL || blocked[h.ClusterName]) {
			note(h.ClusterName)
		}
	}
	return len(failed) >= 2 || again
}

// KeepOne trims evict (clusters due for eviction) so that at least one of
// the placed clusters stays: one update never evicts every cluster of a
// binding placed on several. The one kept is the cluster that turned
// unhealthy last (it failed least long), ties by name. A binding placed on
// one cluster may leave it: that is the only way application failover can
// help it, and the eviction is graceful unless a healthy copy runs
// elsewhere (SafePurgeMode), so the copy stays until its replacement is
// healthy.
func KeepOne(evict []string, clusters []workv1alpha1.TargetCluster, status []workv1alpha1.AggregatedStatusItem) []string {
	if len(clusters) < 2 {
		return evict
	}
	for _, t := range clusters {
		if !slices.Contains(evict, t.Name) {
			return evict
		}
	}
	if len(evict) == 0 {
		return evict
	}
	since := func(name string) time.Time {
		if item := statusOf(status, name); item != nil && item.UnhealthySince != nil {
			return item.UnhealthySince.Time
		}
		return time.Time{}
	}
	keep := evict[0]
	for _, n := range evict[1:] {
		if sn, sk := since(n), since(keep); sn.After(sk) || sn.Equal(sk) && n < keep {
			keep = n
		}
	}
	return slices.DeleteFunc(slices.Clone(evict), func(n string) bool { return n == keep })
}
