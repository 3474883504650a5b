package detector

import (
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// ReasonPriorityClassNotFound: the policy's spec.schedulePriority names a
// PriorityClass the hub's cluster does not have (or a source the hub does
// not implement). As in Karmada, nothing is bound until it exists; a
// binding made before is kept as it was.
const ReasonPriorityClassNotFound = "PriorityClassNotFound"

// priorityClassError says why a policy's schedulePriority cannot be
// resolved.
type priorityClassError struct{ msg string }

func (e *priorityClassError) Error() string { return e.msg }

// ResolveSchedulePriority is the binding's spec.schedulePriority for a
// policy's spec.schedulePriority (nil: none), reading PriorityClasses with
// get (nil: the hub does not read them). The value is bounded by
// policyv1alpha1.BoundSchedulePriority. A class that does not exist, or a
// source other than KubePriorityClass, is a *priorityClassError (Karmada's
// detector refuses to build the binding then).
func ResolveSchedulePriority(sp *policyv1alpha1.SchedulePriority, get func(name string) (*schedulingv1.PriorityClass, error)) (*workv1alpha1.SchedulePriority, error) {
	if sp == nil {
		return nil, nil
	}
	if sp.PriorityClassSource != policyv1alpha1.KubePriorityClass {
		return nil, &priorityClassError{fmt.Sprintf("spec.schedulePriority.priorityClassSource %q is not supported (only %s, as in Karmada)",
			sp.PriorityClassSource, policyv1alpha1.KubePriorityClass)}
	}
	if get == nil {
		return nil, &priorityClassError{fmt.Sprintf("spec.schedulePriority names PriorityClass %q, but this hub does not read PriorityClasses", sp.PriorityClassName)}
	}
	pc, err := get(sp.PriorityClassName)
	if apierrors.IsNotFound(err) {
		return nil, &priorityClassError{fmt.Sprintf("spec.schedulePriority names PriorityClass %q, which does not exist; create it (scheduling.k8s.io/v1) or change the policy",
			sp.PriorityClassName)}
	}
	if err != nil {
		return nil, err
	}
	return &workv1alpha1.SchedulePriority{Priority: policyv1alpha1.BoundSchedulePriority(pc.Value)}, nil
}

// schedulePriority resolves policy's schedulePriority from the cache.
func (c *Controller) schedulePriority(policy *policyv1alpha1.PropagationSpec) (*workv1alpha1.SchedulePriority, error) {
	var get func(string) (*schedulingv1.PriorityClass, error)
	if c.priorityClasses != nil {
		get = c.priorityClasses.Get
	}
	return ResolveSchedulePriority(policy.SchedulePriority, get)
}

// WithPriorityClasses makes the detector resolve spec.schedulePriority
// from informer's PriorityClasses (the hub's cluster's, cluster-scoped),
// and re-read the templates of every policy naming a class when it is
// created, changes value or is deleted.
func (c *Controller) WithPriorityClasses(informer cache.SharedIndexInformer) *Controller {
	c.priorityClasses = schedulinglisters.NewPriorityClassLister(informer.GetIndexer())
	c.synced = append(c.synced, informer.HasSynced)
	changed := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pc, ok := obj.(*schedulingv1.PriorityClass); ok {
			c.enqueuePoliciesNaming(pc.Name)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed,
		UpdateFunc: func(o, n any) {
			if o.(*schedulingv1.PriorityClass).Value != n.(*schedulingv1.PriorityClass).Value {
				changed(n)
			}
		}})
	return c
}

// enqueuePoliciesNaming re-evaluates the templates of the policies whose
// schedulePriority names the PriorityClass name.
func (c *Controller) enqueuePoliciesNaming(name string) {
	names := func(sp *policyv1alpha1.SchedulePriority) bool { return sp != nil && sp.PriorityClassName == name }
	pps, _ := c.policies.List(labels.Everything())
	for _, p := range pps {
		if names(p.Spec.SchedulePriority) {
			c.enqueuePolicyScope(p)
		}
	}
	cpps, _ := c.clusterPolicies.List(labels.Everything())
	for _, p := range cpps {
		if names(p.Spec.SchedulePriority) {
			c.enqueuePolicyScope(p)
		}
	}
}
