package cachetransform

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"

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

// maxInternedValue is the longest label or annotation value interned. Those
// are longer and still shared: the scheduler's record of the placement it
// scheduled (~450 bytes) is the same on every binding of a policy.
const maxInternedValue = 4096

// maxSharedMaps bounds the label and annotation maps kept for sharing
// (a few hundred bytes each). A map no recent object had is only evicted,
// so a tenant writing many distinct labels cannot grow it.
const maxSharedMaps = 4096

// sharedMaps holds recently cached label and annotation maps by content.
// Objects with equal maps share one: the bindings of a policy carry the
// same labels and annotations, the Works of a binding the same labels. A
// small Go map costs ~300 bytes whatever its few entries hold. Sharing is
// safe because a cached object is never changed in place (client-go's
// contract, and DeepCopy copies maps).
var sharedMaps = lru.New(maxSharedMaps)

// sharedSpecs holds recently cached parts of binding specs by content: the
// placement (copied from the policy into each of its bindings) and the
// replica requirements (the same for workloads of one shape). Decoded,
// a placement takes about a kilobyte; the bindings of a policy share one.
var sharedSpecs = lru.New(maxSharedMaps)

// share returns the cached *T equal to p (by its JSON, under kind), or
// keeps p for the next equal one. Like the maps, shared parts rely on
// cached objects never being changed in place.
func share[T any](kind string, p *T) *T {
	if p == nil {
		return nil
	}
	raw, err := json.Marshal(p)
	if err != nil || len(raw) > maxInternedValue {
		return p
	}
	key := kind + "\x00" + string(raw)
	if shared, ok := sharedSpecs.Get(key); ok {
		return shared.(*T)
	}
	sharedSpecs.Add(key, p)
	return p
}

func intern(s string) string {
	return internUpTo(s, maxInterned)
}

func internUpTo(s string, limit int) string {
	if s == "" || len(s) > limit {
		return s
	}
	return unique.Make(s).Value()
}

func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key, shareable := mapKey(m)
	if shareable {
		if shared, ok := sharedMaps.Get(key); ok {
			return shared.(map[string]string)
		}
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = internUpTo(v, maxInternedValue)
	}
	if shareable {
		sharedMaps.Add(key, out)
	}
	return out
}

// mapKey encodes a map's content injectively (each key and value with its
// length first, keys sorted). Maps past maxInternedValue in all are not
// shared: rarely equal, costly to key.
func mapKey(m map[string]string) (string, bool) {
	size := 0
	for k, v := range m {
		size += len(k) + len(v)
	}
	if size > maxInternedValue {
		return "", false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size + 8*len(m))
	for _, k := range keys {
		for _, s := range []string{k, m[k]} {
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
	}
	return b.String(), true
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
	spec.Placement = share("placement", spec.Placement)
	spec.ReplicaRequirements = share("replicaRequirements", spec.ReplicaRequirements)
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
