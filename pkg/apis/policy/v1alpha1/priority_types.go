package v1alpha1

// SchedulePriority says where the priority of the workloads a policy
// propagates comes from (Karmada's spec.schedulePriority). The hub resolves
// it when it writes the binding (the binding's spec.schedulePriority.priority)
// and schedules, evicts from a failed cluster and ends graceful evictions
// higher priority first, ties in arrival order. A PriorityClass that does
// not exist keeps the template from being bound (Karmada's behaviour): the
// template says so in its Propagated condition, and a binding made before
// is kept as it was.
// +kubebuilder:validation:XValidation:rule="self.priorityClassSource == 'KubePriorityClass'",message="priorityClassSource must be KubePriorityClass (a scheduling.k8s.io/v1 PriorityClass of the hub's cluster); PodPriorityClass and FederatedPriorityClass are not implemented, as in Karmada"
type SchedulePriority struct {
	// PriorityClassSource says where the PriorityClass is defined. Only
	// KubePriorityClass (a scheduling.k8s.io/v1 PriorityClass on the hub's
	// host cluster) is implemented, as in Karmada.
	// +kubebuilder:validation:MaxLength=64
	// +required
	PriorityClassSource PriorityClassSource `json:"priorityClassSource"`

	// PriorityClassName names the PriorityClass. Its value, at most
	// 1000000000 (the highest a user-defined class may have; the system
	// classes rank as that), is the workloads' priority.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="priorityClassName must be the name of a PriorityClass: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +required
	PriorityClassName string `json:"priorityClassName"`
}

// PriorityClassSource says where a SchedulePriority's class is defined.
type PriorityClassSource string

// Priority class sources (Karmada's names; only KubePriorityClass is
// implemented, in Karmada as here).
const (
	// KubePriorityClass: a scheduling.k8s.io/v1 PriorityClass.
	KubePriorityClass PriorityClassSource = "KubePriorityClass"
	// PodPriorityClass: the pod template's priorityClassName (not
	// implemented).
	PodPriorityClass PriorityClassSource = "PodPriorityClass"
	// FederatedPriorityClass: Karmada's FederatedPriorityClass (not
	// implemented).
	FederatedPriorityClass PriorityClassSource = "FederatedPriorityClass"
)

// MaxSchedulePriority is the highest priority a binding gets: a
// PriorityClass's value above it (the system classes,
// system-cluster-critical and system-node-critical) counts as it, so a
// tenant naming a system class does not outrank the classes an admin made
// (Kubernetes' HighestUserDefinablePriority).
const MaxSchedulePriority int32 = 1000000000

// BoundSchedulePriority is value bounded to at most MaxSchedulePriority.
func BoundSchedulePriority(value int32) int32 {
	return min(value, MaxSchedulePriority)
}
