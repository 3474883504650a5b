package manifeststest

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	agentapp "github.com/flotilla-io/flotilla/agent/app"
)

// The leader-capable agent pods keep their renewed hub token in a member
// Secret (pkg/agent/hubtoken): the kustomization makes that Secret (RBAC
// cannot limit create by name), lets the agent's ServiceAccount get and
// update that one Secret, and gives the DNS probe's ServiceAccount nothing
// of it.
func TestAgentMayPersistItsHubTokenOnly(t *testing.T) {
	objs := render(t, filepath.Join("kustomize/agent/overlays", agentOverlayForClusters))
	d := &appsv1.Deployment{}
	get(t, objs, "Deployment", agentDeploymentName, d)
	name := agentapp.NewOptions().HubTokenSecret
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--hub-token-secret="); ok {
				name = v
			}
		}
	}
	if name == "" {
		t.Fatal("the agent Deployment persists no hub token (--hub-token-secret is empty): a restart after the kubeconfig token expired would fail")
	}
	get(t, objs, "Secret", name, &corev1.Secret{})
	rule := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}}}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if ok, missing := rbacvalidation.Covers(boundRules(t, objs, d.Namespace, sa, d.Namespace), rule); !ok {
		t.Errorf("the agent (ServiceAccount %s/%s) cannot keep its hub token in Secret %s: missing %v", d.Namespace, sa, name, missing)
	}
	ds := &appsv1.DaemonSet{}
	get(t, objs, "DaemonSet", dnsProbeDaemonSetName, ds)
	probe := ds.Spec.Template.Spec.ServiceAccountName
	if ok, _ := rbacvalidation.Covers(boundRules(t, objs, ds.Namespace, probe, ds.Namespace),
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get"}}}); ok {
		t.Errorf("the DNS probe (ServiceAccount %s) may read the hub token", probe)
	}
}
