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

package workobjects

import (
	"slices"
	"sort"
	"time"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// PredecessorBlock is a cluster a binding must not be placed on again
// after an application failover (failover.application.blockPredecessorSeconds).
type PredecessorBlock struct {
	Cluster string
	// Until is when the block ends; zero means it does not end by itself
	// (blockPredecessorSeconds 0): only removing the eviction history
	// entry (a failback, a WorkloadRebalancer) lifts it.
	Until time.Time
}

// Forever reports whether the block lasts until its history entry goes.
func (b PredecessorBlock) Forever() bool { return b.Until.IsZero() }

// blockSeconds is the binding's blockPredecessorSeconds, if set.
func blockSeconds(spec *workv1alpha1.ResourceBindingSpec) (int32, bool) {
	if spec.Failover == nil || spec.Failover.Application == nil || spec.Failover.Application.BlockPredecessorSeconds == nil {
		return 0, false
	}
	return max(*spec.Failover.Application.BlockPredecessorSeconds, 0), true
}

// blockOf is how long history entry h blocks its cluster (ok false: not
// at all, at any time).
func blockOf(h workv1alpha1.EvictionHistoryEntry, seconds int32) (PredecessorBlock, bool) {
	if h.Reason != workv1alpha1.EvictionReasonApplicationFailure {
		return PredecessorBlock{}, false
	}
	b := PredecessorBlock{Cluster: h.ClusterName}
	if seconds > 0 {
		b.Until = h.EvictedAt.Add(time.Duration(seconds) * time.Second)
	}
	return b, true
}

// PredecessorBlocks are the clusters blocked at now, one per cluster
// (the longest block wins), sorted by name. Only application failures
// block, and only while the policy sets blockPredecessorSeconds.
func PredecessorBlocks(spec *workv1alpha1.ResourceBindingSpec, now time.Time) []PredecessorBlock {
	seconds, ok := blockSeconds(spec)
	if !ok {
		return nil
	}
	byCluster := map[string]PredecessorBlock{}
	for _, h := range spec.EvictionHistory {
		b, ok := blockOf(h, seconds)
		if !ok || !b.Forever() && !now.Before(b.Until) {
			continue
		}
		if cur, seen := byCluster[b.Cluster]; !seen || !cur.Forever() && (b.Forever() || b.Until.After(cur.Until)) {
			byCluster[b.Cluster] = b
		}
	}
	out := make([]PredecessorBlock, 0, len(byCluster))
	for _, b := range byCluster {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster < out[j].Cluster })
	return out
}

// NextUnblock is how long from now until the first block that ends by
// itself ends (ok false: none does), so the scheduler can look again then.
func NextUnblock(spec *workv1alpha1.ResourceBindingSpec, now time.Time) (time.Duration, bool) {
	var next time.Duration
	found := false
	for _, b := range PredecessorBlocks(spec, now) {
		if b.Forever() {
			continue
		}
		if d := b.Until.Sub(now); !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// trimEvictionHistory bounds spec's history to MaxEvictionHistory entries,
// dropping the oldest first, but never an entry that still blocks its
// cluster (blockPredecessorSeconds) unless a newer kept entry blocks the
// same cluster: a block must last as long as the policy says, however many
// evictions come after it.
func trimEvictionHistory(spec *workv1alpha1.ResourceBindingSpec, now time.Time) []workv1alpha1.EvictionHistoryEntry {
	n := len(spec.EvictionHistory)
	if n <= MaxEvictionHistory {
		return spec.EvictionHistory
	}
	seconds, blocking := blockSeconds(spec)
	keep := slices.Clone(spec.EvictionHistory[n-MaxEvictionHistory:])
	covered := map[string]bool{}
	for _, h := range keep {
		if h.Reason == workv1alpha1.EvictionReasonApplicationFailure {
			covered[h.ClusterName] = true
		}
	}
	var old []workv1alpha1.EvictionHistoryEntry
	for i := n - MaxEvictionHistory - 1; blocking && i >= 0; i-- {
		h := spec.EvictionHistory[i]
		b, ok := blockOf(h, seconds)
		if !ok || covered[h.ClusterName] || !b.Forever() && !now.Before(b.Until) {
			continue
		}
		covered[h.ClusterName] = true
		old = append(old, h)
	}
	slices.Reverse(old)
	return append(old, keep...)
}
