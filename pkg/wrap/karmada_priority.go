package wrap

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// checkSchedulePriority finds a spec.schedulePriority Flotilla's CRD
// would refuse: a priorityClassSource other than KubePriorityClass (Karmada
// declares PodPriorityClass and FederatedPriorityClass but implements
// neither: its detector fails to build the binding), or a
// priorityClassName that cannot name a PriorityClass. It is removed and
// reported; a valid one converts as it is (the shape is Karmada's).
func checkSchedulePriority(obj map[string]any) []problem {
	sp, ok, _ := unstructured.NestedMap(obj, "spec", "schedulePriority")
	if !ok {
		return nil
	}
	source, _ := sp["priorityClassSource"].(string)
	name, _ := sp["priorityClassName"].(string)
	var why string
	switch {
	case source != string(policyv1alpha1.KubePriorityClass):
		why = fmt.Sprintf("priorityClassSource %q not supported (only KubePriorityClass; Karmada implements no other either)", source)
	case name == "":
		why = "no priorityClassName"
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		why = fmt.Sprintf("priorityClassName %q is not a PriorityClass name: %s", name, strings.Join(validation.IsDNS1123Subdomain(name), "; "))
	default:
		return nil
	}
	unstructured.RemoveNestedField(obj, "spec", "schedulePriority")
	return []problem{{"spec.schedulePriority", why + "; dropped (the workloads get priority 0)"}}
}

// schedulePriorityDifferences: the class must be on the hub's cluster, and
// Flotilla orders more by it than Karmada does.
func schedulePriorityDifferences(spec map[string]any, note noteFunc) {
	name, ok, _ := unstructured.NestedString(spec, "schedulePriority", "priorityClassName")
	if !ok {
		return
	}
	note("spec.schedulePriority", "PriorityClass %s (scheduling.k8s.io/v1) must exist on the hub's host cluster, where Karmada reads it from the Karmada apiserver; "+
		"hub wrap does not make it, and until it exists the selected templates are not bound (as in Karmada). Flotilla orders by it the scheduler "+
		"and also the evictions from a failed cluster and the ends of graceful evictions; Karmada orders its scheduler only, with the "+
		"PriorityBasedScheduling feature gate. A value above 1000000000 (the system classes) counts as 1000000000", name)
}
