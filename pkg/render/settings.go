package render

import (
	"cmp"
	"slices"

	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Targets are the clusters that get a Work: the scheduling result, then
// the clusters where only a workload that depends on the object
// (spec.requiredBy, propagateDeps) needs it. A dependency has no replicas
// of its own there: those clusters get the object as the template holds it.
func Targets(binding *workv1alpha1.ResourceBinding) []workv1alpha1.TargetCluster {
	required := workobjects.RequiredClusters(&binding.Spec)
	if len(required) == 0 {
		return binding.Spec.Clusters
	}
	out := slices.Clone(binding.Spec.Clusters)
	for _, name := range required {
		out = append(out, workv1alpha1.TargetCluster{Name: name})
	}
	return out
}

// WorkSettings is how a member handles a Work's object.
type WorkSettings struct {
	PreserveResourcesOnDeletion *bool
	SuspendDispatching          *bool
	ApplyStrategy               policyv1alpha1.ApplyStrategy
	ConflictResolution          policyv1alpha1.ConflictResolution
}

// applyStrictness orders apply strategies from the one that writes most to
// the one that writes least.
var applyStrictness = map[policyv1alpha1.ApplyStrategy]int{
	policyv1alpha1.ApplyStrategyServerSideApply: 0,
	policyv1alpha1.ApplyStrategyCreateOnly:      1,
	policyv1alpha1.ApplyStrategyReadOnly:        2,
}

// EffectiveSettings is how the binding's object is handled on cluster. The
// binding's own settings (its policy's) count when a policy selects the
// object (it has a placement) or the cluster is in its scheduling result;
// each binding of spec.requiredBy placed on the cluster (propagateDeps)
// counts too, so a dependency follows the policy of the workload that needs
// it. When they disagree the safest setting wins:
//
//   - preserveResourcesOnDeletion: preserve if any says preserve (deleting
//     a PVC or Secret one workload's policy said to keep loses data);
//   - applyStrategy: ReadOnly over CreateOnly over ServerSideApply (an
//     object one workload only reads is never written for another);
//   - suspension: suspended if any is suspended on the cluster;
//   - conflictResolution: Abort over Overwrite (an existing object is
//     adopted only if every one of them says Overwrite).
//
// Unset values are the CRD defaults (ServerSideApply, Abort).
func EffectiveSettings(binding *workv1alpha1.ResourceBinding, cluster string) WorkSettings {
	type source struct {
		preserve   *bool
		apply      policyv1alpha1.ApplyStrategy
		conflict   policyv1alpha1.ConflictResolution
		suspension *policyv1alpha1.Suspension
	}
	var sources []source
	own := binding.Spec.Placement != nil || Targeted(binding, cluster) || len(binding.Spec.RequiredBy) == 0
	if own {
		sources = append(sources, source{binding.Spec.PreserveResourcesOnDeletion, binding.Spec.ApplyStrategy, binding.Spec.ConflictResolution, binding.Spec.Suspension})
	}
	for _, r := range binding.Spec.RequiredBy {
		if slices.ContainsFunc(r.Clusters, func(c workv1alpha1.TargetCluster) bool { return c.Name == cluster }) {
			sources = append(sources, source{r.PreserveResourcesOnDeletion, r.ApplyStrategy, r.ConflictResolution, r.Suspension})
		}
	}
	out := WorkSettings{ApplyStrategy: workv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictOverwrite}
	if len(sources) == 0 {
		out.ConflictResolution = policyv1alpha1.ConflictAbort
	}
	if own {
		// The binding's own value as it stands (nil or false), unless a
		// dependent asks for more.
		out.PreserveResourcesOnDeletion = binding.Spec.PreserveResourcesOnDeletion
	}
	for _, s := range sources {
		if s.preserve != nil && *s.preserve {
			out.PreserveResourcesOnDeletion = ptr.To(true)
		}
		apply := cmp.Or(s.apply, workv1alpha1.ApplyStrategyServerSideApply)
		if applyStrictness[apply] > applyStrictness[out.ApplyStrategy] {
			out.ApplyStrategy = apply
		}
		if cmp.Or(s.conflict, policyv1alpha1.ConflictAbort) != policyv1alpha1.ConflictOverwrite {
			out.ConflictResolution = policyv1alpha1.ConflictAbort
		}
		if v := suspended(s.suspension, cluster); v != nil && *v {
			out.SuspendDispatching = ptr.To(true)
		}
	}
	return out
}

func suspended(s *policyv1alpha1.Suspension, cluster string) *bool {
	if s == nil {
		return nil
	}
	if s.Dispatching != nil && *s.Dispatching {
		return s.Dispatching
	}
	if s.DispatchingOnClusters != nil && slices.Contains(s.DispatchingOnClusters.ClusterNames, cluster) {
		t := true
		return &t
	}
	return nil
}
