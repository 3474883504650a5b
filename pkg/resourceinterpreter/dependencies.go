package resourceinterpreter

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/podreferences"
)

// podSpecPaths is where each kind with a pod template keeps its pod spec.
var podSpecPaths = map[schema.GroupKind][]string{
	{Kind: "Pod"}:                        {"spec"},
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template", "spec"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template", "spec"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template", "spec"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template", "spec"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template", "spec"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template", "spec"},
}

// GetDependencies returns the objects of obj's own namespace that its pod
// template references and that must exist wherever obj runs
// (podreferences.Of: ConfigMaps and Secrets of volumes, projected volumes,
// env, envFrom, imagePullSecrets and volume credentials, the ServiceAccount
// unless it is "default", and PersistentVolumeClaims) — Karmada's default
// dependencies interpreter. The
// result is sorted and has no duplicates; a kind without a pod template has
// none. References carry no namespace: a pod can only use objects of its own.
func GetDependencies(obj *unstructured.Unstructured) ([]workv1alpha1.DependencyReference, error) {
	refs, err := podReferences(obj)
	if err != nil {
		return nil, err
	}
	return SortDependencies(refs), nil
}

// OptionalDependencies returns the dependencies obj references only as
// optional (a ConfigMap or Secret volume, env or envFrom with optional:
// true): they are propagated when they exist, and their absence is no
// problem, as for the kubelet.
func OptionalDependencies(obj *unstructured.Unstructured) (map[workv1alpha1.DependencyReference]bool, error) {
	refs, err := podReferences(obj)
	if err != nil {
		return nil, err
	}
	return optionalOnly(refs), nil
}

// optionalOnly keeps, of refs (each reference to whether it is required),
// the ones that are not required.
func optionalOnly(refs map[workv1alpha1.DependencyReference]bool) map[workv1alpha1.DependencyReference]bool {
	optional := map[workv1alpha1.DependencyReference]bool{}
	for ref, required := range refs {
		if !required {
			optional[ref] = true
		}
	}
	return optional
}

// podReferences maps each object obj's pod template references to whether
// some reference to it is required.
func podReferences(obj *unstructured.Unstructured) (map[workv1alpha1.DependencyReference]bool, error) {
	path, ok := podSpecPaths[obj.GroupVersionKind().GroupKind()]
	if !ok {
		return nil, nil
	}
	raw, found, err := unstructured.NestedMap(obj.Object, path...)
	if err != nil {
		return nil, fmt.Errorf("%s %s: pod spec: %w", obj.GetKind(), obj.GetName(), err)
	}
	if !found {
		return nil, nil
	}
	// The tenant's quantities are bounded before the conversion parses
	// them.
	if err := quantities.PodSpec.Check(raw, strings.Join(path, ".")); err != nil {
		return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, fmt.Errorf("%s %s: pod spec: %w", obj.GetKind(), obj.GetName(), err)
	}
	return podreferences.Of(&spec), nil
}

// SortDependencies returns the set's references in a stable order.
func SortDependencies(set map[workv1alpha1.DependencyReference]bool) []workv1alpha1.DependencyReference {
	return podreferences.Sorted(set)
}
