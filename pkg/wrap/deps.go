package wrap

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Karmada's propagateDeps finds a workload's ConfigMaps, Secrets,
// ServiceAccounts and PersistentVolumeClaims among the native objects of
// its own apiserver. Flotilla's hub finds them among ResourceTemplates, so
// a dependency that is not wrapped is reported missing on the binding.
// noteMissingDeps says so at wrap time, for every workload in the input
// that a converted propagateDeps policy selects and whose dependency is not
// in the input.

// depRef is a dependency: an object of the workload's namespace.
type depRef struct {
	kind, name string
}

// podSpecOf returns a workload's pod spec: a Pod's own, a CronJob's job
// template's, and spec.template.spec of the others (Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job, ReplicationController and CRDs
// shaped like them).
func podSpecOf(obj *unstructured.Unstructured) (*corev1.PodSpec, bool) {
	path := []string{"spec", "template", "spec"}
	switch {
	case obj.GetAPIVersion() == "v1" && obj.GetKind() == "Pod":
		path = []string{"spec"}
	case obj.GetKind() == "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	m, ok, _ := unstructured.NestedMap(obj.Object, path...)
	if !ok {
		return nil, false
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	spec := &corev1.PodSpec{}
	if err := json.Unmarshal(data, spec); err != nil {
		return nil, false
	}
	return spec, true
}

// podDependencies lists what a pod spec references, as Karmada's default
// interpreter does (the default ServiceAccount is every namespace's own).
func podDependencies(spec *corev1.PodSpec) []depRef {
	seen := map[depRef]bool{}
	add := func(kind, name string) {
		if name != "" {
			seen[depRef{kind, name}] = true
		}
	}
	if sa := spec.ServiceAccountName; sa != "default" {
		add("ServiceAccount", sa)
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name)
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
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add("ConfigMap", src.ConfigMap.Name)
				}
				if src.Secret != nil {
					add("Secret", src.Secret.Name)
				}
			}
		}
	}
	containers := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name)
			}
		}
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
	}
	out := make([]depRef, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].name < out[j].name
	})
	return out
}

// depsPolicy is a converted policy with propagateDeps.
type depsPolicy struct {
	desc      string
	namespace string // "" for a ClusterPropagationPolicy
	selectors []policyv1alpha1.ResourceSelector
}

func (p depsPolicy) selects(obj *unstructured.Unstructured, namespace string) bool {
	if p.namespace != "" && p.namespace != namespace {
		return false
	}
	for _, s := range p.selectors {
		if s.APIVersion != obj.GetAPIVersion() || s.Kind != obj.GetKind() {
			continue
		}
		if s.Namespace != "" && s.Namespace != namespace {
			continue
		}
		if s.Name != "" && s.Name != obj.GetName() {
			continue
		}
		if s.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
			if err != nil || !sel.Matches(labels.Set(obj.GetLabels())) {
				continue
			}
		}
		return true
	}
	return false
}

// noteMissingDeps adds a note for each dependency of a wrapped workload,
// selected by a converted policy with propagateDeps, that the input does
// not hold.
func noteMissingDeps(converted []*unstructured.Unstructured, natives []*pending, res *Result) {
	var policies []depsPolicy
	for _, o := range converted {
		if o.GetKind() != "PropagationPolicy" && o.GetKind() != "ClusterPropagationPolicy" {
			continue
		}
		spec := policyv1alpha1.PropagationSpec{}
		data, err := json.Marshal(o.Object["spec"])
		if err != nil || json.Unmarshal(data, &spec) != nil || !spec.PropagateDeps {
			continue
		}
		ns := ""
		if o.GetKind() == "PropagationPolicy" {
			ns = o.GetNamespace()
		}
		policies = append(policies, depsPolicy{describe(o.GetKind(), o.GetNamespace(), o.GetName()), ns, spec.ResourceSelectors})
	}
	if len(policies) == 0 {
		return
	}
	type key struct{ namespace, kind, name string }
	have := map[key]bool{}
	for _, p := range natives {
		if p.obj.GetAPIVersion() == "v1" {
			have[key{p.namespace, p.obj.GetKind(), p.obj.GetName()}] = true
		}
	}
	noted := map[key]bool{}
	for _, p := range natives {
		if !p.namespaced {
			continue
		}
		var by *depsPolicy
		for i := range policies {
			if policies[i].selects(p.obj, p.namespace) {
				by = &policies[i]
				break
			}
		}
		if by == nil {
			continue
		}
		spec, ok := podSpecOf(p.obj)
		if !ok {
			continue
		}
		for _, d := range podDependencies(spec) {
			k := key{p.namespace, d.kind, d.name}
			if have[k] || noted[k] {
				continue
			}
			noted[k] = true
			res.Notes = append(res.Notes, fmt.Sprintf("%s needs %s %s (propagateDeps of %s), which is not in the input: "+
				"the hub propagates a dependency only from a ResourceTemplate of namespace %s, so wrap it too (%s)",
				describe(p.obj.GetKind(), p.namespace, p.obj.GetName()), d.kind, d.name, by.desc, p.namespace, p.src))
		}
	}
}
