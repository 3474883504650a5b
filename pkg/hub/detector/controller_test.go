package detector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	policylisters "github.com/flotilla-io/flotilla/pkg/generated/listers/policy/v1alpha1"
)

// TestMatchPolicy: the policy an unclaimed template goes to, through the
// listers. Mirrors Karmada's e2e [ImplicitPriority] and [ExplicitPriority]
// PropagationPolicy/ClusterPropagationPolicy testing
// (test/e2e/suites/base/propagationpolicy_test.go,
// clusterpropagationpolicy_test.go).
func TestMatchPolicy(t *testing.T) {
	deploy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "nginx", "namespace": "default", "labels": map[string]any{"app": "nginx"}}}}
	byKind := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}
	byName := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}}
	byLabel := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: metav1.SetAsLabelSelector(map[string]string{"app": "nginx"})}}
	otherName := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other"}}
	pp := func(ns, name string, prio *int32, sel []policyv1alpha1.ResourceSelector) *policyv1alpha1.PropagationPolicy {
		return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: sel, Priority: prio}}
	}
	cpp := func(name string, prio *int32, sel []policyv1alpha1.ResourceSelector) *policyv1alpha1.ClusterPropagationPolicy {
		return &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: sel, Priority: prio}}
	}
	deleting := pp("default", "aaa-deleting", ptr.To[int32](100), byName)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, c := range []struct {
		name      string
		policies  []*policyv1alpha1.PropagationPolicy
		cpolicies []*policyv1alpha1.ClusterPropagationPolicy
		want      string // "ns/name" for a PropagationPolicy, "name" for a cluster-wide one, "" for none
	}{
		{"nothing selects", []*policyv1alpha1.PropagationPolicy{pp("default", "a", nil, otherName)}, nil, ""},
		{"namespaced wins over cluster-wide, whatever the priority",
			[]*policyv1alpha1.PropagationPolicy{pp("default", "low", nil, byKind)},
			[]*policyv1alpha1.ClusterPropagationPolicy{cpp("high", ptr.To[int32](100), byName)}, "default/low"},
		{"higher priority first", []*policyv1alpha1.PropagationPolicy{
			pp("default", "a", ptr.To[int32](1), byKind), pp("default", "b", ptr.To[int32](5), byKind)}, nil, "default/b"},
		// Karmada [ExplicitPriority] "high explicit/low priority/implicit priority".
		{"explicit priority before implicit", []*policyv1alpha1.PropagationPolicy{
			pp("default", "label-high", ptr.To[int32](2), byLabel), pp("default", "name-low", ptr.To[int32](1), byName), pp("default", "name", nil, byName)}, nil, "default/label-high"},
		// Karmada [ExplicitPriority] "same explicit priority": the name match.
		{"same priority: by name before by label", []*policyv1alpha1.PropagationPolicy{
			pp("default", "alpha", ptr.To[int32](3), byLabel), pp("default", "zeta", ptr.To[int32](3), byName)}, nil, "default/zeta"},
		// Karmada [ImplicitPriority] priorityMatchName/Label/All.
		{"same priority: by label before by kind", []*policyv1alpha1.PropagationPolicy{
			pp("default", "alpha", nil, byKind), pp("default", "zeta", nil, byLabel)}, nil, "default/zeta"},
		{"same priority and precision: name order", []*policyv1alpha1.PropagationPolicy{
			pp("default", "zeta", nil, byName), pp("default", "alpha", nil, byName)}, nil, "default/alpha"},
		{"a policy being deleted selects nothing", []*policyv1alpha1.PropagationPolicy{deleting, pp("default", "b", nil, byKind)}, nil, "default/b"},
		{"a policy of another namespace never selects", []*policyv1alpha1.PropagationPolicy{
			pp("other", "a", nil, []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default"}})},
			[]*policyv1alpha1.ClusterPropagationPolicy{cpp("fallback", nil, byKind)}, "fallback"},
		{"cluster-wide by priority", nil, []*policyv1alpha1.ClusterPropagationPolicy{
			cpp("a", nil, byKind), cpp("b", ptr.To[int32](2), byKind)}, "b"},
		// Karmada [ImplicitPriority] ClusterPropagationPolicy testing.
		{"cluster-wide: by name before by label before by kind", nil, []*policyv1alpha1.ClusterPropagationPolicy{
			cpp("a", nil, byKind), cpp("b", nil, byLabel), cpp("c", nil, byName)}, "c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ppIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			cppIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, p := range c.policies {
				_ = ppIndexer.Add(p)
			}
			for _, p := range c.cpolicies {
				_ = cppIndexer.Add(p)
			}
			ctl := &Controller{policies: policylisters.NewPropagationPolicyLister(ppIndexer),
				clusterPolicies: policylisters.NewClusterPropagationPolicyLister(cppIndexer)}
			d := DecideClaim(nil, ctl.candidates("default", deploy))
			got := ""
			if d.Winner != nil {
				got = d.Winner.Name
				if !d.Winner.Cluster() {
					got = d.Winner.Namespace + "/" + got
				}
				if d.Winner.Spec == nil {
					t.Error("the winner carries no spec")
				}
			}
			if got != c.want {
				t.Errorf("matched %q, want %q", got, c.want)
			}
		})
	}
}

// A tenant's PropagationPolicy never reaches a template of another
// namespace, not even by naming it with preemption Always: it is not a
// candidate there, so it neither takes nor contends for it.
func TestCandidatesStayInTheirNamespace(t *testing.T) {
	deploy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "nginx", "namespace": "default"}}}
	ppIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = ppIndexer.Add(&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "grab"},
		Spec: policyv1alpha1.PropagationSpec{Priority: ptr.To[int32](1000), Preemption: policyv1alpha1.PreemptAlways,
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}}}})
	cppIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = cppIndexer.Add(&policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fleet", UID: "fleet-uid"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}}})
	ctl := &Controller{policies: policylisters.NewPropagationPolicyLister(ppIndexer),
		clusterPolicies: policylisters.NewClusterPropagationPolicyLister(cppIndexer)}
	cands := ctl.candidates("default", deploy)
	if len(cands) != 1 || cands[0].Name != "fleet" {
		t.Fatalf("candidates %+v, want only ClusterPropagationPolicy fleet", cands)
	}
	d := DecideClaim(&PolicyRef{Name: "fleet", UID: "fleet-uid"}, cands)
	if d.Winner == nil || d.Winner.Name != "fleet" || d.Blocked != nil || d.Preempted != nil {
		t.Errorf("decision %+v: want fleet, nothing blocked or preempted", d)
	}
}
