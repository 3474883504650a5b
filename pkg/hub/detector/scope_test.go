package detector

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestScopeProblem(t *testing.T) {
	obj := func(apiVersion, kind, ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x"}}}
		if ns != "" {
			u.SetNamespace(ns)
		}
		return u
	}
	const unknown, namespaced, clusterScoped = 0, 1, 2
	for _, c := range []struct {
		name        string
		templateNS  string
		obj         *unstructured.Unstructured
		scope       int
		wantProblem string // "" when the template may hold the object
	}{
		{"namespaced object of the template's namespace", "team-a", obj("v1", "ConfigMap", "team-a"), namespaced, ""},
		{"kind the host does not know", "team-a", obj("example.com/v1", "Widget", "team-a"), unknown, ""},
		{"cluster-scoped kind in a ResourceTemplate", "team-a", obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "team-a"), clusterScoped,
			"spec.manifest.kind: rbac.authorization.k8s.io/v1 ClusterRoleBinding is cluster-scoped"},
		{"object of another namespace", "team-a", obj("v1", "ConfigMap", "kube-system"), namespaced,
			`spec.manifest.metadata.namespace "kube-system" is not the template's namespace "team-a"`},
		{"unknown kind of another namespace", "team-a", obj("example.com/v1", "Widget", "team-b"), unknown, `"team-b" is not the template's namespace`},
		{"cluster-scoped object in a ClusterResourceTemplate", "", obj("v1", "Namespace", ""), clusterScoped, ""},
		{"unknown kind in a ClusterResourceTemplate", "", obj("example.com/v1", "Widget", ""), unknown, ""},
		{"namespaced kind in a ClusterResourceTemplate", "", obj("apps/v1", "Deployment", ""), namespaced,
			"spec.manifest.kind: apps/v1 Deployment is namespaced"},
		{"namespace in a ClusterResourceTemplate", "", obj("v1", "Namespace", "default"), clusterScoped,
			`spec.manifest.metadata.namespace "default": a ClusterResourceTemplate holds a cluster-scoped object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := scopeProblem(c.templateNS, c.obj, c.scope == namespaced, c.scope != unknown)
			if c.wantProblem == "" {
				if got != "" {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if !strings.Contains(got, c.wantProblem) {
				t.Fatalf("problem %q, want it to say %q", got, c.wantProblem)
			}
		})
	}
}
