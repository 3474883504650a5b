package conformance

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/binding"
)

func configMap(name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data}
}

func dataKey(u *unstructured.Unstructured, key string) string {
	s, _, _ := unstructured.NestedString(u.Object, "data", key)
	return s
}

func raw(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// Karmada: test/e2e/suites/base/overridepolicy_test.go, Context("[FieldOverrider]
// apply field overrider testing to update JSON values in ConfigMap"),
// It("should override JSON field in ConfigMap").
func TestKarmada_OverridePolicy_FieldOverrider_JSONInConfigMap(t *testing.T) {
	deploy := `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "nginx-deploy", "namespace": "default"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
    "template": {"metadata": {"labels": {"app": "nginx"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.19.0"}]}}}
}`
	overrideCase(t, configMap("configmap-json", map[string]any{"deploy.json": deploy}), policyv1alpha1.Overriders{FieldOverrider: []policyv1alpha1.FieldOverrider{{
		FieldPath: "/data/deploy.json",
		JSON: []policyv1alpha1.JSONPatchOperation{
			{SubPath: "/spec/replicas", Operator: policyv1alpha1.OverriderOpReplace, Value: raw(`5`)},
			{SubPath: "/spec/template/spec/containers/-", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`{"name": "nginx-helper", "image": "nginx:1.19.1"}`)},
			{SubPath: "/spec/template/spec/containers/0/image", Operator: policyv1alpha1.OverriderOpRemove},
		},
	}}}, true, func(u *unstructured.Unstructured) bool {
		s := dataKey(u, "deploy.json")
		return strings.Contains(s, `"replicas":5`) && strings.Contains(s, `"name":"nginx-helper"`) && !strings.Contains(s, `"image":"nginx:1.19.0"`)
	})
}

// Karmada: overridepolicy_test.go, Context("[FieldOverrider] apply field
// overrider testing to update YAML values in ConfigMap"), It("should
// override YAML field in ConfigMap").
func TestKarmada_OverridePolicy_FieldOverrider_YAMLInConfigMap(t *testing.T) {
	nginx := `
server:
  listen: 80
  server_name: localhost
  location /:
    root: /usr/share/nginx/html
    index: 
      - index.html
      - index.htm
  error_page:
    - code: 500
    - code: 502
    - code: 503
    - code: 504
  location /50x.html:
    root: /usr/share/nginx/html
`
	overrideCase(t, configMap("configmap-yaml", map[string]any{"nginx.yaml": nginx}), policyv1alpha1.Overriders{FieldOverrider: []policyv1alpha1.FieldOverrider{{
		FieldPath: "/data/nginx.yaml",
		YAML: []policyv1alpha1.YAMLPatchOperation{
			{SubPath: "/server/location ~1/root", Operator: policyv1alpha1.OverriderOpReplace, Value: raw(`"/var/www/html"`)},
			{SubPath: "/server/error_page/-", Operator: policyv1alpha1.OverriderOpAdd, Value: raw(`{"code": 400}`)},
			{SubPath: "/server/location ~1/index", Operator: policyv1alpha1.OverriderOpRemove},
		},
	}}}, true, func(u *unstructured.Unstructured) bool {
		s := dataKey(u, "nginx.yaml")
		return strings.Contains(s, "root: /var/www/html") && strings.Contains(s, "code: 400") && !strings.Contains(s, "- index.html")
	})
}

// Not in Karmada's suite: a fieldOverrider that cannot apply (its field
// holds no YAML) is reported on the binding with the policy, the field and
// the reason, and no Work carries a half-overridden copy; fixing the
// template lets it apply.
func TestFieldOverrider_UnparsableFieldIsReported(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(1)
	cm := configMap("configmap-broken", map[string]any{"config.yaml": "a: [1\n"})
	u := &unstructured.Unstructured{Object: cm}
	sel := selector(u.GetAPIVersion(), u.GetKind(), u.GetName())
	c.policy(u.GetName(), policyv1alpha1.PropagationSpec{ResourceSelectors: sel,
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	op := &policyv1alpha1.OverridePolicy{}
	op.Name, op.Namespace = u.GetName(), c.ns
	op.Spec = policyv1alpha1.OverrideSpec{ResourceSelectors: sel, OverrideRules: []policyv1alpha1.RuleWithCluster{{
		Overriders: policyv1alpha1.Overriders{FieldOverrider: []policyv1alpha1.FieldOverrider{{FieldPath: "/data/config.yaml",
			YAML: []policyv1alpha1.YAMLPatchOperation{{SubPath: "/a", Operator: policyv1alpha1.OverriderOpReplace, Value: raw(`2`)}}}}}}}}
	if _, err := c.fc.PolicyV1alpha1().OverridePolicies(c.ns).Create(c.ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := c.template(cm)
	c.waitEvent(binding.EventApplyOverrideFailed, "fieldOverrider yaml /data/config.yaml: the field is not YAML")
	if w, _ := c.work(members[0], tmpl); w != nil {
		t.Fatalf("a Work was written for an object whose override failed")
	}
	c.updateTemplate(u.GetName(), func(obj *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(obj.Object, "a: 1\n", "data", "config.yaml")
	})
	c.waitPresent(tmpl, members, func(u *unstructured.Unstructured) bool { return dataKey(u, "config.yaml") == "a: 2\n" })
}
