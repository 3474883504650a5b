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
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Filter sentences of the workload affinity filters, after Karmada's
// WorkloadAffinity and WorkloadAntiAffinity plugins.
const (
	reasonWorkloadAffinity     = "cluster(s) did not run the workloads of the same affinity group"
	reasonWorkloadAntiAffinity = "cluster(s) already ran a workload of the same anti-affinity group"
)

// WorkloadPeer is another binding as the workload affinity filters see it:
// its namespace, name, groups and where its copies run.
type WorkloadPeer struct {
	Namespace, Name string
	Groups          *workv1alpha1.WorkloadAffinityGroups
	// Clusters are its spec.clusters.
	Clusters []string
	// Evicting are the clusters of its graceful eviction tasks: its copy
	// still runs there until the task ends.
	Evicting []string
}

// PeerOf is b as a WorkloadPeer.
func PeerOf(b *workv1alpha1.ResourceBinding) WorkloadPeer {
	p := WorkloadPeer{Namespace: b.Namespace, Name: b.Name, Groups: b.Spec.WorkloadAffinityGroups}
	for _, t := range b.Spec.Clusters {
		p.Clusters = append(p.Clusters, t.Name)
	}
	for _, t := range b.Spec.GracefulEvictionTasks {
		p.Evicting = append(p.Evicting, t.FromCluster)
	}
	return p
}

// WorkloadAffinity is the verdict of placement.workloadAffinity for one
// binding, made once per decision by NewWorkloadAffinity (Karmada's
// WorkloadAffinity and WorkloadAntiAffinity filter plugins):
//
//   - affinity: only clusters every placed peer of the affinity group runs
//     on pass; with no placed peer (the group's first workload) every
//     cluster does, so the first one is never held back;
//   - anti-affinity: no cluster a peer of the anti-affinity group runs on,
//     or is still being gracefully evicted from, passes (stricter than
//     Karmada, which looks at spec.clusters alone: the evicted copy runs
//     until its task ends).
//
// A cluster the binding already runs on always passes: these rules never
// take a placement away (Karmada's plugins likewise). The zero value, and
// nil, filter nothing.
type WorkloadAffinity struct {
	affinityGroup, antiAffinityGroup string
	// allowed is nil when no affinity peer is placed: every cluster.
	allowed map[string]bool
	// placedPeers are the affinity peers that have clusters.
	placedPeers []string
	// forbidden maps a cluster to the anti-affinity peers on it.
	forbidden map[string][]string
}

// NewWorkloadAffinity decides, for the binding namespace/name with groups,
// which clusters its groups allow, given candidate peers (from the
// scheduler's index). A peer counts only if it is in the same namespace,
// is not the binding itself, and carries the very same group string: a
// binding of another namespace with the same label never steers or blocks
// this one, whatever the index returned. A binding without a namespace (a
// ClusterResourceBinding) has no groups. It returns nil when nothing is
// filtered.
func NewWorkloadAffinity(namespace, name string, groups *workv1alpha1.WorkloadAffinityGroups, peers []WorkloadPeer) *WorkloadAffinity {
	if namespace == "" || groups == nil || groups.AffinityGroup == "" && groups.AntiAffinityGroup == "" {
		return nil
	}
	w := &WorkloadAffinity{affinityGroup: groups.AffinityGroup, antiAffinityGroup: groups.AntiAffinityGroup}
	for _, p := range peers {
		if p.Namespace != namespace || p.Name == name || p.Groups == nil {
			continue
		}
		if w.affinityGroup != "" && p.Groups.AffinityGroup == w.affinityGroup && len(p.Clusters) > 0 {
			if w.allowed == nil {
				w.allowed = map[string]bool{}
				for _, c := range p.Clusters {
					w.allowed[c] = true
				}
			} else {
				for c := range w.allowed {
					if !slices.Contains(p.Clusters, c) {
						delete(w.allowed, c)
					}
				}
			}
			w.placedPeers = append(w.placedPeers, p.Name)
		}
		if w.antiAffinityGroup != "" && p.Groups.AntiAffinityGroup == w.antiAffinityGroup {
			for _, c := range append(slices.Clone(p.Clusters), p.Evicting...) {
				if w.forbidden == nil {
					w.forbidden = map[string][]string{}
				}
				if !slices.Contains(w.forbidden[c], p.Name) {
					w.forbidden[c] = append(w.forbidden[c], p.Name)
				}
			}
		}
	}
	sort.Strings(w.placedPeers)
	for _, names := range w.forbidden {
		sort.Strings(names)
	}
	return w
}

// Reject returns the filter code (workv1alpha1.DecisionWorkloadAffinity,
// DecisionWorkloadAntiAffinity) that keeps cluster out, or "". running is
// true for a cluster in the binding's current result: it always passes.
func (w *WorkloadAffinity) Reject(cluster string, running bool) string {
	if w == nil || running {
		return ""
	}
	if w.allowed != nil && !w.allowed[cluster] {
		return workv1alpha1.DecisionWorkloadAffinity
	}
	if len(w.forbidden[cluster]) > 0 {
		return workv1alpha1.DecisionWorkloadAntiAffinity
	}
	return ""
}

// workloadAffinityFilter is Reject for filter.
func workloadAffinityFilter(in Input, cluster string, current map[string]int32) string {
	_, running := current[cluster]
	return in.WorkloadAffinity.Reject(cluster, running)
}

// message says why code keeps cluster out, naming the group and peers
// (bounded: at most a few names each).
func (w *WorkloadAffinity) message(code, cluster string) string {
	switch code {
	case workv1alpha1.DecisionWorkloadAffinity:
		return fmt.Sprintf("affinity group %q runs elsewhere (%s)", w.affinityGroup,
			statuslimits.Join(w.placedPeers, ", ", statuslimits.MaxSummary/4, "workloads"))
	case workv1alpha1.DecisionWorkloadAntiAffinity:
		return fmt.Sprintf("anti-affinity group %q already runs here (%s)", w.antiAffinityGroup,
			statuslimits.Join(w.forbidden[cluster], ", ", statuslimits.MaxSummary/4, "workloads"))
	}
	return ""
}

// note is what a FitError adds about the groups that filtered clusters:
// "; workloadAffinity: anti-affinity group "k=v" runs on member1 (web-a),
// member2 (web-b)". "" when they filtered nothing.
func (w *WorkloadAffinity) note(reasons map[string]string) string {
	if w == nil {
		return ""
	}
	var parts []string
	if w.allowed != nil && countReason(reasons, reasonWorkloadAffinity) > 0 {
		clusters := make([]string, 0, len(w.allowed))
		for c := range w.allowed {
			clusters = append(clusters, c)
		}
		sort.Strings(clusters)
		where := "no common cluster"
		if len(clusters) > 0 {
			where = statuslimits.Join(clusters, ", ", statuslimits.MaxSummary/8, "clusters")
		}
		parts = append(parts, fmt.Sprintf("affinity group %q is placed on %s (%s)", w.affinityGroup, where,
			statuslimits.Join(w.placedPeers, ", ", statuslimits.MaxSummary/8, "workloads")))
	}
	if countReason(reasons, reasonWorkloadAntiAffinity) > 0 {
		clusters := make([]string, 0, len(w.forbidden))
		for c := range w.forbidden {
			clusters = append(clusters, c+" ("+strings.Join(firstN(w.forbidden[c], 2), ", ")+")")
		}
		sort.Strings(clusters)
		parts = append(parts, fmt.Sprintf("anti-affinity group %q runs on %s", w.antiAffinityGroup,
			statuslimits.Join(clusters, ", ", statuslimits.MaxSummary/8, "clusters")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "workloadAffinity: " + strings.Join(parts, "; ")
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("%d more", len(s)-n))
}

func countReason(reasons map[string]string, sentence string) int {
	n := 0
	for _, r := range reasons {
		if r == sentence {
			n++
		}
	}
	return n
}

// withWorkloadAffinity adds the groups' note to a FitError's message:
// "1 cluster(s) already ran a workload of the same anti-affinity group"
// does not say which group, or which workload.
func withWorkloadAffinity(in Input, err error) error {
	var fit *FitError
	if !errors.As(err, &fit) {
		return err
	}
	if note := in.WorkloadAffinity.note(fit.Reasons); note != "" {
		fit.Message = strings.TrimSuffix(fit.Message, ".") + "; " + note + "."
	}
	return err
}
