package resourceinterpreter

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
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
// template references and that must exist wherever obj runs: ConfigMaps and
// Secrets (volumes, projected volumes, env, envFrom, imagePullSecrets), the
// ServiceAccount (unless it is "default", which every namespace has) and
// PersistentVolumeClaims — Karmada's default dependencies interpreter. The
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
	optional := map[workv1alpha1.DependencyReference]bool{}
	for ref, required := range refs {
		if !required {
			optional[ref] = true
		}
	}
	return optional, nil
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
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, fmt.Errorf("%s %s: pod spec: %w", obj.GetKind(), obj.GetName(), err)
	}
	return podSpecReferences(&spec), nil
}

func podSpecReferences(spec *corev1.PodSpec) map[workv1alpha1.DependencyReference]bool {
	seen := map[workv1alpha1.DependencyReference]bool{}
	add := func(kind, name string, optional *bool) {
		if name == "" {
			return
		}
		ref := workv1alpha1.DependencyReference{APIVersion: "v1", Kind: kind, Name: name}
		seen[ref] = seen[ref] || optional == nil || !*optional
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add("ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional)
		}
		if v.Secret != nil {
			add("Secret", v.Secret.SecretName, v.Secret.Optional)
		}
		if v.PersistentVolumeClaim != nil {
			add("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName, nil)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("ConfigMap", s.ConfigMap.Name, s.ConfigMap.Optional)
				}
				if s.Secret != nil {
					add("Secret", s.Secret.Name, s.Secret.Optional)
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, e := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add("ConfigMap", r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add("Secret", r.Name, r.Optional)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name, e.SecretRef.Optional)
			}
		}
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name, nil)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa != "default" {
		add("ServiceAccount", sa, nil)
	}
	return seen
}

// SortDependencies returns the set's references in a stable order.
func SortDependencies(set map[workv1alpha1.DependencyReference]bool) []workv1alpha1.DependencyReference {
	if len(set) == 0 {
		return nil
	}
	out := make([]workv1alpha1.DependencyReference, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.APIVersion < b.APIVersion
	})
	return out
}
