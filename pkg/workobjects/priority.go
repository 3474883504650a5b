package workobjects

import (
	"k8s.io/client-go/tools/cache"
)

// Priority is the schedule priority (spec.schedulePriority.priority) of
// the cached binding of key, 0 for a binding without one or not cached. It
// reads the listers only, so a workqueue may call it with its lock held
// (priorityqueue.PriorityFunc).
func (b *Bindings) Priority(key string) int32 {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0
	}
	if ns == "" {
		c, err := b.ClusterScoped.Get(name)
		if err != nil {
			return 0
		}
		return c.Spec.SchedulePriorityValue()
	}
	rb, err := b.Namespaced.ResourceBindings(ns).Get(name)
	if err != nil {
		return 0
	}
	return rb.Spec.SchedulePriorityValue()
}
