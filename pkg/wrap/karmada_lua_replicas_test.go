package wrap

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// The first example of Karmada's interpreter guide, `return
// obj.spec.replicas, {}`, converts to replicas `object.spec.replicas` and
// no podTemplate (no requirements), and reads a Deployment's replicas.
func TestKarmadaGuideEmptyRequirements(t *testing.T) {
	const file = "testdata/karmada-interpreters-guide/empty-requirements.yaml"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Wrap([]Input{{Name: file, Data: data}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unsupported) > 0 || len(res.Objects) != 1 {
		t.Fatalf("unsupported %v, %d objects", res.Unsupported, len(res.Objects))
	}
	var ric configv1alpha1.ResourceInterpreterCustomization
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Objects[0].Object, &ric); err != nil {
		t.Fatal(err)
	}
	want := &configv1alpha1.ReplicaResourceRequirement{Replicas: "object.spec.replicas"}
	if got := ric.Spec.Customizations.ReplicaResource; got == nil || *got != *want {
		t.Fatalf("replicaResource %+v, want %+v", got, want)
	}
	rules, errs := customization.Compile(&ric)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if n, err := rules.Replicas.EvalInt(map[string]any{"spec": map[string]any{"replicas": int64(3)}}); err != nil || n != 3 {
		t.Errorf("replicas %d %v, want 3", n, err)
	}
	if rules.PodTemplate != nil {
		t.Errorf("a podTemplate rule for empty requirements")
	}
}

// Trivial variants of GetReplicas convert, or are reported with a reason.
func TestReplicaResourceLuaVariants(t *testing.T) {
	cases := []struct {
		name, script       string
		replicas, template string
		reason             string
	}{
		{name: "empty table", script: "function GetReplicas(obj)\n  return obj.spec.replicas, {}\nend", replicas: "object.spec.replicas"},
		{name: "through a local", script: "function GetReplicas(obj)\n  local r = obj.spec.replicas\n  return r, {}\nend", replicas: "object.spec.replicas"},
		{name: "through globals, as the guide's full example names them", script: "function GetReplicas(obj)\n  replica = obj.spec.replicas\n  requirement = {}\n  return replica, requirement\nend",
			replicas: "object.spec.replicas"},
		{name: "nil requirements", script: "function GetReplicas(obj)\n  return obj.spec.replicas, nil\nend", replicas: "object.spec.replicas"},
		{name: "replicas only", script: "function GetReplicas(obj)\n  return obj.spec.replicas\nend", replicas: "object.spec.replicas"},
		{name: "a literal count", script: "function GetReplicas(obj)\n  return 1, {}\nend", replicas: "1"},
		{name: "same empty requirements on both branches", script: "function GetReplicas(obj)\n  if obj.spec.replicas == nil then\n    return 1, {}\n  end\n  return obj.spec.replicas, {}\nend",
			replicas: "(!has(object.spec.replicas)) ? 1 : object.spec.replicas"},
		{name: "pod requirements", script: "local kube = require(\"kube\")\nfunction GetReplicas(obj)\n  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)\nend",
			replicas: "object.spec.replicas", template: "object.spec.template"},
		{name: "requirements written by hand", script: "function GetReplicas(obj)\n  return obj.spec.replicas, {resourceRequest = {cpu = \"100m\"}}\nend",
			reason: "it builds requirements other than kube.accuratePodRequirements(a pod template), {} or nil (Flotilla reads a replica's requirements from a pod template)"},
		{name: "empty on one branch only", script: "local kube = require(\"kube\")\nfunction GetReplicas(obj)\n  if obj.spec.template == nil then\n    return obj.spec.replicas, {}\n  end\n  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)\nend",
			reason: "it chooses between kube helper results"},
		{name: "arithmetic", script: "function GetReplicas(obj)\n  return obj.spec.replicas * 2, {}\nend", reason: "it uses arithmetic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			replicas, tmpl, _, err := convertReplicaResourceLua(c.script)
			if c.reason != "" {
				if err == nil || reason(err) != c.reason {
					t.Errorf("got %q %q %v, want reported: %s", replicas, tmpl, err, c.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if replicas != c.replicas || tmpl != c.template {
				t.Errorf("got %q, %q; want %q, %q", replicas, tmpl, c.replicas, c.template)
			}
			ric := &configv1alpha1.ResourceInterpreterCustomization{Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
				Target: configv1alpha1.CustomizationTarget{APIVersion: "apps/v1", Kind: "Deployment"},
				Customizations: configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{
					Replicas: replicas, PodTemplate: tmpl}}}}
			if errs := customization.Validate(ric); len(errs) > 0 {
				t.Errorf("does not compile: %v", errs.ToAggregate())
			}
		})
	}
}
