package v1alpha1

// SchedulePriority is a binding's resolved scheduling priority (Karmada's
// ResourceBinding spec.schedulePriority), written by the hub from its
// policy's spec.schedulePriority.
type SchedulePriority struct {
	// Priority is the binding's priority: the higher, the sooner the
	// scheduler places it, the taint manager evicts it from a failed
	// cluster and its graceful evictions end. 0 when not set.
	// +kubebuilder:validation:Maximum=1000000000
	// +kubebuilder:default=0
	// +optional
	Priority int32 `json:"priority,omitempty"`
}

// SchedulePriorityValue is the binding's priority, 0 without one.
func (s *ResourceBindingSpec) SchedulePriorityValue() int32 {
	if s == nil || s.SchedulePriority == nil {
		return 0
	}
	return s.SchedulePriority.Priority
}
