package wrap

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// differenceNotes are the notes of res that say a field behaves otherwise
// than in Karmada, as "object: path" (without the text), in order.
func differenceNotes(res *Result) []string {
	var out []string
	for _, n := range res.Notes {
		for _, marker := range []string{"Karmada", "Flotilla"} {
			if !strings.Contains(n, marker) {
				continue
			}
			// "Kind ns/name: path: message (source)"
			parts := strings.SplitN(n, ": ", 3)
			if len(parts) == 3 && strings.HasPrefix(parts[1], "spec.") {
				out = append(out, parts[0]+": "+parts[1])
			}
			break
		}
	}
	return out
}

// Every documented difference visible in a Karmada object is a note
// naming the object and the field (docs/wrap.md, "Where the same YAML
// behaves otherwise"); a policy that shows none gets none.
func TestKarmadaDifferences(t *testing.T) {
	res, _ := convertFile(t, "issue31-differences.yaml", Options{})
	if len(res.Unsupported) != 0 {
		t.Fatalf("unsupported: %v", res.Unsupported)
	}
	want := []string{
		"PropagationPolicy shop/weighted: spec.placement.spreadConstraints",
		"PropagationPolicy shop/weighted: spec.placement.spreadConstraints[0].maxGroups",
		"ClusterPropagationPolicy zones: spec.resourceSelectors[0].labelSelector",
		"ClusterPropagationPolicy zones: spec.placement.clusterAffinity.labelSelector",
		"ClusterPropagationPolicy zones: spec.placement.spreadConstraints[1].maxGroups",
		"ClusterPropagationPolicy zones: spec.placement.spreadConstraints[2].spreadByField",
		"ClusterPropagationPolicy zones: spec.placement.spreadConstraints[3].spreadByLabel",
		"PropagationPolicy shop/stateful: spec.placement.clusterAffinities[1].fieldSelector",
		"PropagationPolicy shop/stateful: spec.failover.application.purgeMode",
		"PropagationPolicy shop/stateful: spec.failover.cluster.purgeMode",
		"PropagationPolicy shop/stateful: spec.conflictResolution",
		"PropagationPolicy shop/stateful: spec.suspension",
		"Cluster member1: spec.taints[0]",
		"Cluster member1: spec.taints[1]",
	}
	got := differenceNotes(res)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no note for %s", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("unexpected note for %s", g)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, text := range []string{
		// What each note says, and that it names the source.
		"PropagationPolicy shop/weighted: spec.placement.spreadConstraints: Karmada ignores spread constraints when replicas are divided by static weights",
		"spec.placement.spreadConstraints[0].maxGroups: not set: Flotilla sets no upper limit on the number of clusters; Karmada reads it as 0",
		"spec.placement.spreadConstraints[1].maxGroups: not set: Flotilla sets no upper limit on the number of regions",
		"spec.placement.spreadConstraints[2].spreadByField: Flotilla spreads over zones (a cluster without one is left out)",
		"spec.placement.spreadConstraints[3].spreadByLabel: Flotilla spreads over the values of cluster label rack",
		"spec.placement.clusterAffinity.labelSelector: when no cluster matches any more, Flotilla keeps the workload where it runs",
		"spec.resourceSelectors[0].labelSelector: an object whose labels change so that this policy no longer selects it is released at once",
		// Immediately is converted to Directly first, then noted as Directly.
		"spec.failover.application.purgeMode: Directly deletes the old copy at once only while a healthy copy runs elsewhere",
		"spec.conflictResolution: with propagateDeps, a dependency these workloads share",
		"spec.suspension: with propagateDeps, Flotilla also suspends dispatching the workloads' dependencies",
		"Cluster member1: spec.taints[0]: the hub adds and removes cluster.flotilla.io/not-ready from the cluster's Ready condition",
		"Cluster member1: spec.taints[1]: NoExecute taint maintenance has no timeAdded",
		"(issue31-differences.yaml, document 4)",
	} {
		if !strings.Contains(notes, text) {
			t.Errorf("notes lack %q:\n%s", text, notes)
		}
	}
	if strings.Contains(notes, "shop/plain") {
		t.Errorf("notes on the plain policy:\n%s", notes)
	}
}

// Which replica schedulings make Karmada ignore spread constraints
// (its shouldIgnoreSpreadConstraint), and so get the note.
func TestKarmadaIgnoresSpread(t *testing.T) {
	for _, c := range []struct {
		scheduling string
		noted      bool
	}{
		{"", false},
		{"{replicaSchedulingType: Duplicated}", false},
		{"{replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}", false},
		{"{replicaSchedulingType: Divided, replicaDivisionPreference: Weighted}", true},
		{"{replicaSchedulingType: Divided, replicaDivisionPreference: Weighted, weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [a]}, weight: 1}]}}", true},
		{"{replicaSchedulingType: Divided, replicaDivisionPreference: Weighted, weightPreference: {dynamicWeight: AvailableReplicas}}", false},
	} {
		t.Run(c.scheduling, func(t *testing.T) {
			doc := "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n" +
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: d}]\n" +
				"  placement:\n    spreadConstraints: [{spreadByField: cluster, maxGroups: 2, minGroups: 1}]\n"
			if c.scheduling != "" {
				doc += "    replicaScheduling: " + c.scheduling + "\n"
			}
			res, _ := wrapOne(t, doc)
			got := differenceNotes(res)
			if noted := slices.Contains(got, "PropagationPolicy default/p: spec.placement.spreadConstraints"); noted != c.noted {
				t.Errorf("noted %v, want %v: %v", noted, c.noted, res.Notes)
			}
			if len(got) > 1 || len(got) == 1 && !c.noted {
				t.Errorf("other notes: %v", got)
			}
		})
	}
}

// propagateDeps is what makes conflictResolution and suspension differ.
func TestKarmadaDependencyDifferencesNeedPropagateDeps(t *testing.T) {
	for _, deps := range []bool{false, true} {
		t.Run(fmt.Sprint("propagateDeps ", deps), func(t *testing.T) {
			doc := fmt.Sprintf("apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n"+
				"  propagateDeps: %v\n  conflictResolution: Overwrite\n  suspension: {dispatchingOnClusters: {clusterNames: [a]}}\n"+
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: d}]\n", deps)
			res, _ := wrapOne(t, doc)
			got := differenceNotes(res)
			want := []string(nil)
			if deps {
				want = []string{"PropagationPolicy default/p: spec.conflictResolution", "PropagationPolicy default/p: spec.suspension"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("notes %v, want %v", got, want)
			}
		})
	}
}
