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

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// selectBySpread picks clusters from feasible (in score order) so every
// spread constraint holds. Group constraints (region, zone, provider,
// label) choose whole groups, those holding current clusters first; a
// cluster constraint then bounds the number of clusters, taking one per
// chosen group before a second from any. It returns why it could not.
// dropped, when not nil, learns which constraint left each cluster out.
func selectBySpread(feasible []candidate, constraints []policyv1alpha1.SpreadConstraint,
	dropped func(candidate, *policyv1alpha1.SpreadConstraint)) ([]candidate, string) {
	selected := feasible
	var clusterConstraint *policyv1alpha1.SpreadConstraint
	var groupsOf func(candidate) string
	for i := range constraints {
		sc := &constraints[i]
		key := groupKey(sc)
		if key == nil {
			clusterConstraint = sc
			continue
		}
		groups := groupCandidates(selected, key)
		if int32(len(groups)) < sc.MinGroups {
			return nil, fmt.Sprintf("the spread constraint by %s needs at least %d groups and %d are available",
				describeConstraint(sc), sc.MinGroups, len(groups))
		}
		if sc.MaxGroups > 0 && int32(len(groups)) > sc.MaxGroups {
			groups = groups[:sc.MaxGroups]
		}
		chosen := map[string]bool{}
		for _, g := range groups {
			chosen[g.name] = true
		}
		var kept []candidate
		for _, c := range selected {
			if v := key(c.cluster); v != "" && chosen[v] {
				kept = append(kept, c)
			} else if dropped != nil {
				dropped(c, sc)
			}
		}
		selected = kept
		groupsOf = func(c candidate) string { return key(c.cluster) }
	}
	if clusterConstraint == nil {
		return selected, ""
	}
	if int32(len(selected)) < clusterConstraint.MinGroups {
		return nil, fmt.Sprintf("the spread constraint by cluster needs at least %d clusters and %d are available",
			clusterConstraint.MinGroups, len(selected))
	}
	limit := clusterConstraint.MaxGroups
	if limit <= 0 || int32(len(selected)) <= limit {
		return selected, ""
	}
	if groupsOf == nil {
		if dropped != nil {
			for _, c := range selected[limit:] {
				dropped(c, clusterConstraint)
			}
		}
		return selected[:limit], ""
	}
	// One per group first, so a region constraint is not undone by the
	// cluster limit.
	picked := map[string]bool{}
	seen := map[string]bool{}
	for _, c := range selected {
		if g := groupsOf(c); !seen[g] && int32(len(picked)) < limit {
			seen[g] = true
			picked[c.cluster.Name] = true
		}
	}
	for _, c := range selected {
		if int32(len(picked)) >= limit {
			break
		}
		picked[c.cluster.Name] = true
	}
	out := make([]candidate, 0, limit)
	for _, c := range selected { // keeps score order
		if picked[c.cluster.Name] {
			out = append(out, c)
		} else if dropped != nil {
			dropped(c, clusterConstraint)
		}
	}
	return out, ""
}

// groupKey returns how sc groups clusters, or nil for the cluster
// constraint.
func groupKey(sc *policyv1alpha1.SpreadConstraint) func(*clusterv1alpha1.Cluster) string {
	if sc.SpreadByLabel != "" {
		label := sc.SpreadByLabel
		return func(c *clusterv1alpha1.Cluster) string { return c.Labels[label] }
	}
	switch sc.SpreadByField {
	case policyv1alpha1.SpreadByFieldRegion:
		return func(c *clusterv1alpha1.Cluster) string { return c.Spec.Region }
	case policyv1alpha1.SpreadByFieldProvider:
		return func(c *clusterv1alpha1.Cluster) string { return c.Spec.Provider }
	case policyv1alpha1.SpreadByFieldZone:
		return func(c *clusterv1alpha1.Cluster) string {
			//lint:ignore SA1019 the deprecated single zone is still honoured, as in Karmada
			if c.Spec.Zone != "" {
				return c.Spec.Zone //lint:ignore SA1019 see above
			}
			if len(c.Spec.Zones) > 0 {
				return slices.Min(c.Spec.Zones)
			}
			return ""
		}
	default:
		return nil
	}
}

func describeConstraint(sc *policyv1alpha1.SpreadConstraint) string {
	if sc.SpreadByLabel != "" {
		return "label " + sc.SpreadByLabel
	}
	return string(sc.SpreadByField)
}

type group struct {
	name     string
	existing int
	size     int
	first    int // score position of its best cluster
}

// groupCandidates groups the candidates by key, best first: groups with
// more current clusters, then larger, then by their best cluster's score.
// Clusters without a value for the key belong to no group.
func groupCandidates(cands []candidate, key func(*clusterv1alpha1.Cluster) string) []group {
	byName := map[string]*group{}
	var groups []*group
	for i, c := range cands {
		v := key(c.cluster)
		if v == "" {
			continue
		}
		g, ok := byName[v]
		if !ok {
			g = &group{name: v, first: i}
			byName[v] = g
			groups = append(groups, g)
		}
		g.size++
		if c.existing {
			g.existing++
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.existing != b.existing {
			return a.existing > b.existing
		}
		if a.size != b.size {
			return a.size > b.size
		}
		return a.first < b.first
	})
	out := make([]group, len(groups))
	for i, g := range groups {
		out[i] = *g
	}
	return out
}
