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
	return podSpecDependencies(&spec), nil
}

func podSpecDependencies(spec *corev1.PodSpec) []workv1alpha1.DependencyReference {
	seen := map[workv1alpha1.DependencyReference]bool{}
	add := func(kind, name string) {
		if name != "" {
			seen[workv1alpha1.DependencyReference{APIVersion: "v1", Kind: kind, Name: name}] = true
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add("ConfigMap", v.ConfigMap.Name)
		}
		if v.Secret != nil {
			add("Secret", v.Secret.SecretName)
		}
		if v.PersistentVolumeClaim != nil {
			add("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("ConfigMap", s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add("Secret", s.Secret.Name)
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
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add("Secret", e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name)
			}
		}
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa != "default" {
		add("ServiceAccount", sa)
	}
	return SortDependencies(seen)
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
