package dependencies

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// ScopeFunc says whether a kind is namespaced; known is false when it cannot
// tell (the detector's ScopeFunc).
type ScopeFunc func(gvk schema.GroupVersionKind) (namespaced, known bool)

// Wanted is what the workload obj of a template depends on: what its pod
// template references (or its customization's dependencyInterpretation
// says, interpreter) and the template's explicit spec.dependencies, sorted,
// without duplicates and without obj itself.
func Wanted(interpreter *resourceinterpreter.Interpreter, obj *unstructured.Unstructured, explicit []workv1alpha1.DependencyReference) ([]workv1alpha1.DependencyReference, error) {
	implicit, err := interpreter.GetDependencies(obj)
	if err != nil {
		return nil, err
	}
	set := map[workv1alpha1.DependencyReference]bool{}
	for _, d := range append(implicit, explicit...) {
		if d.APIVersion == obj.GetAPIVersion() && d.Kind == obj.GetKind() && d.Name == obj.GetName() {
			continue
		}
		set[d] = true
	}
	return resourceinterpreter.SortDependencies(set), nil
}

// Optional returns the dependencies obj's pod template references only as
// optional and that explicit does not list: a missing one is no problem
// (the kubelet starts the pod without it) and is propagated once it exists.
func Optional(interpreter *resourceinterpreter.Interpreter, obj *unstructured.Unstructured, explicit []workv1alpha1.DependencyReference) map[workv1alpha1.DependencyReference]bool {
	optional, err := interpreter.OptionalDependencies(obj)
	if err != nil {
		return nil
	}
	for _, d := range explicit {
		delete(optional, d)
	}
	return optional
}

// Describe names a dependency for conditions and events.
func Describe(d workv1alpha1.DependencyReference) string {
	return d.Kind + " " + d.Name + " (" + d.APIVersion + ")"
}

// Resolve picks, among the ResourceTemplates of namespace ns that hold
// the referenced object (candidates), the one to propagate, or says why
// there is none. Only a template of the workload's own namespace holding a
// namespaced object of that namespace qualifies: a tenant must never pull
// another namespace's object, nor a cluster-scoped one, onto its clusters.
func Resolve(ns string, ref workv1alpha1.DependencyReference, candidates []*workv1alpha1.ResourceTemplate, scope ScopeFunc) (*workv1alpha1.ResourceTemplate, *unstructured.Unstructured, string) {
	live := make([]*workv1alpha1.ResourceTemplate, 0, len(candidates))
	for _, t := range candidates {
		if t.Namespace == ns && t.DeletionTimestamp == nil {
			live = append(live, t)
		}
	}
	if len(live) == 0 {
		return nil, nil, Describe(ref) + ": no ResourceTemplate of namespace " + ns + " holds it"
	}
	// Two templates holding one object is the detector's BindingConflict;
	// the older one holds the binding.
	sort.Slice(live, func(i, j int) bool {
		if !live[i].CreationTimestamp.Equal(&live[j].CreationTimestamp) {
			return live[i].CreationTimestamp.Before(&live[j].CreationTimestamp)
		}
		return live[i].Name < live[j].Name
	})
	tmpl := live[0]
	obj, err := workobjects.Object(tmpl)
	if err != nil {
		return nil, nil, Describe(ref) + ": template " + tmpl.Name + ": " + err.Error()
	}
	if obj.GetNamespace() != ns {
		return nil, nil, fmt.Sprintf("%s: template %s holds an object of namespace %q, not %q", Describe(ref), tmpl.Name, obj.GetNamespace(), ns)
	}
	if scope != nil {
		if namespaced, known := scope(obj.GroupVersionKind()); known && !namespaced {
			return nil, nil, Describe(ref) + ": cluster-scoped objects are not propagated as dependencies"
		}
	}
	return tmpl, obj, ""
}

// Snapshot is what a dependency's binding records of the binding that
// requires it: its clusters, with those it is still being gracefully
// evicted from, so the dependency stays while the old copy does, and how
// its policy has the members handle its objects. Replicas
// are left out: a dependency has none, and a replica change must not touch
// the dependencies.
func Snapshot(b *workv1alpha1.ResourceBinding) workv1alpha1.BindingSnapshot {
	var names []string
	for _, c := range b.Spec.Clusters {
		names = append(names, c.Name)
	}
	for _, t := range b.Spec.GracefulEvictionTasks {
		names = append(names, t.FromCluster)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// How the dependent's policy says its objects are handled goes with
	// it: the dependency is handled the same way on these clusters
	// (binding.EffectiveSettings merges several dependents, safest first).
	snap := workv1alpha1.BindingSnapshot{Namespace: b.Namespace, Name: b.Name,
		PreserveResourcesOnDeletion: b.Spec.PreserveResourcesOnDeletion, ApplyStrategy: b.Spec.ApplyStrategy,
		ConflictResolution: b.Spec.ConflictResolution, Suspension: b.Spec.Suspension.DeepCopy()}
	for _, n := range names {
		snap.Clusters = append(snap.Clusters, workv1alpha1.TargetCluster{Name: n})
	}
	return snap
}

func snapshotKey(s workv1alpha1.BindingSnapshot) string { return s.Namespace + "/" + s.Name }

// WithRequirement returns requiredBy with snap's entry set (sorted by
// binding), and whether that changed anything.
func WithRequirement(requiredBy []workv1alpha1.BindingSnapshot, snap workv1alpha1.BindingSnapshot) ([]workv1alpha1.BindingSnapshot, bool) {
	i := slices.IndexFunc(requiredBy, func(s workv1alpha1.BindingSnapshot) bool { return snapshotKey(s) == snapshotKey(snap) })
	if i >= 0 && apiequality.Semantic.DeepEqual(requiredBy[i], snap) {
		return requiredBy, false
	}
	out := slices.Clone(requiredBy)
	if i >= 0 {
		out[i] = snap
	} else {
		out = append(out, snap)
	}
	sort.Slice(out, func(i, j int) bool { return snapshotKey(out[i]) < snapshotKey(out[j]) })
	return out, true
}

// WithoutRequirement returns requiredBy without the entry of binding
// ns/name, and whether there was one.
func WithoutRequirement(requiredBy []workv1alpha1.BindingSnapshot, ns, name string) ([]workv1alpha1.BindingSnapshot, bool) {
	out := slices.DeleteFunc(slices.Clone(requiredBy), func(s workv1alpha1.BindingSnapshot) bool { return s.Namespace == ns && s.Name == name })
	if len(out) == len(requiredBy) {
		return requiredBy, false
	}
	if len(out) == 0 {
		out = nil
	}
	return out, true
}

// Orphaned: a binding the hub made only for dependents (no policy gave it
// a placement since) that nothing requires any more. Deleting it removes
// the object from the members.
func Orphaned(b *workv1alpha1.ResourceBinding) bool {
	return b.Spec.Placement == nil && len(b.Spec.RequiredBy) == 0 && b.Labels[workv1alpha1.LabelDependencyOnly] == "true"
}

// Condition is the DependenciesResolved condition for the dependent
// binding's generation, given the problems with its dependencies.
func Condition(generation int64, count int, problems []string) metav1.Condition {
	cond := metav1.Condition{Type: workv1alpha1.BindingConditionDependenciesResolved, ObservedGeneration: generation}
	if len(problems) == 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, workv1alpha1.BindingReasonDependenciesResolved
		cond.Message = fmt.Sprintf("%d dependencies propagated with the workload", count)
		return cond
	}
	sorted := slices.Clone(problems)
	sort.Strings(sorted)
	cond.Status, cond.Reason = metav1.ConditionFalse, workv1alpha1.BindingReasonDependencyMissing
	cond.Message = "missing dependencies: " + strings.Join(sorted, "; ")
	return cond
}

// Resolved: the binding's DependenciesResolved condition is True for its
// current generation, i.e. every dependency's binding lists the binding's
// current clusters (the graceful eviction controller relies on it).
func Resolved(b *workv1alpha1.ResourceBinding) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == b.Generation
}
