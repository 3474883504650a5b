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

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// spreadSearchBudget bounds the combinations of groups selectBySpread
// tries before it gives up: a fleet whose groups cannot meet the
// constraints must not hold a scheduler worker for long.
const spreadSearchBudget = 200_000

// bounds is one constraint's [min, max] (max 0: no limit), merged when a
// stored policy repeats a field (the CRD refuses that now).
type bounds struct {
	sc       *policyv1alpha1.SpreadConstraint
	min, max int
}

func (b *bounds) merge(sc *policyv1alpha1.SpreadConstraint) {
	if b.sc == nil {
		b.sc = sc
	}
	b.min = max(b.min, int(sc.MinGroups))
	if sc.MaxGroups > 0 && (b.max == 0 || int(sc.MaxGroups) < b.max) {
		b.max = int(sc.MaxGroups)
	}
}

func (b bounds) allows(n int) bool { return n >= b.min && (b.max == 0 || n <= b.max) }

// dimension is a group constraint: provider, region, zone or a label.
type dimension struct {
	bounds
	key func(*clusterv1alpha1.Cluster) string
}

// spreadUnit is the clusters that share a value in every dimension: taking
// any of them adds the same groups.
type spreadUnit struct {
	values   []string
	members  []candidate // score order
	existing int
	first    int // score position of its best cluster
}

// selectBySpread picks clusters from feasible (in score order) so every
// spread constraint holds, after Karmada's spreadconstraint package
// (SelectBestClusters, selectGroups), generalised from region to any
// combination of provider, region, zone and label constraints:
//
//  1. A cluster without a value for a grouping field belongs to no group
//     and is left out.
//  2. Groups are chosen first: as few as satisfy every group constraint's
//     [minGroups, maxGroups] and the cluster constraint's minGroups,
//     preferring groups that hold current clusters (locality), then larger
//     ones, then the best-scored cluster (Karmada: the best path of the
//     fewest groups).
//  3. Then clusters: the best one of each chosen group, then more from the
//     chosen groups in score order up to the cluster constraint's
//     maxGroups (all of them without one). A group constraint's minGroups
//     wins over the cluster constraint's maxGroups, as in Karmada
//     (cluster maxGroups 1 with region minGroups 2 runs on one cluster in
//     each of two regions).
//
// It returns why it could not, naming the constraint. dropped, when not
// nil, learns which constraint left each cluster out.
func selectBySpread(feasible []candidate, constraints []policyv1alpha1.SpreadConstraint, need *replicaNeed,
	dropped func(candidate, *policyv1alpha1.SpreadConstraint)) ([]candidate, string) {
	if len(constraints) == 0 {
		return feasible, ""
	}
	var cluster bounds
	dims := spreadDimensions(constraints, &cluster)
	if len(dims) == 0 {
		return selectClusters(feasible, cluster, need, dropped)
	}
	drop := func(c candidate, sc *policyv1alpha1.SpreadConstraint) {
		if dropped != nil {
			dropped(c, sc)
		}
	}

	// Units: clusters by their values in every dimension.
	byValues := map[string]*spreadUnit{}
	var units []*spreadUnit
	eligible := 0
	for i, c := range feasible {
		values := make([]string, len(dims))
		missing := -1
		for d := range dims {
			if values[d] = dims[d].key(c.cluster); values[d] == "" && missing < 0 {
				missing = d
			}
		}
		if missing >= 0 {
			drop(c, dims[missing].sc)
			continue
		}
		eligible++
		id := strings.Join(values, "\x00")
		u, ok := byValues[id]
		if !ok {
			u = &spreadUnit{values: values, first: i}
			byValues[id] = u
			units = append(units, u)
		}
		u.members = append(u.members, c)
		if c.existing {
			u.existing++
		}
	}
	for d := range dims {
		if n := distinctValues(units, d); n < dims[d].min {
			return nil, fmt.Sprintf("the spread constraint by %s needs at least %d groups and %d are available",
				describeConstraint(dims[d].sc), dims[d].min, n)
		}
	}
	if eligible < cluster.min {
		return nil, fmt.Sprintf("the spread constraint by cluster needs at least %d clusters and %d are available with a %s",
			cluster.min, eligible, dimensionNames(dims))
	}
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.existing != b.existing {
			return a.existing > b.existing
		}
		if len(a.members) != len(b.members) {
			return len(a.members) > len(b.members)
		}
		return a.first < b.first
	})

	chosen, exhausted := chooseUnits(units, dims, cluster)
	if chosen == nil {
		return nil, unsatisfiable(units, dims, cluster, exhausted)
	}

	// One cluster per chosen unit, then the rest in score order up to the
	// cluster constraint's maxGroups.
	picked := map[string]bool{}
	inChosen := map[string]bool{}
	for _, u := range chosen {
		picked[u.members[0].cluster.Name] = true
		for _, c := range u.members {
			inChosen[c.cluster.Name] = true
		}
	}
	limit := max(cluster.max, len(chosen))
	for _, c := range feasible {
		if cluster.max > 0 && len(picked) >= limit {
			break
		}
		if inChosen[c.cluster.Name] {
			picked[c.cluster.Name] = true
		}
	}
	chosenValues := make([]map[string]bool, len(dims))
	for d := range dims {
		chosenValues[d] = map[string]bool{}
		for _, u := range chosen {
			chosenValues[d][u.values[d]] = true
		}
	}
	out := make([]candidate, 0, len(picked))
	for _, u := range units {
		for _, c := range u.members {
			if picked[c.cluster.Name] {
				continue
			}
			if inChosen[c.cluster.Name] {
				drop(c, cluster.sc)
				continue
			}
			// The coarsest dimension whose group was not chosen.
			d := len(dims) - 1
			for i := range dims {
				if !chosenValues[i][u.values[i]] {
					d = i
					break
				}
			}
			drop(c, dims[d].sc)
		}
	}
	for _, c := range feasible { // keeps score order
		if picked[c.cluster.Name] {
			out = append(out, c)
		}
	}
	return out, ""
}

// spreadDimensions returns the group constraints, coarsest first
// (provider, region, zone, then labels in the order given), and merges the
// cluster constraints into cluster. A constraint with neither field nor
// label spreads by cluster.
func spreadDimensions(constraints []policyv1alpha1.SpreadConstraint, cluster *bounds) []dimension {
	byField := map[policyv1alpha1.SpreadFieldValue]*bounds{}
	byLabel := map[string]*bounds{}
	var labels []string
	for i := range constraints {
		sc := &constraints[i]
		switch {
		case sc.SpreadByLabel != "":
			if byLabel[sc.SpreadByLabel] == nil {
				byLabel[sc.SpreadByLabel] = &bounds{}
				labels = append(labels, sc.SpreadByLabel)
			}
			byLabel[sc.SpreadByLabel].merge(sc)
		case sc.SpreadByField == "" || sc.SpreadByField == policyv1alpha1.SpreadByFieldCluster:
			cluster.merge(sc)
		default:
			if byField[sc.SpreadByField] == nil {
				byField[sc.SpreadByField] = &bounds{}
			}
			byField[sc.SpreadByField].merge(sc)
		}
	}
	var dims []dimension
	for _, f := range []policyv1alpha1.SpreadFieldValue{policyv1alpha1.SpreadByFieldProvider, policyv1alpha1.SpreadByFieldRegion, policyv1alpha1.SpreadByFieldZone} {
		if b := byField[f]; b != nil {
			dims = append(dims, dimension{bounds: *b, key: groupKey(b.sc)})
		}
	}
	for _, l := range labels {
		b := byLabel[l]
		dims = append(dims, dimension{bounds: *b, key: groupKey(b.sc)})
	}
	return dims
}

// replicaNeed is what a Divided placement that divides by room needs of
// the selected clusters: replicas in total, each cluster offering room
// (what it runs plus what it reports free).
type replicaNeed struct {
	replicas int64
	room     func(candidate) int64
}

// selectClusters is the cluster constraint alone (Karmada's
// selectBestClustersByCluster): the best-scored clusters, up to maxGroups.
// When the replicas are divided by room and the picks lack it, the
// lowest-scored picks are swapped, last first, for the roomiest clusters
// left out (Karmada's selectClustersByAvailableResource); if they still
// lack it, the replica division says so.
func selectClusters(feasible []candidate, cluster bounds, need *replicaNeed, dropped func(candidate, *policyv1alpha1.SpreadConstraint)) ([]candidate, string) {
	if len(feasible) < cluster.min {
		return nil, fmt.Sprintf("the spread constraint by cluster needs at least %d clusters and %d are available", cluster.min, len(feasible))
	}
	if cluster.max == 0 || len(feasible) <= cluster.max {
		return feasible, ""
	}
	picked := slices.Clone(feasible[:cluster.max])
	rest := slices.Clone(feasible[cluster.max:])
	if need != nil {
		enough := func() bool {
			var total int64
			for _, c := range picked {
				total += need.room(c)
			}
			return total >= need.replicas
		}
		for i := len(picked) - 1; i >= 0 && !enough(); i-- {
			best, bestRoom := -1, need.room(picked[i])
			for j, c := range rest {
				if r := need.room(c); r > bestRoom {
					best, bestRoom = j, r
				}
			}
			if best >= 0 {
				picked[i], rest[best] = rest[best], picked[i]
			}
		}
		in := map[string]bool{}
		for _, c := range picked {
			in[c.cluster.Name] = true
		}
		picked = picked[:0]
		rest = rest[:0]
		for _, c := range feasible { // score order again
			if in[c.cluster.Name] {
				picked = append(picked, c)
			} else {
				rest = append(rest, c)
			}
		}
	}
	if dropped != nil {
		for _, c := range rest {
			dropped(c, cluster.sc)
		}
	}
	return picked, ""
}

// chooseUnits finds the fewest units (then the first in preference order)
// whose groups satisfy every dimension and that hold at least the cluster
// constraint's minGroups clusters; more units than the cluster
// constraint's maxGroups only when a dimension's minGroups needs them.
// exhausted is true when it gave up at the search budget.
func chooseUnits(units []*spreadUnit, dims []dimension, cluster bounds) (chosen []*spreadUnit, exhausted bool) {
	lo := 1
	for _, d := range dims {
		lo = max(lo, d.min)
	}
	hi := len(units)
	if cluster.max > 0 {
		hi = min(hi, max(cluster.max, lo))
	}
	budget := spreadSearchBudget
	counts := make([]map[string]int, len(dims))
	for d := range dims {
		counts[d] = map[string]int{}
	}
	path := make([]*spreadUnit, 0, hi)
	var dfs func(start, size, clusters int) bool
	dfs = func(start, size, clusters int) bool {
		if budget--; budget < 0 {
			return false
		}
		left := size - len(path)
		for d := range dims {
			if len(counts[d])+left < dims[d].min {
				return false
			}
		}
		if left == 0 {
			return clusters >= cluster.min
		}
		for i := start; i <= len(units)-left; i++ {
			u := units[i]
			fits := true
			for d := range dims {
				if _, seen := counts[d][u.values[d]]; !seen && dims[d].max > 0 && len(counts[d]) >= dims[d].max {
					fits = false
					break
				}
			}
			if !fits {
				continue
			}
			for d := range dims {
				counts[d][u.values[d]]++
			}
			path = append(path, u)
			if dfs(i+1, size, clusters+len(u.members)) {
				return true
			}
			path = path[:len(path)-1]
			for d := range dims {
				if counts[d][u.values[d]]--; counts[d][u.values[d]] == 0 {
					delete(counts[d], u.values[d])
				}
			}
			if budget < 0 {
				return false
			}
		}
		return false
	}
	for size := lo; size <= hi; size++ {
		if dfs(0, size, 0) {
			return slices.Clone(path), false
		}
		if budget < 0 {
			return nil, true
		}
	}
	return nil, false
}

// unsatisfiable says which constraint cannot be met: the first dimension
// that fails on its own with the cluster constraint, else all of them
// together.
func unsatisfiable(units []*spreadUnit, dims []dimension, cluster bounds, exhausted bool) string {
	if exhausted {
		return fmt.Sprintf("no combination of groups satisfying the spread constraints by %s was found within %d tries",
			dimensionNames(dims), spreadSearchBudget)
	}
	clusterPart := ""
	if cluster.sc != nil {
		clusterPart = " with the spread constraint by cluster (" + describeBounds(cluster) + ")"
	}
	for d := range dims {
		if chosen, _ := chooseUnits(units, dims[d:d+1], cluster); chosen == nil {
			return fmt.Sprintf("the spread constraint by %s (%s) cannot be met%s: %d groups hold %s",
				describeConstraint(dims[d].sc), describeBounds(dims[d].bounds), clusterPart, distinctValues(units, d), describeGroupSizes(units, d))
		}
	}
	parts := make([]string, len(dims))
	for d := range dims {
		parts[d] = describeConstraint(dims[d].sc) + " (" + describeBounds(dims[d].bounds) + ")"
	}
	return fmt.Sprintf("the spread constraints by %s cannot all be met together%s by the available clusters", strings.Join(parts, ", "), clusterPart)
}

func distinctValues(units []*spreadUnit, d int) int {
	seen := map[string]bool{}
	for _, u := range units {
		seen[u.values[d]] = true
	}
	return len(seen)
}

// describeGroupSizes is "a: 2, b: 1 clusters" for dimension d.
func describeGroupSizes(units []*spreadUnit, d int) string {
	sizes := map[string]int{}
	for _, u := range units {
		sizes[u.values[d]] += len(u.members)
	}
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %d", n, sizes[n])
	}
	return strings.Join(parts, ", ") + " clusters"
}

func dimensionNames(dims []dimension) string {
	names := make([]string, len(dims))
	for i := range dims {
		names[i] = describeConstraint(dims[i].sc)
	}
	return strings.Join(names, ", ")
}

func describeBounds(b bounds) string {
	switch {
	case b.min > 0 && b.max > 0:
		return fmt.Sprintf("minGroups %d, maxGroups %d", b.min, b.max)
	case b.max > 0:
		return fmt.Sprintf("maxGroups %d", b.max)
	case b.min == 0:
		return "no bounds"
	default:
		return fmt.Sprintf("minGroups %d", b.min)
	}
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
		return clusterZone
	default:
		return nil
	}
}

// clusterZone is the zone a cluster is grouped by: the deprecated single
// zone when set (Karmada still honours it), else the first of its zones.
func clusterZone(c *clusterv1alpha1.Cluster) string {
	//lint:ignore SA1019 the deprecated single zone is still honoured, as in Karmada
	if c.Spec.Zone != "" {
		return c.Spec.Zone //lint:ignore SA1019 see above
	}
	if len(c.Spec.Zones) > 0 {
		return slices.Min(c.Spec.Zones)
	}
	return ""
}

func describeConstraint(sc *policyv1alpha1.SpreadConstraint) string {
	if sc == nil {
		return "cluster"
	}
	if sc.SpreadByLabel != "" {
		return "label " + sc.SpreadByLabel
	}
	if sc.SpreadByField == "" {
		return string(policyv1alpha1.SpreadByFieldCluster)
	}
	return string(sc.SpreadByField)
}
