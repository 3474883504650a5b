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

// Package core is the scheduler's decision as a pure function: given a
// binding's spec and the clusters, which clusters it runs on and how many
// replicas each gets. It follows Karmada's scheduler: filter, score
// (locality), select by spread constraints, then assign replicas.
package core

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Input is everything a scheduling decision depends on.
type Input struct {
	// Key identifies the binding; it breaks ties between clusters stably
	// per workload, so equal remainders do not always land on the same
	// cluster across workloads.
	Key string
	// Spec is the binding's spec; Spec.Clusters is the current result.
	Spec *workv1alpha1.ResourceBindingSpec
	// Clusters are all clusters of the fleet.
	Clusters []*clusterv1alpha1.Cluster
	// Now is the time eviction history is judged at.
	Now time.Time
	// EvictionHistoryTTL is how long a cluster stays avoided after the
	// binding was evicted from it.
	EvictionHistoryTTL time.Duration
	// ObservedAffinityName is the clusterAffinities term the current
	// result came from (status.schedulerObservedAffinityName): scheduling
	// resumes from it rather than from the first term.
	ObservedAffinityName string
	// Fresh asks for a schedule from scratch (a person set
	// spec.rescheduleTriggeredAt): terms from the first, and replicas
	// divided as if nothing ran. Otherwise what runs is kept: missing
	// replicas are added, surplus ones taken away, never both.
	Fresh bool
	// Rebalance divides the replicas from scratch (as Fresh does) but
	// keeps the term order: the placement's replica scheduling itself was
	// changed, so the new division is what a person asked for.
	Rebalance bool
	// RestoreRemoved counts the replicas of clusters the scheduler took
	// out, whose tasks are still open, as running there (their copies
	// do): set on a placement change, so one undone while the task lasts
	// restores the old result. Not on other triggers, where it would
	// move replicas back and forth without a cause.
	RestoreRemoved bool
	// RecordDecision asks for Result.Decision (FitError.Decision): each
	// cluster's filter and score result. It costs a few allocations per
	// listed cluster, so the controller asks only when it writes status.
	RecordDecision bool
	// SummaryProblem says why a cluster's resource summary is not used
	// (quantities.CheckSummary: a value out of range); such a cluster has
	// no room for replicas divided by room. The controller passes
	// (*SummaryVerdicts).Check, which remembers the verdict per Cluster
	// object; nil checks on every use.
	SummaryProblem func(*clusterv1alpha1.Cluster) error
	// Assumed is what the scheduler placed on each cluster since the
	// cluster last reported it (overcommit protection, assumed.go): it is
	// subtracted from the cluster's reported room. The controller passes
	// (*Assumptions).Snapshot(); nil subtracts nothing.
	Assumed Assumed
	// WorkloadAffinity is placement.workloadAffinity's verdict from the
	// binding's group peers (NewWorkloadAffinity); nil filters nothing.
	WorkloadAffinity *WorkloadAffinity
}

// Result is a scheduling decision.
type Result struct {
	// Clusters are the targets, sorted by name.
	Clusters []workv1alpha1.TargetCluster
	// AffinityName is the ClusterAffinities term used, if any.
	AffinityName string
	// Decision is each cluster's filter and score result; nil unless
	// Input.RecordDecision.
	Decision *workv1alpha1.SchedulingDecision
}

// FitError says why no cluster (or too few) fit.
type FitError struct {
	// NumAllClusters is the size of the fleet.
	NumAllClusters int
	// Reasons maps each filtered cluster to why it was filtered.
	Reasons map[string]string
	// Message is the whole explanation.
	Message string
	// Decision is each cluster's filter and score result for the term
	// whose failure Message reports; nil unless Input.RecordDecision.
	Decision *workv1alpha1.SchedulingDecision
}

func (e *FitError) Error() string { return e.Message }

// Filter reasons, in the words of Karmada's scheduler log (the condition
// message); the decision's codes are workv1alpha1.Decision*.
const (
	reasonDeleting      = "cluster(s) were being deleted"
	reasonAffinity      = "cluster(s) did not match the placement cluster affinity constraint"
	reasonEvicting      = "cluster(s) had a graceful eviction task for this workload"
	reasonEvictedRecent = "cluster(s) had evicted this workload recently"
	reasonAPIMissing    = "cluster(s) did not serve the workload's API"
)

// rejection is why a filter removed a cluster; the zero value means it
// passed. The words are made only when needed (sentence, message).
type rejection struct {
	code  string        // workv1alpha1.Decision*
	taint *corev1.Taint // the untolerated taint, for DecisionTaintUntolerated
}

// sentence is the rejection in the words of Karmada's scheduler log.
func (r rejection) sentence() string {
	switch r.code {
	case workv1alpha1.DecisionClusterDeleting:
		return reasonDeleting
	case workv1alpha1.DecisionClusterAffinityMismatch:
		return reasonAffinity
	case workv1alpha1.DecisionTaintUntolerated:
		return fmt.Sprintf("cluster(s) had untolerated taint {%s: %s}", r.taint.Key, r.taint.Value)
	case workv1alpha1.DecisionBlocked:
		return reasonBlocked
	case workv1alpha1.DecisionEvicting:
		return reasonEvicting
	case workv1alpha1.DecisionRecentlyEvicted:
		return reasonEvictedRecent
	case workv1alpha1.DecisionAPINotServed:
		return reasonAPIMissing
	case workv1alpha1.DecisionWorkloadAffinity:
		return reasonWorkloadAffinity
	case workv1alpha1.DecisionWorkloadAntiAffinity:
		return reasonWorkloadAntiAffinity
	}
	return r.code
}

// candidate is a cluster that passed the filters.
type candidate struct {
	cluster   *clusterv1alpha1.Cluster
	existing  bool  // in the current result: locality keeps it
	returning bool  // the scheduler's own eviction task is open: its copy still runs
	current   int32 // replicas it has now
	// group is the term's group that selects it: 0 the term's own
	// affinity, i > 0 its i-th overflow group.
	group int
}

// Schedule decides where the binding runs. It returns a *FitError when the
// placement cannot be satisfied; the caller keeps the current result then.
func Schedule(in Input) (Result, error) {
	if in.Spec == nil {
		return Result{}, fmt.Errorf("binding %s has no spec", in.Key)
	}
	placement := in.Spec.Placement
	if placement == nil {
		placement = &policyv1alpha1.Placement{}
	}
	// Ordered affinity groups: the first that yields a result wins.
	type term struct {
		name string
		// groups are the term's affinity, then its overflow groups (when
		// the binding may overflow): a cluster's group is the first that
		// selects it.
		groups []*policyv1alpha1.ClusterAffinity
	}
	terms := []term{{groups: []*policyv1alpha1.ClusterAffinity{placement.ClusterAffinity}}}
	if len(placement.ClusterAffinities) > 0 {
		terms = terms[:0]
		overflow := OverflowAllowed(in.Spec.Replicas, placement)
		for i := range placement.ClusterAffinities {
			t := &placement.ClusterAffinities[i]
			groups := []*policyv1alpha1.ClusterAffinity{&t.ClusterAffinity}
			if overflow {
				for j := range t.OverflowAffinities {
					groups = append(groups, &t.OverflowAffinities[j].ClusterAffinity)
				}
			}
			terms = append(terms, term{name: t.AffinityName, groups: groups})
		}
	}
	// Resume from the term in use, then later terms: a workload that
	// failed over to a backup term stays there (Karmada's observed
	// affinity name). Earlier terms come last, and only because otherwise
	// the workload would run nowhere; going back to them on purpose takes
	// a reschedule (Fresh), whose removals are graceful.
	if !in.Fresh && in.ObservedAffinityName != "" {
		if i := slices.IndexFunc(terms, func(t term) bool { return t.name == in.ObservedAffinityName }); i > 0 {
			terms = append(slices.Clone(terms[i:]), terms[:i]...)
		}
	}
	// Eviction history is a preference: first every term without the
	// recently evicted clusters, then, rather than run nowhere, with them
	// (they still pass the taint filters, so only healthy ones are taken).
	var firstErr error
	var firstOut termOutcome
	for _, allowEvicted := range []bool{false, true} {
		// The last pass's error says what really stands in the way.
		firstErr = nil
		var tried []termOutcome // terms that did not fit, when recording
		for _, t := range terms {
			out, err := scheduleTerm(in, placement, t.name, t.groups, allowEvicted)
			if err == nil {
				res := Result{Clusters: out.targets, AffinityName: t.name}
				if in.RecordDecision {
					res.Decision = decide(in, placement, &out, tried)
				}
				return res, nil
			}
			if firstErr == nil {
				firstErr, firstOut = err, out
			}
			if in.RecordDecision {
				tried = append(tried, out)
			}
		}
		if !hasRecentEviction(in) {
			break
		}
	}
	err := withWorkloadAffinity(in, withBlocks(in, firstErr))
	var fit *FitError
	if in.RecordDecision && errors.As(err, &fit) {
		// The reported term is the first tried: no earlier term to note.
		fit.Decision = decide(in, placement, &firstOut, nil)
	}
	return Result{}, err
}

// hasRecentEviction: some eviction history entry is still within the TTL.
func hasRecentEviction(in Input) bool {
	return slices.ContainsFunc(in.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
		return in.Now.Before(h.EvictedAt.Add(in.EvictionHistoryTTL))
	})
}

// termOutcome is what scheduling one affinity term found, for its
// decision; rejections, selected and droppedBy are kept only when
// recording one.
type termOutcome struct {
	name         string
	allowEvicted bool
	feasible     []candidate // passed the filters, best score first
	targets      []workv1alpha1.TargetCluster
	failure      string // why the feasible clusters were not enough
	spreadFail   bool   // failure is the spread's, not the replicas'

	rejections []rejection                                 // per in.Clusters index
	selected   []candidate                                 // picked by the spread constraints
	droppedBy  map[string]*policyv1alpha1.SpreadConstraint // the constraint that left a feasible cluster out
}

func scheduleTerm(in Input, placement *policyv1alpha1.Placement, name string, groups []*policyv1alpha1.ClusterAffinity, allowEvicted bool) (termOutcome, error) {
	out := termOutcome{name: name, allowEvicted: allowEvicted}
	current := map[string]int32{}
	for _, t := range in.Spec.Clusters {
		current[t.Name] = t.Replicas
	}
	var dropped func(candidate, *policyv1alpha1.SpreadConstraint)
	if in.RecordDecision {
		out.rejections = make([]rejection, len(in.Clusters))
		droppedBy := map[string]*policyv1alpha1.SpreadConstraint{}
		out.droppedBy = droppedBy
		dropped = func(c candidate, sc *policyv1alpha1.SpreadConstraint) { droppedBy[c.cluster.Name] = sc }
	}
	reasons := map[string]string{}
	var feasible []candidate
	for i, c := range in.Clusters {
		group := groupOf(groups, c)
		if r := filter(in, placement, group, c, current, allowEvicted); r.code != "" {
			reasons[c.Name] = r.sentence()
			if out.rejections != nil {
				out.rejections[i] = r
			}
			continue
		}
		n, existing := current[c.Name]
		// A cluster the scheduler itself took out still runs its copy
		// until the task ends: after the current clusters, locality
		// prefers it, and placing it again ends the task (the controller
		// drops it).
		// With RestoreRemoved its copy counts as running the task's
		// replicas: a placement change undone restores the old division.
		returning := false
		if !existing {
			if task := rescheduledFrom(in.Spec, c.Name); task != nil {
				returning = true
				if in.RestoreRemoved && task.Replicas != nil {
					n = *task.Replicas
				}
			}
		}
		feasible = append(feasible, candidate{cluster: c, existing: existing, current: n, returning: returning, group: group})
	}
	fitErr := func(extra string) *FitError {
		return &FitError{NumAllClusters: len(in.Clusters), Reasons: reasons,
			Message: fitMessage(len(feasible), len(in.Clusters), reasons, extra)}
	}
	if len(feasible) == 0 {
		return out, fitErr("")
	}
	// Score: the overflow group first (the preferred group before its
	// overflow groups, Karmada's overflow order), then locality (keep what
	// runs), then name for stability.
	sort.SliceStable(feasible, func(i, j int) bool {
		if feasible[i].group != feasible[j].group {
			return feasible[i].group < feasible[j].group
		}
		if feasible[i].existing != feasible[j].existing {
			return feasible[i].existing
		}
		if feasible[i].returning != feasible[j].returning {
			return feasible[i].returning
		}
		return feasible[i].cluster.Name < feasible[j].cluster.Name
	})
	out.feasible = feasible
	selected, msg := selectBySpread(feasible, placement.SpreadConstraints, roomNeed(in, placement), dropped)
	if msg != "" {
		out.failure, out.spreadFail = msg, true
		return out, fitErr(msg)
	}
	if in.RecordDecision {
		out.selected = selected
	}
	targets, msg := assignReplicas(in, placement, selected)
	if msg != "" {
		out.failure = msg
		return out, fitErr(msg)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Name < targets[j].Name })
	out.targets = targets
	return out, nil
}

// filter returns why cluster c cannot run the binding; the zero rejection
// when it can.
// group is the cluster's group in the term (groupOf).
func filter(in Input, placement *policyv1alpha1.Placement, group int, c *clusterv1alpha1.Cluster, current map[string]int32, allowEvicted bool) rejection {
	if c.DeletionTimestamp != nil {
		return rejection{code: workv1alpha1.DecisionClusterDeleting}
	}
	if group < 0 {
		return rejection{code: workv1alpha1.DecisionClusterAffinityMismatch}
	}
	// A cluster already in the result keeps it despite new taints: moving
	// workloads off NoExecute clusters is the taint manager's job, with
	// its tolerations and rate limits.
	if _, scheduled := current[c.Name]; !scheduled {
		if taint := Untolerated(placement.ClusterTolerations, EffectiveTaints(c)); taint != nil {
			return rejection{code: workv1alpha1.DecisionTaintUntolerated, taint: taint}
		}
	}
	if blockedFilter(in, c.Name, current) {
		return rejection{code: workv1alpha1.DecisionBlocked}
	}
	if code := workloadAffinityFilter(in, c.Name, current); code != "" {
		return rejection{code: code}
	}
	// A failure eviction (taint, application) keeps the cluster out while
	// its task lasts; a scheduler's own removal does not, or a placement
	// changed back while the task is open would leave the cluster out
	// for good.
	for _, task := range in.Spec.GracefulEvictionTasks {
		if task.FromCluster == c.Name && task.Producer != workv1alpha1.EvictionProducerScheduler {
			return rejection{code: workv1alpha1.DecisionEvicting}
		}
	}
	if !allowEvicted {
		_, placed := current[c.Name]
		for _, h := range in.Spec.EvictionHistory {
			// A rolled-back failback that grew a cluster the workload still
			// runs on did not evict it from there.
			if placed && h.Reason == workv1alpha1.EvictionReasonFailbackRolledBack {
				continue
			}
			if h.ClusterName == c.Name && in.Now.Before(h.EvictedAt.Add(in.EvictionHistoryTTL)) {
				return rejection{code: workv1alpha1.DecisionRecentlyEvicted}
			}
		}
	}
	if !servesAPI(c, in.Spec.Resource.APIVersion, in.Spec.Resource.Kind) {
		return rejection{code: workv1alpha1.DecisionAPINotServed}
	}
	return rejection{}
}

// rescheduledFrom returns the binding's scheduler's (not a failure's)
// graceful eviction task for cluster, or nil.
func rescheduledFrom(spec *workv1alpha1.ResourceBindingSpec, cluster string) *workv1alpha1.GracefulEvictionTask {
	for i := range spec.GracefulEvictionTasks {
		if t := &spec.GracefulEvictionTasks[i]; t.FromCluster == cluster && t.Producer == workv1alpha1.EvictionProducerScheduler {
			return t
		}
	}
	return nil
}

// EffectiveTaints are the cluster's taints plus the not-ready or
// unreachable NoSchedule taint its Ready condition implies, when the
// cluster-taint controller has not written it yet: a cluster registered a
// moment ago (no Ready condition) or one whose Ready just left True must not
// take new replicas in the milliseconds before its taint lands.
func EffectiveTaints(c *clusterv1alpha1.Cluster) []corev1.Taint {
	key := ""
	switch ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); {
	case ready == nil || ready.Status == metav1.ConditionFalse:
		key = clusterv1alpha1.TaintClusterNotReady
	case ready.Status == metav1.ConditionUnknown:
		key = clusterv1alpha1.TaintClusterUnreachable
	default:
		return c.Spec.Taints
	}
	if slices.ContainsFunc(c.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		return c.Spec.Taints
	}
	return append(slices.Clone(c.Spec.Taints), corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
}

// Untolerated returns the first NoSchedule or NoExecute taint no
// toleration tolerates.
func Untolerated(tolerations []corev1.Toleration, taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(klog.Background(), t, false)
		}) {
			return t
		}
	}
	return nil
}

// servesAPI: a cluster that reported its APIs must serve the workload's
// kind; one that has not reported yet is given the benefit of the doubt.
func servesAPI(c *clusterv1alpha1.Cluster, apiVersion, kind string) bool {
	if len(c.Status.APIEnablements) == 0 || apiVersion == "" {
		return true
	}
	for _, e := range c.Status.APIEnablements {
		if e.GroupVersion != apiVersion {
			continue
		}
		for _, r := range e.Resources {
			if r.Kind == kind {
				return true
			}
		}
	}
	return false
}

// fitMessage is Karmada's "0/3 clusters are available: ..." line, with
// why the feasible clusters were not enough when some were.
func fitMessage(feasible, all int, reasons map[string]string, extra string) string {
	counts := map[string]int{}
	for _, r := range reasons {
		counts[r]++
	}
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	// One part per distinct reason: bounded however many there are.
	joined := statuslimits.Join(parts, ", ", statuslimits.MaxSummary/2, "reasons")
	if feasible == 0 {
		msg := fmt.Sprintf("0/%d clusters are available", all)
		if len(parts) > 0 {
			msg += ": " + joined
		}
		return msg + "."
	}
	msg := fmt.Sprintf("%d/%d clusters are available", feasible, all)
	if len(parts) > 0 {
		msg += " (" + joined + ")"
	}
	return msg + ", but " + extra + "."
}
