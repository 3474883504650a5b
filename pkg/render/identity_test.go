package render

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/overrides"
)

// The hub's re-check of a rendered manifest, with the overrides applied by
// the real override code: any override that changes apiVersion, kind,
// namespace, name or generateName is refused and named; everything else
// passes.
func TestCheckIdentity(t *testing.T) {
	plaintext := func(op policyv1alpha1.OverriderOperator, path, value string) policyv1alpha1.Overriders {
		o := policyv1alpha1.PlaintextOverrider{Path: path, Operator: op}
		if value != "" {
			o.Value = apiextensionsv1.JSON{Raw: []byte(value)}
		}
		return policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{o}}
	}
	for _, c := range []struct {
		name       string
		overriders policyv1alpha1.Overriders
		namespaced bool // an OverridePolicy in the object's namespace rather than a ClusterOverridePolicy
		want       []string
	}{
		{name: "no override"},
		{name: "labels", overriders: plaintext(policyv1alpha1.OverriderOpAdd, "/metadata/labels", `{"name":"x"}`)},
		{name: "data", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/data/a", `"c"`), namespaced: true},
		{name: "labels overrider", overriders: policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
			{Operator: policyv1alpha1.OverriderOpAdd, Value: map[string]string{"name": "x", "namespace": "kube-system"}}}}},
		{name: "namespace replaced", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/metadata/namespace", `"kube-system"`),
			want: []string{`metadata.namespace "default" -> "kube-system"`, "ClusterOverridePolicy p: plaintext replace /metadata/namespace"}},
		{name: "namespace removed (cluster-scoped on the member)", overriders: plaintext(policyv1alpha1.OverriderOpRemove, "/metadata/namespace", ""),
			want: []string{`metadata.namespace "default" -> ""`}},
		{name: "namespace by a tenant's policy", namespaced: true, overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/metadata/namespace", `"other"`),
			want: []string{"OverridePolicy p: plaintext replace /metadata/namespace"}},
		{name: "name", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/metadata/name", `"coredns"`),
			want: []string{`metadata.name "settings" -> "coredns"`}},
		{name: "kind", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/kind", `"Secret"`),
			want: []string{`kind "ConfigMap" -> "Secret"`, "plaintext replace /kind"}},
		{name: "kind as a number", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/kind", `7`),
			want: []string{`kind "ConfigMap" -> ""`}},
		{name: "apiVersion", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/apiVersion", `"example.com/v1"`),
			want: []string{`apiVersion "v1" -> "example.com/v1"`}},
		{name: "generateName", overriders: plaintext(policyv1alpha1.OverriderOpAdd, "/metadata/generateName", `"x-"`),
			want: []string{`metadata.generateName "" -> "x-"`}},
		{name: "the whole metadata", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/metadata", `{"name":"settings","namespace":"kube-system"}`),
			want: []string{`metadata.namespace "default" -> "kube-system"`, "plaintext replace /metadata"}},
		{name: "whole metadata, same identity", overriders: plaintext(policyv1alpha1.OverriderOpReplace, "/metadata", `{"name":"settings","namespace":"default","labels":{"a":"b"}}`)},
		{name: "image predicate at the name", overriders: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{
			Predicate: &policyv1alpha1.ImagePredicate{Path: "/metadata/name"}, Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpReplace, Value: "evil"}}},
			want: []string{`metadata.name "settings" -> "settings:evil"`, "imageOverrider predicate /metadata/name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			template := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "settings", "namespace": "default"}, "data": map[string]any{"a": "b"}}}
			rendered := template.DeepCopy()
			spec := policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{Overriders: c.overriders}}}
			var cops []*policyv1alpha1.ClusterOverridePolicy
			var ops []*policyv1alpha1.OverridePolicy
			if c.namespaced {
				ops = append(ops, &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: spec})
			} else {
				cops = append(cops, &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec})
			}
			applied, err := overrides.Apply(rendered, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, cops, ops)
			if err != nil {
				t.Fatalf("applying overrides: %v", err)
			}
			err = checkIdentity(template, rendered, applied)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("identity kept, yet refused: %v", err)
				}
				return
			}
			if identity := (*IdentityError)(nil); !errors.As(err, &identity) {
				t.Fatalf("want an identity error, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestIdentityPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/apiVersion": true, "/kind": true, "/kind/x": true, "/metadata": true, "/metadata/": true,
		"/metadata/name": true, "/metadata/namespace": true, "/metadata/generateName": true, "/metadata/name/x": true,
		"/metadata/labels/name": false, "/metadata/names": false, "/kinds": false, "/spec/template/metadata/namespace": false,
		"/metadata~1name": false, "/spec/replicas": false,
	} {
		if got := identityPath(path); got != want {
			t.Errorf("identityPath(%q) = %v, want %v", path, got, want)
		}
	}
}
