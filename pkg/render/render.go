// Package render is how a Work is made: one binding rendered for one
// target cluster. Work is a pure function — the binding controller
// gathers its Input from listers (the binding, the template's object, the
// cluster, the override policies, the cluster's current Work) and writes
// what it returns. In order, the manifest is
//
//  1. the template's object without status and server-set metadata;
//  2. its replicas revised to the cluster's share (the ReplicaReviser,
//     i.e. the resource interpreter) and, for a Divided Job, its share of
//     spec.completions; a cluster the scheduler shrank gracefully keeps
//     its old count while the eviction task lasts (shrinkingTarget); a
//     cluster where only a dependent workload needs the object gets it as
//     the template holds it;
//  3. overridden by the ClusterOverridePolicies, then the namespace's
//     OverridePolicies, that select the object and the cluster;
//  4. refused if the overrides changed its identity (IdentityError);
//  5. given the failover state the copy carries (stateful failover:
//     PreservedLabels) as labels, or annotations for values that cannot be
//     labels;
//
// and the Work around it is named for the binding in the cluster's
// namespace, labelled with the binding's UID, annotated with the binding,
// the cluster, the template generation, the applied overrides and the
// carried state, holds the execution finalizer, and says how the member
// applies it (EffectiveSettings: the binding's policy merged with those of
// the workloads that need the object there, safest first).
package render

import (
	"encoding/json"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/overrides"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// ReplicaReviser sets an object's replica count; the resource interpreter
// (built-in kinds and customizations) implements it.
type ReplicaReviser interface {
	ReviseReplica(obj *unstructured.Unstructured, replicas int32) error
}

// Input is everything a cluster's Work is made from. Work changes none of
// it.
type Input struct {
	// Binding is the binding rendered: its name, namespace and UID name
	// and label the Work; its spec holds the scheduling result (replicas
	// and placement), the graceful eviction tasks (a shrinking cluster's
	// count, the state a replacement carries) and spec.requiredBy (the
	// dependents whose settings count on the cluster).
	Binding *workv1alpha1.ResourceBinding
	// Object is the template's object, the one the binding names.
	Object *unstructured.Unstructured
	// TemplateGeneration is the template's generation the Work renders.
	TemplateGeneration int64
	// Cluster is the target cluster (required); override rules select it
	// by name, labels and fields.
	Cluster *clusterv1alpha1.Cluster
	// ClusterOverridePolicies and OverridePolicies are the override
	// policies that may apply (OverridePolicies of another namespace than
	// the object's are ignored).
	ClusterOverridePolicies []*policyv1alpha1.ClusterOverridePolicy
	OverridePolicies        []*policyv1alpha1.OverridePolicy
	// Current is the cluster's Work as stored now, nil when there is none:
	// the failover state it recorded stays with the copy.
	Current *workv1alpha1.Work
	// Interpreter revises the replicas; nil is the built-in interpreter.
	Interpreter ReplicaReviser
	// Revision is the template revision Object is (0: not recorded); the
	// Work is annotated with it.
	Revision int64
}

// Result is what the controller may say about a rendering besides the
// Work: filled as far as rendering got when it fails.
type Result struct {
	// Replicas is the count the object was revised to, nil when it was
	// not (no replicas, or a cluster where only a dependent needs it).
	Replicas *int32
	// Overrides are the overriders applied, nil when none applied.
	Overrides *overrides.AppliedOverrides
	// CarriedState is the failover state the copy carries, nil when none.
	CarriedState map[string]string
	// Settings is how the member handles the object.
	Settings WorkSettings
}

// Work renders in.Binding for in.Cluster. An error is the user's to fix
// (a replica field or an override that cannot be applied, an override that
// changes the object's identity: *IdentityError), not a retry: no Work is
// written for that cluster until it is fixed.
func Work(in Input) (*workv1alpha1.Work, Result, error) {
	binding, cluster := in.Binding, in.Cluster
	var result Result
	manifest := in.Object.DeepCopy()
	cleanManifest(manifest)
	if target, ok := scheduled(binding, cluster.Name); ok && binding.Spec.Replicas > 0 {
		replicas := shrinkingTarget(binding, target).Replicas
		interpreter := in.Interpreter
		if interpreter == nil {
			interpreter = resourceinterpreter.Default
		}
		if err := interpreter.ReviseReplica(manifest, replicas); err != nil {
			return nil, result, err
		}
		result.Replicas = &replicas
		if divided(binding) {
			// A Divided Job runs its share of the completions too.
			if err := resourceinterpreter.ReviseCompletions(manifest, binding.Spec.Clusters, cluster.Name); err != nil {
				return nil, result, err
			}
		}
	}
	applied, err := overrides.Apply(manifest, cluster, in.ClusterOverridePolicies, in.OverridePolicies)
	if err != nil {
		return nil, result, err
	}
	result.Overrides = applied
	// The Work's manifest must be the template's object, whatever the
	// overrides say: its namespace and kind are what the tenant was allowed.
	if err := checkIdentity(in.Object, manifest, applied); err != nil {
		return nil, result, err
	}
	result.CarriedState = PreservedLabels(binding.Spec.GracefulEvictionTasks, cluster.Name, recordedState(binding, in.Current))
	preservedState := injectState(result.CarriedState, manifest)
	raw, err := manifest.MarshalJSON()
	if err != nil {
		return nil, result, err
	}
	annotations := map[string]string{
		workobjects.AnnotationBindingNamespace: binding.Namespace,
		workobjects.AnnotationBindingName:      binding.Name,
		workobjects.AnnotationCluster:          cluster.Name,
		// What the Work renders, so a copy left behind can be told stale.
		workv1alpha1.AnnotationTemplateGeneration: strconv.FormatInt(in.TemplateGeneration, 10),
	}
	if in.Revision > 0 {
		annotations[workv1alpha1.AnnotationTemplateRevision] = strconv.FormatInt(in.Revision, 10)
	}
	if preservedState != "" {
		annotations[workv1alpha1.AnnotationPreservedLabelState] = preservedState
	}
	if applied != nil {
		b, err := json.Marshal(applied)
		if err != nil {
			return nil, result, err
		}
		annotations[overrides.AnnotationAppliedOverrides] = string(b)
	}
	result.Settings = EffectiveSettings(binding, cluster.Name)
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{
			Name: workobjects.WorkName(binding.Namespace, binding.Name), Namespace: clusterlifecycle.Namespace(cluster.Name),
			Labels:      map[string]string{workobjects.LabelBindingUID: string(binding.UID)},
			Annotations: annotations,
			Finalizers:  []string{workv1alpha1.ExecutionFinalizer},
		},
		Spec: workv1alpha1.WorkSpec{
			Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			// The binding's policy's, merged with those of the workloads
			// that need the object there (propagateDeps), safest first; the
			// CRD's defaults spelled out so a stored Work compares equal.
			SuspendDispatching:          result.Settings.SuspendDispatching,
			PreserveResourcesOnDeletion: result.Settings.PreserveResourcesOnDeletion,
			ApplyStrategy:               result.Settings.ApplyStrategy,
			ConflictResolution:          result.Settings.ConflictResolution,
		},
	}, result, nil
}

// WorkKey is the namespace/name of the binding's Work for cluster, as
// Work names it (the informer cache's key).
func WorkKey(binding *workv1alpha1.ResourceBinding, cluster string) string {
	return clusterlifecycle.Namespace(cluster) + "/" + workobjects.WorkName(binding.Namespace, binding.Name)
}

// OptionalAnnotations are the Work annotations Work sets only when it has
// something to record (applied overrides, carried state): a stored Work
// that has one the rendered Work lacks must lose it.
func OptionalAnnotations() []string {
	return []string{overrides.AnnotationAppliedOverrides, workv1alpha1.AnnotationPreservedLabelState}
}

// scheduled is the cluster's entry in the scheduling result.
func scheduled(binding *workv1alpha1.ResourceBinding, cluster string) (workv1alpha1.TargetCluster, bool) {
	for _, t := range binding.Spec.Clusters {
		if t.Name == cluster {
			return t, true
		}
	}
	return workv1alpha1.TargetCluster{}, false
}

// cleanManifest drops what the hub's copy may carry but a member must not
// receive: status and server-set metadata.
func cleanManifest(obj *unstructured.Unstructured) {
	unstructured.RemoveNestedField(obj.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink", "ownerReferences", "deletionTimestamp"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}
