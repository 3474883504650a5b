package wrap

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// workloadAffinityDifferences: Flotilla honours placement.workloadAffinity
// without a feature gate (Karmada: WorkloadAffinity, alpha, off by
// default), and its anti-affinity also avoids the clusters a member of the
// group is still being gracefully evicted from (docs/api.md, "Differences
// from Karmada").
func workloadAffinityDifferences(spec map[string]any, note noteFunc) {
	wa, _, _ := unstructured.NestedMap(spec, "placement", "workloadAffinity")
	if len(wa) == 0 {
		return
	}
	msg := "takes effect in Flotilla, where Karmada honours it only with karmada-scheduler's and karmada-controller-manager's feature gate " +
		"WorkloadAffinity (alpha, off by default): if yours ran without the gate, the workloads of a group will be kept together or apart now " +
		"(existing placements are kept)"
	if _, anti := wa["antiAffinity"]; anti {
		msg += "; antiAffinity also avoids the clusters another workload of the group is still being gracefully evicted from (Karmada: its placements only)"
	}
	note("spec.placement.workloadAffinity", "%s", msg)
}
