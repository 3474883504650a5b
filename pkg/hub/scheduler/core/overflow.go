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

package core

import (
	"fmt"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
)

// Overflow affinities (clusterAffinities[].overflowAffinities, Karmada
// v1.18): a term's own affinity is its preferred group (group 0), its
// overflow affinities groups 1, 2, ... A cluster belongs to the first
// group that selects it. Replicas fill group 0 up to its room, then group
// 1, and so on; a scale-down takes them from the last group first.

// OverflowAllowed reports whether a binding with this many replicas and
// placement may use its terms' overflow groups: only Divided replicas
// spread by room (Aggregated, or Weighted by dynamicWeight), Karmada's
// rule (IsOverflowSchedulingAllowed), which the CRD also enforces; and
// only a workload with replicas (Karmada: objects without replicas use the
// preferred group alone).
func OverflowAllowed(replicas int32, placement *policyv1alpha1.Placement) bool {
	rs := placement.ReplicaScheduling
	if replicas <= 0 || rs == nil || rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return false
	}
	switch rs.ReplicaDivisionPreference {
	case policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return true
	case policyv1alpha1.ReplicaDivisionPreferenceWeighted:
		return dynamicWeights(rs)
	}
	return false
}

// groupOf is the index of the first of groups that selects c, or -1.
func groupOf(groups []*policyv1alpha1.ClusterAffinity, c *clusterv1alpha1.Cluster) int {
	for i, g := range groups {
		if clusteraffinity.Matches(g, c) {
			return i
		}
	}
	return -1
}

// OverflowGroup is the group of the binding's term named affinityName
// that selects c: 0 its own affinity, i its i-th overflow group, -1
// none (or no such term). For the failback's come-back.
func OverflowGroup(placement *policyv1alpha1.Placement, affinityName string, c *clusterv1alpha1.Cluster) int {
	for i := range placement.ClusterAffinities {
		t := &placement.ClusterAffinities[i]
		if t.AffinityName != affinityName {
			continue
		}
		groups := []*policyv1alpha1.ClusterAffinity{&t.ClusterAffinity}
		for j := range t.OverflowAffinities {
			groups = append(groups, &t.OverflowAffinities[j].ClusterAffinity)
		}
		return groupOf(groups, c)
	}
	return -1
}

// overflowing: some selected cluster is in an overflow group, so the
// replicas are assigned group by group.
func overflowing(selected []candidate) bool {
	for _, c := range selected {
		if c.group > 0 {
			return true
		}
	}
	return false
}

// byGroup splits selected into its groups, in group order; each part
// holds indexes into selected.
func byGroup(selected []candidate) [][]int {
	var groups [][]int
	for i, c := range selected {
		for len(groups) <= c.group {
			groups = append(groups, nil)
		}
		groups[c.group] = append(groups[c.group], i)
	}
	return groups
}

func pick(selected []candidate, idx []int) []candidate {
	out := make([]candidate, len(idx))
	for i, j := range idx {
		out[i] = selected[j]
	}
	return out
}

// assignOverflow is assignReplicas for clusters of several groups: each
// group in order takes what it has room for of the replicas the groups
// before it left, divided within it as the strategy says (a fresh
// division counts what a cluster runs as room; a scale-up keeps what runs
// and adds the missing replicas group by group; a scale-down takes the
// surplus from the last group first).
func assignOverflow(in Input, strategy *policyv1alpha1.ReplicaSchedulingStrategy, selected []candidate, keptSum int64) ([]int32, string) {
	replicas := int64(in.Spec.Replicas)
	groups := byGroup(selected)
	seats := make([]int32, len(selected))
	put := func(idx []int, part []int32) {
		for i, j := range idx {
			seats[j] = part[i]
		}
	}
	room := func(idx []int, withCurrent bool) int64 {
		var sum int64
		for _, j := range idx {
			c := selected[j]
			sum = satAdd(sum, available(in, c))
			if withCurrent {
				sum = satAdd(sum, int64(c.current))
			}
		}
		return sum
	}
	switch {
	case in.Fresh || in.Rebalance || keptSum == 0:
		remaining := replicas
		for _, idx := range groups {
			n := min(remaining, room(idx, true))
			if n <= 0 {
				continue
			}
			part, msg := divideFresh(in, strategy, pick(selected, idx), int32(n))
			if msg != "" {
				return nil, msg
			}
			put(idx, part)
			remaining -= n
		}
		if remaining > 0 {
			return nil, fmt.Sprintf("the selected clusters of every overflow group have room for %d of %d replicas", replicas-remaining, replicas)
		}
	case keptSum <= replicas:
		missing := replicas - keptSum
		for _, idx := range groups {
			n := min(missing, room(idx, false))
			part, msg := scaleUp(in, strategy, pick(selected, idx), int32(n))
			if msg != "" {
				return nil, msg
			}
			put(idx, part)
			missing -= n
		}
		if missing > 0 {
			return nil, fmt.Sprintf("the selected clusters of every overflow group have room for %d of the %d missing replicas",
				replicas-keptSum-missing, replicas-keptSum)
		}
	default:
		excess := keptSum - replicas
		for g := len(groups) - 1; g >= 0; g-- {
			idx := groups[g]
			part := pick(selected, idx)
			var running int64
			for _, c := range part {
				running += int64(kept(c))
			}
			n := min(excess, running)
			put(idx, scaleDown(in, strategy, part, int32(running-n), n))
			excess -= n
		}
	}
	return seats, ""
}
