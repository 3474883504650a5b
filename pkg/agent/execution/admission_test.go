package execution

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAdmit(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	ns := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	crb := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	work := schema.GroupVersionKind{Group: "work.flotilla.io", Version: "v1alpha1", Kind: "Work"}
	root := schema.GroupVersionKind{Group: "flotilla.io", Version: "v1", Kind: "Thing"}
	lookalike := schema.GroupVersionKind{Group: "notflotilla.io", Version: "v1", Kind: "Thing"}
	tenant, admin := source{namespace: "team-a"}, source{}
	strict := newAdmission("agent-ns", nil, false)
	lenient := newAdmission("agent-ns", []string{"kube-system", "agent-ns"}, true)

	cases := []struct {
		name       string
		a          admission
		src        source
		gvk        schema.GroupVersionKind
		namespaced bool
		namespace  string
		objName    string
		want       string
	}{
		{"tenant object in its namespace", strict, tenant, cm, true, "team-a", "x", ""},
		{"tenant object in another namespace", strict, tenant, cm, true, "team-b", "x", RefusedNamespaceNotOfSource},
		{"tenant object in kube-system", strict, tenant, cm, true, "kube-system", "x", RefusedNamespaceNotOfSource},
		{"tenant cluster-scoped kind", strict, tenant, crb, false, "", "x", RefusedClusterScopedKind},
		{"tenant Namespace of its own name", strict, tenant, ns, false, "", "team-a", RefusedClusterScopedKind},
		{"tenant Flotilla kind in its namespace", strict, tenant, work, true, "team-a", "x", RefusedFlotillaKind},
		{"tenant Flotilla kind allowed by flag", lenient, tenant, work, true, "team-a", "x", ""},
		{"tenant whose own namespace is protected", strict, source{namespace: "kube-system"}, cm, true, "kube-system", "x", RefusedProtectedNamespace},
		{"admin cluster-scoped kind", strict, admin, crb, false, "", "x", ""},
		{"admin object in any namespace", strict, admin, cm, true, "team-b", "x", ""},
		{"admin object in kube-system", strict, admin, cm, true, "kube-system", "x", RefusedProtectedNamespace},
		{"admin object in kube-public", strict, admin, cm, true, "kube-public", "x", RefusedProtectedNamespace},
		{"admin object in kube-node-lease", strict, admin, cm, true, "kube-node-lease", "x", RefusedProtectedNamespace},
		{"admin object in flotilla-system", strict, admin, cm, true, "flotilla-system", "x", RefusedProtectedNamespace},
		{"admin object in the agent's namespace", strict, admin, cm, true, "agent-ns", "x", RefusedProtectedNamespace},
		{"admin Namespace kube-system", strict, admin, ns, false, "", "kube-system", RefusedProtectedNamespace},
		{"admin Namespace of the agent", strict, admin, ns, false, "", "agent-ns", RefusedProtectedNamespace},
		{"admin Namespace of a team", strict, admin, ns, false, "", "team-a", ""},
		{"admin object in kube-system allowed by flag", lenient, admin, cm, true, "kube-system", "x", ""},
		{"admin object in the agent's namespace allowed by flag", lenient, admin, cm, true, "agent-ns", "x", ""},
		{"flag allows only what it names", lenient, admin, cm, true, "kube-public", "x", RefusedProtectedNamespace},
		{"admin Flotilla subgroup kind", strict, admin, work, true, "team-a", "x", RefusedFlotillaKind},
		{"admin flotilla.io kind", strict, admin, root, false, "", "x", RefusedFlotillaKind},
		{"a group that only ends in flotilla.io", strict, admin, lookalike, false, "", "x", ""},
		{"admin Flotilla kind allowed by flag", lenient, admin, root, false, "", "x", ""},
	}
	for _, tc := range cases {
		got, err := tc.a.admit(tc.src, tc.gvk, tc.namespaced, tc.namespace, tc.objName)
		if got != tc.want || (got == "") != (err == nil) {
			t.Errorf("%s: admit = %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestDefaultNamespaceIsTheSources(t *testing.T) {
	if got := (source{namespace: "team-a"}).defaultNamespace(); got != "team-a" {
		t.Errorf("tenant default namespace = %q, want team-a", got)
	}
	if got := (source{}).defaultNamespace(); got != "default" {
		t.Errorf("cluster-scoped source default namespace = %q, want default", got)
	}
}

func TestProtectedNamespaces(t *testing.T) {
	got := ProtectedNamespaces("flotilla-system")
	if len(got) != 4 {
		t.Errorf("ProtectedNamespaces(flotilla-system) = %v, want the 4 system namespaces once", got)
	}
	if got := ProtectedNamespaces("agents"); len(got) != 5 || got[4] != "agents" {
		t.Errorf("ProtectedNamespaces(agents) = %v", got)
	}
}
