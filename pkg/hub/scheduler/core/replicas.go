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
	"hash/fnv"
	"math"
	"math/bits"
	"sort"

	corev1 "k8s.io/api/core/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// assignReplicas gives each selected cluster its replicas, or says why it
// cannot. Divided results leave out clusters that get none.
func assignReplicas(in Input, placement *policyv1alpha1.Placement, selected []candidate) ([]workv1alpha1.TargetCluster, string) {
	strategy := placement.ReplicaScheduling
	replicas := in.Spec.Replicas
	// Nil strategy, Duplicated, or an object without replicas: every
	// cluster gets the whole object.
	if strategy == nil || strategy.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated || replicas <= 0 {
		out := make([]workv1alpha1.TargetCluster, len(selected))
		for i, c := range selected {
			out[i] = workv1alpha1.TargetCluster{Name: c.cluster.Name, Replicas: max(replicas, 0)}
		}
		return out, ""
	}
	var keptSum int64
	for _, c := range selected {
		keptSum += int64(kept(c))
	}
	var seats []int32
	var msg string
	switch {
	case overflowing(selected):
		seats, msg = assignOverflow(in, strategy, selected, keptSum)
	case in.Fresh || in.Rebalance || keptSum == 0:
		seats, msg = divideFresh(in, strategy, selected, replicas)
	case keptSum <= int64(replicas):
		seats, msg = scaleUp(in, strategy, selected, int32(int64(replicas)-keptSum))
	default:
		seats = scaleDown(in, strategy, selected, replicas, keptSum-int64(replicas))
	}
	if msg != "" {
		return nil, msg
	}
	var out []workv1alpha1.TargetCluster
	for i, c := range selected {
		if seats[i] > 0 {
			out = append(out, workv1alpha1.TargetCluster{Name: c.cluster.Name, Replicas: seats[i]})
		}
	}
	return out, ""
}

// staticWeights is each cluster's weight: the largest of the entries that
// select it, 0 when none does. If no cluster gets a weight, all weigh the
// same (Karmada's rule), so a list naming only evicted clusters does not
// leave the workload nowhere.
func staticWeights(list []policyv1alpha1.StaticClusterWeight, selected []candidate) []int64 {
	weights := make([]int64, len(selected))
	var sum int64
	for i, c := range selected {
		for j := range list {
			if list[j].Weight > weights[i] && clusteraffinity.Matches(&list[j].TargetCluster, c.cluster) {
				weights[i] = list[j].Weight
			}
		}
		sum = satAdd(sum, weights[i])
	}
	if sum == 0 {
		for i := range weights {
			weights[i] = 1
		}
	}
	return weights
}

// divideFresh divides replicas (all of them, or an overflow group's
// share) as if nothing ran (first schedule, or a reschedule a person
// asked for).
func divideFresh(in Input, strategy *policyv1alpha1.ReplicaSchedulingStrategy, selected []candidate, replicas int32) ([]int32, string) {
	switch {
	case strategy.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return aggregated(in, selected, int64(replicas), true)
	case dynamicWeights(strategy):
		weights := make([]int64, len(selected))
		var sum int64
		for i, c := range selected {
			// Replicas it runs now already count as allocated there.
			weights[i] = satAdd(available(in, c), int64(c.current))
			sum = satAdd(sum, weights[i])
		}
		if sum < int64(replicas) {
			return nil, fmt.Sprintf("the selected clusters have room for %d of %d replicas", sum, replicas)
		}
		return Webster(replicas, weights, tieKeys(in.Key, selected)), ""
	default:
		return Webster(replicas, staticWeights(strategyWeights(strategy), selected), tieKeys(in.Key, selected)), ""
	}
}

// scaleUp keeps every selected cluster's current replicas and divides only
// the missing ones (Karmada's scale-up): a failover never shrinks or drops
// a survivor. Dynamic weights divide them by room, static weights toward
// the weighted ideal, Aggregated packs them onto the clusters running it.
func scaleUp(in Input, strategy *policyv1alpha1.ReplicaSchedulingStrategy, selected []candidate, missing int32) ([]int32, string) {
	var add []int32
	switch {
	case missing == 0:
		add = make([]int32, len(selected))
	case strategy.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		var msg string
		if add, msg = aggregated(in, selected, int64(missing), false); msg != "" {
			return nil, msg
		}
	case dynamicWeights(strategy):
		weights := make([]int64, len(selected))
		var sum int64
		for i, c := range selected {
			weights[i] = available(in, c)
			sum = satAdd(sum, weights[i])
		}
		if sum < int64(missing) {
			return nil, fmt.Sprintf("the selected clusters have room for %d of the %d missing replicas", sum, missing)
		}
		add = Webster(missing, weights, tieKeys(in.Key, selected))
	default:
		// Seats go where the result falls short of the weighted ideal, in
		// proportion to the shortfall: from an ideal state this is the
		// ideal again.
		weights := staticWeights(strategyWeights(strategy), selected)
		ideal := Webster(in.Spec.Replicas, weights, tieKeys(in.Key, selected))
		deficits := make([]int64, len(selected))
		var sum int64
		for i, c := range selected {
			deficits[i] = max(int64(ideal[i])-int64(kept(c)), 0)
			sum += deficits[i]
		}
		if sum == 0 {
			deficits = weights
		}
		add = Webster(missing, deficits, tieKeys(in.Key, selected))
	}
	seats := make([]int32, len(selected))
	for i, c := range selected {
		seats[i] = kept(c) + add[i]
	}
	return seats, ""
}

// scaleDown takes excess replicas away from the clusters running them,
// leaving replicas (all of them, or an overflow group's share), never
// adding to any (house monotone): static weights from where the result
// exceeds the weighted ideal, dynamic weights in proportion to what runs
// (Karmada's scale-down), Aggregated from the smallest.
func scaleDown(in Input, strategy *policyv1alpha1.ReplicaSchedulingStrategy, selected []candidate, replicas int32, excess int64) []int32 {
	current := make([]int64, len(selected))
	for i, c := range selected {
		current[i] = int64(kept(c))
	}
	switch {
	case strategy.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		order := make([]int, len(selected))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return current[order[a]] > current[order[b]] })
		seats := make([]int32, len(selected))
		remaining := int64(replicas)
		for _, i := range order {
			n := min(current[i], remaining)
			seats[i] = int32(n)
			remaining -= n
		}
		return seats
	case dynamicWeights(strategy):
		return Webster(replicas, current, tieKeys(in.Key, selected))
	default:
		weights := staticWeights(strategyWeights(strategy), selected)
		ideal := Webster(replicas, weights, tieKeys(in.Key, selected))
		surplus := make([]int64, len(selected))
		var sum int64
		for i := range selected {
			surplus[i] = max(current[i]-int64(ideal[i]), 0)
			sum += surplus[i]
		}
		if sum == 0 {
			surplus = current
		}
		remove := Webster(int32(excess), surplus, tieKeys(in.Key, selected))
		seats := make([]int32, len(selected))
		for i := range selected {
			seats[i] = int32(current[i]) - remove[i]
		}
		return seats
	}
}

// kept is what a cluster keeps in a scale-up: its current replicas if it
// is in the current result, or if the scheduler's own task for it is open
// (its copy still runs them).
func kept(c candidate) int32 {
	if c.existing || c.returning {
		return c.current
	}
	return 0
}

// roomNeed is what the spread's cluster selection must fit when the
// replicas are divided by room (dynamic weights, Aggregated); nil
// otherwise (Duplicated, static weights: room plays no part, as in
// Karmada's shouldIgnoreAvailableResource).
func roomNeed(in Input, placement *policyv1alpha1.Placement) *replicaNeed {
	strategy := placement.ReplicaScheduling
	if strategy == nil || strategy.ReplicaSchedulingType != policyv1alpha1.ReplicaSchedulingTypeDivided || in.Spec.Replicas <= 0 {
		return nil
	}
	if !dynamicWeights(strategy) && strategy.ReplicaDivisionPreference != policyv1alpha1.ReplicaDivisionPreferenceAggregated {
		return nil
	}
	return &replicaNeed{replicas: int64(in.Spec.Replicas), room: func(c candidate) int64 { return available(in, c) + int64(c.current) }}
}

func dynamicWeights(strategy *policyv1alpha1.ReplicaSchedulingStrategy) bool {
	return strategy.WeightPreference != nil && strategy.WeightPreference.DynamicWeight == policyv1alpha1.DynamicWeightByAvailableReplicas
}

func strategyWeights(strategy *policyv1alpha1.ReplicaSchedulingStrategy) []policyv1alpha1.StaticClusterWeight {
	if strategy.WeightPreference == nil {
		return nil
	}
	return strategy.WeightPreference.StaticWeightList
}

// available is the room a cluster reports for more replicas; a cluster
// without a resource summary has none as far as capacity-based division
// is concerned (unknown is not infinite).
// A cluster whose summary is out of range has none either.
// What the scheduler placed there since the cluster last reported is
// subtracted (Input.Assumed).
func available(in Input, c candidate) int64 {
	if summaryProblem(in, c.cluster) != nil {
		return 0
	}
	return summaryRoom(c.cluster, in.Spec.ReplicaRequirements, in.Assumed[c.cluster.Name])
}

// aggregated packs n replicas onto as few clusters as possible: the
// clusters running it now first (most replicas first), then the roomiest.
// withCurrent counts what a cluster runs now as room (a fresh division
// of all replicas); otherwise only the free room counts (adding the
// missing ones on top of what runs).
func aggregated(in Input, selected []candidate, n int64, withCurrent bool) ([]int32, string) {
	type slot struct {
		index    int
		capacity int64
	}
	slots := make([]slot, len(selected))
	for i, c := range selected {
		capacity := available(in, c)
		if withCurrent {
			capacity = satAdd(capacity, int64(c.current))
		}
		slots[i] = slot{index: i, capacity: capacity}
	}
	sort.SliceStable(slots, func(a, b int) bool {
		ca, cb := selected[slots[a].index], selected[slots[b].index]
		if ca.current != cb.current {
			return ca.current > cb.current
		}
		return slots[a].capacity > slots[b].capacity
	})
	seats := make([]int32, len(selected))
	remaining := n
	for _, s := range slots {
		if remaining == 0 {
			break
		}
		m := min(s.capacity, remaining)
		seats[s.index] = int32(m)
		remaining -= m
	}
	if remaining > 0 {
		what := fmt.Sprintf("%d replicas", n)
		if !withCurrent {
			what = fmt.Sprintf("the %d missing replicas", n)
		}
		return nil, fmt.Sprintf("the selected clusters have room for %d of %s", n-remaining, what)
	}
	return seats, ""
}

// availableReplicas estimates how many more replicas of the given size fit
// in c from its resourceSummary (allocatable − allocated − allocating),
// limited by pods. known is false when the cluster has not reported one.
// The member's agent writes the summary, so the hub trusts none of it: a
// summary quantities.CheckSummary refuses (a value out of range or
// negative) has room for none.
func availableReplicas(c *clusterv1alpha1.Cluster, req *workv1alpha1.ReplicaRequirements, assumed *AssumedUsage) (int64, bool) {
	s := c.Status.ResourceSummary
	if s == nil || len(s.Allocatable) == 0 {
		return 0, false
	}
	if quantities.CheckSummary(s) != nil {
		return 0, true
	}
	return summaryRoom(c, req, assumed), true
}

// summaryRoom is availableReplicas of a summary quantities.CheckSummary passed,
// 0 when there is none: computed in int64 milli-units (every value is
// within [0, quantities.MaxMilli], so nothing wraps). A requirement out
// of range or negative (a binding stored before its CRD bounded it) fits
// nowhere. assumed (nil: none) is taken from the free room first, each
// value within [0, quantities.MaxMilli], so nothing wraps or goes below 0.
func summaryRoom(c *clusterv1alpha1.Cluster, req *workv1alpha1.ReplicaRequirements, assumed *AssumedUsage) int64 {
	s := c.Status.ResourceSummary
	if s == nil || len(s.Allocatable) == 0 {
		return 0
	}
	free := func(name corev1.ResourceName) (int64, bool) {
		alloc, ok := s.Allocatable[name]
		if !ok {
			return 0, false
		}
		v := alloc.MilliValue()
		if q, ok := s.Allocated[name]; ok {
			v -= q.MilliValue()
		}
		if v <= 0 {
			return 0, true
		}
		if q, ok := s.Allocating[name]; ok {
			v -= q.MilliValue()
		}
		if assumed != nil && len(assumed.Milli) > 0 {
			v = lessAssumed(v, assumed.MilliOf(name))
		}
		return max(v, 0), true
	}
	result := int64(math.MaxInt64)
	if pods, ok := free(corev1.ResourcePods); ok {
		result = pods / 1000
		if assumed != nil {
			result = lessAssumed(result, assumed.Replicas)
		}
	}
	if req != nil {
		for name, q := range req.ResourceRequest {
			per, err := quantities.NonNegativeMilli(&q)
			if err != nil {
				return 0
			}
			if per <= 0 {
				continue
			}
			have, ok := free(name)
			if !ok {
				return 0 // the cluster has none of this resource
			}
			result = min(result, have/per)
		}
	}
	if result == math.MaxInt64 {
		return 0 // neither pods nor a requested resource reported
	}
	return result
}

// Webster divides total seats in proportion to weights by the Webster /
// Sainte-Laguë divisor method: start from the rounded quotas, then add (or
// take back) one seat at a time where the quotient w/(s+½) is highest (or
// lowest). Equal quotients go to the cluster whose tie key is smallest, so
// the result is stable for one workload and fair across many. Clusters of
// weight 0 get nothing; all weights 0 leaves every seat unassigned.
func Webster(total int32, weights []int64, tie []uint64) []int32 {
	seats := make([]int32, len(weights))
	var sum float64
	for _, w := range weights {
		sum += float64(max(w, 0))
	}
	if total <= 0 || sum == 0 {
		return seats
	}
	var assigned int64
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		s := math.Floor(float64(total)*float64(w)/sum + 0.5)
		seats[i] = int32(min(max(s, 0), float64(total)))
		assigned += int64(seats[i])
	}
	// quotientLess compares w/(2s+1), the quotient of a cluster's next seat
	// (delta 1), or w/(2s-1), that of its last seat (delta -1), exactly.
	quotientLess := func(i, j int, delta int64) bool {
		di := uint64(2*int64(seats[i]) + 1 + 2*min(delta, 0))
		dj := uint64(2*int64(seats[j]) + 1 + 2*min(delta, 0))
		hi1, lo1 := bits.Mul64(uint64(weights[i]), dj)
		hi2, lo2 := bits.Mul64(uint64(weights[j]), di)
		return hi1 < hi2 || hi1 == hi2 && lo1 < lo2
	}
	equal := func(i, j int, delta int64) bool { return !quotientLess(i, j, delta) && !quotientLess(j, i, delta) }
	for assigned < int64(total) {
		best := -1
		for i, w := range weights {
			if w <= 0 {
				continue
			}
			if best < 0 || quotientLess(best, i, 1) || equal(best, i, 1) && tie[i] < tie[best] {
				best = i
			}
		}
		seats[best]++
		assigned++
	}
	for assigned > int64(total) {
		worst := -1
		for i := range weights {
			if seats[i] == 0 {
				continue
			}
			if worst < 0 || quotientLess(i, worst, -1) || equal(i, worst, -1) && tie[i] > tie[worst] {
				worst = i
			}
		}
		seats[worst]--
		assigned--
	}
	return seats
}

// tieKeys hashes the workload key with each cluster name.
func tieKeys(key string, selected []candidate) []uint64 {
	out := make([]uint64, len(selected))
	for i, c := range selected {
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(c.cluster.Name))
		out[i] = h.Sum64()
	}
	return out
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
