package wrap

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/overrides"
)

// Karmada's fieldOverrider examples convert as they are, and the converted
// policies do to the wrapped ConfigMaps what Karmada's docs and e2e test say;
// what Karmada before v1.18 accepted and Flotilla refuses is reported.
func TestKarmadaFieldOverrider(t *testing.T) {
	res, objs := convertFile(t, "issue39-fieldoverrider.yaml", Options{})
	var unsupported []string
	for _, f := range res.Unsupported {
		unsupported = append(unsupported, f.Object+": "+f.Path+": "+f.Message)
	}
	wantUnsupported := []string{"OverridePolicy default/before-v1-18: spec.overrideRules[0].overriders.fieldOverrider[0]: sets both json and yaml (Karmada applies only yaml); set one, dropped"}
	if strings.Join(unsupported, "\n") != strings.Join(wantUnsupported, "\n") {
		t.Errorf("unsupported:\n%s\nwant\n%s", strings.Join(unsupported, "\n"), strings.Join(wantUnsupported, "\n"))
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "before-v1-18: spec.overrideRules[0].overriders.fieldOverrider[1].yaml[0]: the value of a remove operation dropped") {
		t.Errorf("no note on the remove's value: %v", res.Notes)
	}

	templates := map[string]*unstructured.Unstructured{}
	var cops []*policyv1alpha1.ClusterOverridePolicy
	var ops []*policyv1alpha1.OverridePolicy
	for _, o := range objs {
		switch x := o.(type) {
		case *workv1alpha1.ResourceTemplate:
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(x.Spec.Manifest.Raw); err != nil {
				t.Fatal(err)
			}
			templates[u.GetName()] = u
		case *policyv1alpha1.OverridePolicy:
			ops = append(ops, x)
		case *policyv1alpha1.ClusterOverridePolicy:
			cops = append(cops, x)
		default:
			t.Fatalf("unexpected %T", o)
		}
	}
	if len(templates) != 3 || len(ops) != 3 || len(cops) != 1 {
		t.Fatalf("%d templates, %d OverridePolicies, %d ClusterOverridePolicies", len(templates), len(ops), len(cops))
	}
	var old *policyv1alpha1.OverridePolicy
	var current []*policyv1alpha1.OverridePolicy
	for _, p := range ops {
		if p.Name == "before-v1-18" {
			old = p
		} else {
			current = append(current, p)
		}
	}
	if fo := old.Spec.OverrideRules[0].Overriders.FieldOverrider; len(fo) != 1 || fo[0].YAML[0].Operator != policyv1alpha1.OverriderOpRemove || len(fo[0].YAML[0].Value.Raw) != 0 {
		t.Errorf("before-v1-18 converted to %+v", old.Spec.OverrideRules[0].Overriders)
	}
	member1 := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}
	render := func(name string) string {
		t.Helper()
		obj := templates[name].DeepCopy()
		if _, err := overrides.Apply(obj, member1, cops, current); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var key string
		for k := range obj.Object["data"].(map[string]any) {
			key = k
		}
		s, _, _ := unstructured.NestedString(obj.Object, "data", key)
		return s
	}
	// The user guide's value is the string "3306" (the guide shows the
	// number; Karmada's JSONToYAML writes the string quoted, as here).
	if got := render("myconfigmap"); got != "app:\n  database:\n    port: \"3306\"\n" {
		t.Errorf("user guide: %q", got)
	}
	// The converted pre-v1.18 policy removes the port before the guide's
	// policy runs (policies apply in name order), so the guide's replace
	// then fails, naming its policy.
	if _, err := overrides.Apply(templates["myconfigmap"].DeepCopy(), member1, cops, ops); err == nil ||
		!strings.Contains(err.Error(), "OverridePolicy default/example: fieldOverrider yaml /data/config.yaml") {
		t.Errorf("want the guide's replace to fail on the removed port, got %v", err)
	}
	if got := render("example-config"); got != "database:\n  host: remote-db.example.com\n  port: \"3307\"\n" {
		t.Errorf("proposal: %q", got)
	}
	got := render("deploy-config")
	if !strings.Contains(got, `"replicas":5`) || !strings.Contains(got, `"name":"nginx-helper"`) || strings.Contains(got, `"image":"nginx:1.19.0"`) {
		t.Errorf("e2e JSON: %s", got)
	}
}
