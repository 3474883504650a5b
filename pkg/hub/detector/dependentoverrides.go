package detector

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/client-go/tools/cache"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	policyinformers "github.com/flotilla-io/flotilla/pkg/generated/informers/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// ReasonDependentOverridesMissing: the matched policy names override
// policies (dependentOverrides) that do not exist yet; the template's
// binding is neither created nor changed until they do, so the object never
// reaches a cluster without the overrides meant for it (Karmada's
// propagation-policy controller only warns; here it waits).
const ReasonDependentOverridesMissing = "DependentOverridesMissing"

// watchOverridePolicies re-evaluates the templates a new or deleted
// override policy may be waited for by.
func (c *Controller) watchOverridePolicies(policy policyinformers.Interface) {
	op, cop := policy.OverridePolicies(), policy.ClusterOverridePolicies()
	c.overrides, c.clusterOverrides = op.Lister(), cop.Lister()
	changed := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch p := obj.(type) {
		case *policyv1alpha1.OverridePolicy:
			// Only a PropagationPolicy of the same namespace can wait
			// for it; that policy selects only templates of its namespace.
			c.enqueuePolicyScope(&policyv1alpha1.PropagationPolicy{ObjectMeta: p.ObjectMeta})
		case *policyv1alpha1.ClusterOverridePolicy:
			c.enqueuePolicyScope(&policyv1alpha1.ClusterPropagationPolicy{})
		}
	}
	for _, inf := range []cache.SharedIndexInformer{op.Informer(), cop.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed})
	}
	c.synced = append(c.synced, op.Informer().HasSynced, cop.Informer().HasSynced)
}

// missingOverrides lists the dependentOverrides of the matched policy that
// do not exist (or are being deleted): OverridePolicies of the template's
// namespace for a PropagationPolicy, ClusterOverridePolicies for a
// ClusterPropagationPolicy.
func (c *Controller) missingOverrides(policy *policyv1alpha1.PropagationSpec, ns string, policyLabels map[string]string) []string {
	if len(policy.DependentOverrides) == 0 {
		return nil
	}
	_, cluster := policyLabels[workobjects.LabelClusterPropagationPolicyName]
	exists := func(name string) bool {
		if cluster {
			p, err := c.clusterOverrides.Get(name)
			return err == nil && p.DeletionTimestamp == nil
		}
		p, err := c.overrides.OverridePolicies(ns).Get(name)
		return err == nil && p.DeletionTimestamp == nil
	}
	return MissingNames(policy.DependentOverrides, exists)
}

// MissingNames returns the names (sorted, without duplicates) for which
// exists is false.
func MissingNames(names []string, exists func(string) bool) []string {
	seen := map[string]bool{}
	var missing []string
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if !exists(n) {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return missing
}

func dependentOverridesMessage(policyLabels map[string]string, missing []string) string {
	kind := "OverridePolicy"
	where := " in namespace " + policyLabels[workobjects.LabelPropagationPolicyNamespace]
	if _, ok := policyLabels[workobjects.LabelClusterPropagationPolicyName]; ok {
		kind, where = "ClusterOverridePolicy", ""
	}
	if len(missing) > 1 {
		kind = strings.TrimSuffix(kind, "y") + "ies"
	}
	return fmt.Sprintf("%s waits for its dependentOverrides: %s %s%s not found; nothing is propagated until they exist",
		policyDescription(policyLabels), kind, strings.Join(missing, ", "), where)
}

// existingBindingNote says what becomes of the binding of a template no
// policy selects: a placement-less binding the dependencies controller made
// propagates the object for the workloads that need it (propagateDeps);
// any other keeps its placement.
func existingBindingNote(binding *workv1alpha1.ResourceBinding) string {
	if binding.Spec.Placement == nil && len(binding.Spec.RequiredBy) > 0 {
		names := make([]string, 0, len(binding.Spec.RequiredBy))
		for _, r := range binding.Spec.RequiredBy {
			names = append(names, r.Name)
		}
		return "; propagated as a dependency of " + strings.Join(names, ", ") + " (spec.requiredBy of binding " + binding.Name + ")"
	}
	return "; the existing placement is kept"
}
