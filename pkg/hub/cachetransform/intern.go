package cachetransform

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// The JSON decoder allocates every string of every object anew, and most
// strings of the hub's many objects are the same few: namespaces, label
// and annotation keys, cluster names, condition types, reasons and
// messages. Interning makes them share one copy. unique.Make's table is
// weak: a string no cached object uses any more is dropped from it, so
// interning values from users cannot grow it without bound.

// maxInterned is the longest string interned: long ones (a manifest in an
// annotation, a message listing clusters) are rarely shared and costly to
// hash.
const maxInterned = 128

func intern(s string) string {
	if s == "" || len(s) > maxInterned {
		return s
	}
	return unique.Make(s).Value()
}

func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

func internSlice(s []string) {
	for i := range s {
		s[i] = intern(s[i])
	}
}

func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	internSlice(m.Finalizers)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
}

func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Reason, c.Message = intern(c.Type), intern(c.Reason), intern(c.Message)
		c.Status = metav1.ConditionStatus(intern(string(c.Status)))
	}
}

func internTargets(ts []workv1alpha1.TargetCluster) {
	for i := range ts {
		ts[i].Name = intern(ts[i].Name)
	}
}

func internAggregated(items []workv1alpha1.AggregatedStatusItem) {
	for i := range items {
		it := &items[i]
		it.ClusterName, it.AppliedMessage = intern(it.ClusterName), intern(it.AppliedMessage)
		it.Health = workv1alpha1.ResourceHealth(intern(string(it.Health)))
	}
}

func internBinding(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) {
	r := &spec.Resource
	r.APIVersion, r.Kind, r.Namespace = intern(r.APIVersion), intern(r.Kind), intern(r.Namespace)
	internTargets(spec.Clusters)
	internConditions(status.Conditions)
	internAggregated(status.AggregatedStatus)
}

func internTemplateStatus(s *workv1alpha1.ResourceTemplateStatus) {
	internConditions(s.Conditions)
	internTargets(s.Clusters)
	internAggregated(s.AggregatedStatus)
}

// internStrings interns the repeated strings of the hub's numerous objects
// (templates, bindings, Works) in place; other objects keep theirs.
func internStrings(obj any) {
	switch o := obj.(type) {
	case *workv1alpha1.Work:
		internMeta(&o.ObjectMeta)
		internConditions(o.Status.Conditions)
		for i := range o.Status.ManifestStatuses {
			ms := &o.Status.ManifestStatuses[i]
			id := &ms.Identifier
			id.Group, id.Version, id.Kind, id.Resource, id.Namespace = intern(id.Group), intern(id.Version), intern(id.Kind), intern(id.Resource), intern(id.Namespace)
			ms.Health = workv1alpha1.ResourceHealth(intern(string(ms.Health)))
		}
	case *workv1alpha1.ResourceBinding:
		internMeta(&o.ObjectMeta)
		internBinding(&o.Spec, &o.Status)
	case *workv1alpha1.ClusterResourceBinding:
		internMeta(&o.ObjectMeta)
		internBinding(&o.Spec, &o.Status)
	case *workv1alpha1.ResourceTemplate:
		internMeta(&o.ObjectMeta)
		internTemplateStatus(&o.Status)
	case *workv1alpha1.ClusterResourceTemplate:
		internMeta(&o.ObjectMeta)
		internTemplateStatus(&o.Status)
	}
}

// Compact is Strip, then the interning of repeated strings.
func Compact(obj any) (any, error) {
	obj, err := Strip(obj)
	if err == nil {
		internStrings(obj)
	}
	return obj, err
}
