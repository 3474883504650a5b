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
	"slices"
	"sort"
	"strings"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Locality scores, Karmada's ClusterLocality plugin: what runs stays.
const (
	scoreExisting  = 100 // in the current result
	scoreReturning = 50  // the scheduler is removing it, its copy still runs
)

// filterOrder is the order the filters run in, and that of FilteredCounts.
var filterOrder = []string{
	workv1alpha1.DecisionClusterDeleting,
	workv1alpha1.DecisionClusterAffinityMismatch,
	workv1alpha1.DecisionTaintUntolerated,
	workv1alpha1.DecisionBlocked,
	workv1alpha1.DecisionWorkloadAffinity,
	workv1alpha1.DecisionWorkloadAntiAffinity,
	workv1alpha1.DecisionEvicting,
	workv1alpha1.DecisionRecentlyEvicted,
	workv1alpha1.DecisionAPINotServed,
}

func score(c candidate) int32 {
	switch {
	case c.existing:
		return scoreExisting
	case c.returning:
		return scoreReturning
	}
	return 0
}

// decide is the SchedulingDecision of out, the term that decided (or whose
// failure is reported); tried are the terms tried before it, which did not
// fit. Selected clusters come first (by name), then those that passed the
// filters (best score first, then name), then the filtered ones (by name);
// the list is capped (MaxClusterDecisions, MaxUnselectedClusterDecisions)
// and only the listed clusters get words, so the cost does not grow with
// the fleet beyond one pass.
func decide(in Input, placement *policyv1alpha1.Placement, out *termOutcome, tried []termOutcome) *workv1alpha1.SchedulingDecision {
	d := &workv1alpha1.SchedulingDecision{DecidedTime: metav1.NewTime(in.Now), AffinityName: out.name}
	replicas := make(map[string]int32, len(out.targets))
	for _, t := range out.targets {
		replicas[t.Name] = t.Replicas
	}
	feasible := make(map[string]candidate, len(out.feasible))
	for _, c := range out.feasible {
		feasible[c.cluster.Name] = c
	}
	var selected, passed, filtered []int // indexes into in.Clusters
	counts := make([]int32, len(filterOrder))
	for i, c := range in.Clusters {
		if r := out.rejections[i]; r.code != "" {
			filtered = append(filtered, i)
			counts[slices.Index(filterOrder, r.code)]++
			continue
		}
		if _, ok := replicas[c.Name]; ok {
			selected = append(selected, i)
		} else {
			passed = append(passed, i)
		}
	}
	for i, code := range filterOrder {
		if counts[i] > 0 {
			d.FilteredCounts = append(d.FilteredCounts, workv1alpha1.FilterCount{Reason: code, Count: counts[i]})
		}
	}
	byName := func(idx []int) {
		sort.Slice(idx, func(a, b int) bool { return in.Clusters[idx[a]].Name < in.Clusters[idx[b]].Name })
	}
	byName(selected)
	byName(filtered)
	sort.Slice(passed, func(a, b int) bool {
		ca, cb := in.Clusters[passed[a]], in.Clusters[passed[b]]
		if sa, sb := score(feasible[ca.Name]), score(feasible[cb.Name]); sa != sb {
			return sa > sb
		}
		return ca.Name < cb.Name
	})
	selected = selected[:min(len(selected), workv1alpha1.MaxClusterDecisions)]
	others := append(passed, filtered...)
	others = others[:min(len(others), workv1alpha1.MaxUnselectedClusterDecisions, workv1alpha1.MaxClusterDecisions-len(selected))]
	d.OmittedClusters = int32(len(in.Clusters) - len(selected) - len(others))

	words := decisionWords{in: in, placement: placement, out: out}
	d.Clusters = make([]workv1alpha1.ClusterDecision, 0, len(selected)+len(others))
	for _, i := range selected {
		c := feasible[in.Clusters[i].Name]
		d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: c.cluster.Name, Selected: true,
			Replicas: replicas[c.cluster.Name], Score: scorePtr(c), Reason: workv1alpha1.DecisionSelected,
			Message: words.selected(c, replicas[c.cluster.Name])})
	}
	for _, i := range others {
		cl := in.Clusters[i]
		if r := out.rejections[i]; r.code != "" {
			msg := rejectionMessage(in, out.name, cl, r)
			if r.code == workv1alpha1.DecisionClusterAffinityMismatch {
				msg += earlierTerms(in, tried, i)
			}
			d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: cl.Name, Reason: r.code, Message: msg})
			continue
		}
		c := feasible[cl.Name]
		reason, msg := words.unselected(c)
		d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: cl.Name, Score: scorePtr(c), Reason: reason, Message: msg})
	}
	// The same sentences recur across a fleet's bindings (every cluster a
	// spread left out says the same), and the hub holds a decision until
	// the binding's status is written: one copy of each.
	for i := range d.Clusters {
		d.Clusters[i].Message = unique.Make(d.Clusters[i].Message).Value()
	}
	return d
}

func scorePtr(c candidate) *int32 {
	s := score(c)
	return &s
}

// decisionWords says why in words for the clusters that passed the filters.
type decisionWords struct {
	in        Input
	placement *policyv1alpha1.Placement
	out       *termOutcome
	weights   map[string]int64 // static weights of the spread's picks, made on first use
}

// selected is a selected cluster's message: locality, then how its
// replicas were divided, e.g. "kept: already ran 2 replicas; static weight 2".
func (w *decisionWords) selected(c candidate, replicas int32) string {
	var parts []string
	switch {
	case c.existing && w.in.Spec.Replicas > 0:
		parts = append(parts, fmt.Sprintf("kept: already ran %d replicas", c.current))
	case c.existing:
		parts = append(parts, "kept: already ran it")
	case c.returning:
		parts = append(parts, "returning: the copy the scheduler was removing still runs there")
	default:
		parts = append(parts, "new")
	}
	if division := w.division(c); division != "" && replicas > 0 {
		parts = append(parts, division)
	}
	if w.out.allowEvicted && evictedWithinTTL(w.in, c.cluster.Name) {
		parts = append(parts, "recently evicted, taken because no other cluster fit")
	}
	return strings.Join(parts, "; ")
}

// unselected is the reason and message of a cluster that passed the
// filters but was not selected.
func (w *decisionWords) unselected(c candidate) (string, string) {
	if w.out.spreadFail {
		return workv1alpha1.DecisionNotSelectedBySpread, w.out.failure
	}
	if sc := w.out.droppedBy[c.cluster.Name]; sc != nil {
		return workv1alpha1.DecisionNotSelectedBySpread, spreadMessage(sc, c.cluster)
	}
	if w.out.failure != "" {
		// The replicas did not fit on the spread's picks.
		return workv1alpha1.DecisionNoReplicasAssigned, w.out.failure
	}
	if s := w.placement.ReplicaScheduling; s != nil && s.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated {
		return workv1alpha1.DecisionNoReplicasAssigned, "Aggregated packed the replicas onto other clusters"
	}
	msg := "Divided gave it no replicas"
	if division := w.division(c); division != "" {
		msg += " (" + division + ")"
	}
	return workv1alpha1.DecisionNoReplicasAssigned, msg
}

// division says what divided the replicas for a Divided placement: the
// cluster's static weight, its room, or Aggregated; "" when Duplicated.
func (w *decisionWords) division(c candidate) string {
	strategy := w.placement.ReplicaScheduling
	if strategy == nil || strategy.ReplicaSchedulingType != policyv1alpha1.ReplicaSchedulingTypeDivided || w.in.Spec.Replicas <= 0 {
		return ""
	}
	switch {
	case strategy.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return "Aggregated onto as few clusters as fit"
	case dynamicWeights(strategy):
		if err := summaryProblem(w.in, c.cluster); err != nil {
			return "resource summary out of range, room counts as 0: " + err.Error()
		}
		assumed := w.in.Assumed[c.cluster.Name]
		if avail, known := availableReplicas(c.cluster, w.in.Spec.ReplicaRequirements, assumed); known {
			if assumed != nil && assumed.Replicas > 0 {
				return fmt.Sprintf("room for %d more replicas (less %d replicas placed since it last reported)", avail, assumed.Replicas)
			}
			return fmt.Sprintf("room for %d more replicas", avail)
		}
		return "no resource summary reported (room counts as 0)"
	}
	if w.weights == nil {
		ws := staticWeights(strategyWeights(strategy), w.out.selected)
		w.weights = make(map[string]int64, len(ws))
		for i, s := range w.out.selected {
			w.weights[s.cluster.Name] = ws[i]
		}
	}
	return fmt.Sprintf("static weight %d", w.weights[c.cluster.Name])
}

// spreadMessage says how constraint sc left cluster c out.
func spreadMessage(sc *policyv1alpha1.SpreadConstraint, c *clusterv1alpha1.Cluster) string {
	key := groupKey(sc)
	if key == nil {
		return fmt.Sprintf("the spread constraint by cluster takes at most %d clusters; higher-scored ones were picked", sc.MaxGroups)
	}
	what := describeConstraint(sc)
	if v := key(c); v != "" {
		return fmt.Sprintf("the spread constraint by %s (%s) picked other groups than %q", what, describeBounds(bounds{min: int(sc.MinGroups), max: int(sc.MaxGroups)}), v)
	}
	return fmt.Sprintf("the cluster has no %s, which the spread constraint groups by", what)
}

// rejectionMessage says why filter r removed cluster c, naming what did
// (the taint, the block's end, the eviction).
func rejectionMessage(in Input, term string, c *clusterv1alpha1.Cluster, r rejection) string {
	switch r.code {
	case workv1alpha1.DecisionClusterDeleting:
		return "the cluster is being deleted"
	case workv1alpha1.DecisionClusterAffinityMismatch:
		if term != "" {
			return fmt.Sprintf("not in clusterAffinities term %q", term)
		}
		return "does not match the placement's cluster affinity"
	case workv1alpha1.DecisionTaintUntolerated:
		msg := "untolerated taint " + r.taint.ToString()
		if !slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(r.taint) }) {
			msg += " (from its Ready condition; the taint itself has not landed yet)"
		}
		return msg
	case workv1alpha1.DecisionBlocked:
		for _, b := range workobjects.PredecessorBlocks(in.Spec, in.Now) {
			if b.Cluster != c.Name {
				continue
			}
			if b.Forever() {
				return "blocked after an application failover until its eviction history entry is removed (blockPredecessorSeconds 0)"
			}
			return "blocked after an application failover until " + b.Until.UTC().Format(time.RFC3339)
		}
		return "blocked after an application failover"
	case workv1alpha1.DecisionEvicting:
		for _, t := range in.Spec.GracefulEvictionTasks {
			if t.FromCluster == c.Name {
				return fmt.Sprintf("a graceful eviction task for this workload is open (reason %s, producer %s)", t.Reason, t.Producer)
			}
		}
	case workv1alpha1.DecisionRecentlyEvicted:
		var last time.Time
		for _, h := range in.Spec.EvictionHistory {
			if h.ClusterName == c.Name && h.EvictedAt.After(last) {
				last = h.EvictedAt.Time
			}
		}
		return fmt.Sprintf("this workload was evicted from it at %s; avoided until %s unless nothing else fits",
			last.UTC().Format(time.RFC3339), last.Add(in.EvictionHistoryTTL).UTC().Format(time.RFC3339))
	case workv1alpha1.DecisionAPINotServed:
		return fmt.Sprintf("the cluster does not serve %s %s", in.Spec.Resource.APIVersion, in.Spec.Resource.Kind)
	case workv1alpha1.DecisionWorkloadAffinity, workv1alpha1.DecisionWorkloadAntiAffinity:
		return in.WorkloadAffinity.message(r.code, c.Name)
	}
	return r.sentence()
}

// earlierTerms tells, for a cluster outside the decided term, why the
// terms tried before it did not take it: "; term "primary", tried before,
// did not fit: untolerated taint ...". "" when no earlier term had it.
func earlierTerms(in Input, tried []termOutcome, i int) string {
	var b strings.Builder
	for k := range tried {
		t := &tried[k]
		r := t.rejections[i]
		if r.code == workv1alpha1.DecisionClusterAffinityMismatch {
			continue
		}
		why := t.failure // it passed the filters; the term failed as a whole
		if r.code != "" {
			why = rejectionMessage(in, t.name, in.Clusters[i], r)
		}
		fmt.Fprintf(&b, "; clusterAffinities term %q, tried before, did not fit: %s", t.name, why)
	}
	return b.String()
}

func evictedWithinTTL(in Input, cluster string) bool {
	return slices.ContainsFunc(in.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return h.ClusterName == cluster && in.Now.Before(h.EvictedAt.Add(in.EvictionHistoryTTL))
	})
}
