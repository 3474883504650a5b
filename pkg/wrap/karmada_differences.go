package wrap

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Flotilla keeps Karmada's field names, and most fields mean the same. The
// notes here are for the fields that convert unchanged but behave
// otherwise, each a difference documented in docs/comparison.md,
// docs/propagation.md or docs/api.md (docs/wrap.md lists them). A note
// names the object and the field, in the format of every other note and
// finding ("Kind ns/name: path: what differs (source)").

// differs adds a note that the field at path of the object desc behaves
// otherwise than in Karmada.
func differs(res *Result, desc, path, src, message string) {
	res.Notes = append(res.Notes, Finding{Object: desc, Path: path, Message: message, Source: src}.String())
}

// noteKarmadaDifferences notes the differences visible in a converted
// object of Flotilla kind kind. It reads the converted object, so purge
// modes and keys are already in Flotilla's spelling and dropped fields are
// gone.
func noteKarmadaDifferences(obj map[string]any, kind, desc, src string, res *Result) {
	note := func(path, format string, args ...any) { differs(res, desc, path, src, fmt.Sprintf(format, args...)) }
	switch kind {
	case "PropagationPolicy", "ClusterPropagationPolicy":
		spec, _ := obj["spec"].(map[string]any)
		if spec != nil {
			selectorDifferences(spec, note)
			placementDifferences(spec, note)
			failoverDifferences(spec, note)
			dependencyDifferences(spec, note)
			schedulePriorityDifferences(spec, note)
			workloadAffinityDifferences(spec, note)
		}
	case "Cluster":
		clusterDifferences(obj, note)
	}
}

type noteFunc func(path, format string, args ...any)

// selectorDifferences: Flotilla releases a claim as soon as the object no
// longer matches the claimant's selectors; Karmada only when the policy
// changes (docs/propagation.md, "Differences from Karmada").
func selectorDifferences(spec map[string]any, note noteFunc) {
	selectors, _ := spec["resourceSelectors"].([]any)
	for i, s := range selectors {
		if m, _ := s.(map[string]any); m["labelSelector"] != nil {
			note(fmt.Sprintf("spec.resourceSelectors[%d].labelSelector", i),
				"an object whose labels change so that this policy no longer selects it is released at once, and another policy "+
					"that selects it may claim it; Karmada keeps the claim until the policy itself changes")
			return
		}
	}
}

// placementDifferences: what runs stays when no cluster fits; spread
// constraints apply in more cases and by more fields than in Karmada's
// scheduler, and a missing maxGroups is no limit.
func placementDifferences(spec map[string]any, note noteFunc) {
	placement, _ := spec["placement"].(map[string]any)
	if placement == nil {
		return
	}
	if path := clusterSelectorPath(placement); path != "" {
		note(path, "when no cluster matches any more, Flotilla keeps the workload where it runs and says Scheduled=False; "+
			"Karmada removes it from the members")
	}
	constraints, _ := placement["spreadConstraints"].([]any)
	if len(constraints) == 0 {
		return
	}
	if karmadaIgnoresSpread(placement) {
		note("spec.placement.spreadConstraints", "Karmada ignores spread constraints when replicas are divided by static weights "+
			"(replicaDivisionPreference Weighted without dynamicWeight); Flotilla applies them, so the workload may run on fewer "+
			"or other clusters than in Karmada, the weights shared among those selected")
	}
	for i, c := range constraints {
		m, _ := c.(map[string]any)
		path := fmt.Sprintf("spec.placement.spreadConstraints[%d]", i)
		field, _ := m["spreadByField"].(string)
		label, _ := m["spreadByLabel"].(string)
		group := field
		switch {
		case label != "":
			group = "values of cluster label " + label
			note(path+".spreadByLabel", "Flotilla spreads over the values of cluster label %s (a cluster without it is left out); "+
				"Karmada's scheduler does not select by spreadByLabel", label)
		case field == string(policyv1alpha1.SpreadByFieldZone) || field == string(policyv1alpha1.SpreadByFieldProvider):
			note(path+".spreadByField", "Flotilla spreads over %ss (a cluster without one is left out); Karmada's scheduler "+
				"selects by cluster and region only and ignores this constraint", field)
			group += "s"
		case field == "" || field == string(policyv1alpha1.SpreadByFieldCluster):
			group = "clusters"
		default:
			group += "s"
		}
		if n, _ := number(m["maxGroups"]); n <= 0 {
			if group == "clusters" {
				note(path+".maxGroups", "not set: Flotilla sets no upper limit on the number of clusters; Karmada reads it as 0 "+
					"(a cluster constraint alone then selects no cluster; beside a region constraint, one cluster per region)")
			} else {
				note(path+".maxGroups", "not set: Flotilla sets no upper limit on the number of %s; Karmada does not read a "+
					"missing maxGroups as no limit", group)
			}
		}
	}
}

// clusterSelectorPath is the first cluster label or field selector of the
// placement, "" without one.
func clusterSelectorPath(placement map[string]any) string {
	if a, _ := placement["clusterAffinity"].(map[string]any); a != nil {
		for _, f := range []string{"labelSelector", "fieldSelector"} {
			if a[f] != nil {
				return "spec.placement.clusterAffinity." + f
			}
		}
	}
	terms, _ := placement["clusterAffinities"].([]any)
	for i, t := range terms {
		m, _ := t.(map[string]any)
		for _, f := range []string{"labelSelector", "fieldSelector"} {
			if m[f] != nil {
				return fmt.Sprintf("spec.placement.clusterAffinities[%d].%s", i, f)
			}
		}
	}
	return ""
}

// karmadaIgnoresSpread is Karmada's shouldIgnoreSpreadConstraint
// (pkg/scheduler/core/spreadconstraint): Divided, Weighted, and either no
// weightPreference or a staticWeightList without dynamicWeight.
func karmadaIgnoresSpread(placement map[string]any) bool {
	rs, _ := placement["replicaScheduling"].(map[string]any)
	if rs == nil || rs["replicaSchedulingType"] != string(policyv1alpha1.ReplicaSchedulingTypeDivided) ||
		rs["replicaDivisionPreference"] != string(policyv1alpha1.ReplicaDivisionPreferenceWeighted) {
		return false
	}
	wp, _ := rs["weightPreference"].(map[string]any)
	if wp == nil {
		return true
	}
	static, _ := wp["staticWeightList"].([]any)
	dynamic, _ := wp["dynamicWeight"].(string)
	return len(static) > 0 && dynamic == ""
}

// failoverDifferences: Directly is downgraded to Gracefully while no
// healthy copy runs elsewhere (docs/comparison.md, failover_test.go
// "Delete the old ones first, then create the new ones").
func failoverDifferences(spec map[string]any, note noteFunc) {
	for _, which := range []string{"application", "cluster"} {
		mode, _, _ := unstructured.NestedString(spec, "failover", which, "purgeMode")
		if policyv1alpha1.NormalizePurgeMode(policyv1alpha1.PurgeMode(mode)) != policyv1alpha1.PurgeModeDirectly {
			continue
		}
		note("spec.failover."+which+".purgeMode", "Directly deletes the old copy at once only while a healthy copy runs "+
			"elsewhere; otherwise Flotilla records the eviction Gracefully and the old copy stays until the new one is healthy. "+
			"Karmada deletes it at once")
	}
}

// dependencyDifferences: a dependency several workloads share follows the
// safest of their settings (docs/propagation.md, "A dependency follows the
// policy that needs it"); Karmada takes Overwrite if any says so and does
// not suspend dependencies.
func dependencyDifferences(spec map[string]any, note noteFunc) {
	if deps, _ := spec["propagateDeps"].(bool); !deps {
		return
	}
	if spec["conflictResolution"] == string(policyv1alpha1.ConflictOverwrite) {
		note("spec.conflictResolution", "with propagateDeps, a dependency these workloads share on a cluster with a workload "+
			"whose policy says Abort (the default) is written with Abort: Flotilla takes the safest setting, where Karmada "+
			"resolves such a conflict to Overwrite")
	}
	if s, _ := spec["suspension"].(map[string]any); s != nil && (s["dispatching"] == true || s["dispatchingOnClusters"] != nil) {
		note("spec.suspension", "with propagateDeps, Flotilla also suspends dispatching the workloads' dependencies "+
			"(ConfigMaps, Secrets, …) where the workloads are suspended; Karmada keeps dispatching them")
	}
}

// clusterDifferences: the hub owns the not-ready and unreachable taints,
// and stamps timeAdded where Karmada's webhook did (docs/api.md,
// "Differences from Karmada"; docs/comparison.md, failover_test.go "deployment
// failover testing").
func clusterDifferences(obj map[string]any, note noteFunc) {
	taints, _, _ := unstructured.NestedSlice(obj, "spec", "taints")
	for i, t := range taints {
		m, _ := t.(map[string]any)
		key, _ := m["key"].(string)
		path := fmt.Sprintf("spec.taints[%d]", i)
		switch {
		case key == clusterv1alpha1.TaintClusterNotReady || key == clusterv1alpha1.TaintClusterUnreachable:
			note(path, "the hub adds and removes %s from the cluster's Ready condition: written by hand on a Ready cluster it "+
				"is removed and evicts nothing, where Karmada keeps it and evicts", key)
		case m["effect"] == "NoExecute" && m["timeAdded"] == nil:
			note(path, "NoExecute taint %s has no timeAdded: the hub stamps it when it first sees the taint, so tolerationSeconds "+
				"count from then (Karmada stamps it on admission)", key)
		}
	}
}

// number reads a JSON number of a decoded object (int64 or float64).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}
