/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package customization

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

func dependencies(expr string) configv1alpha1.CustomizationRules {
	return configv1alpha1.CustomizationRules{DependencyInterpretation: &configv1alpha1.DependencyInterpretation{Expression: expr}}
}

func compileDependencies(t *testing.T, expr string) *Expression {
	t.Helper()
	rules, errs := Compile(ric(dependencies(expr)))
	if len(errs) != 0 {
		t.Fatalf("%s: %v", expr, errs)
	}
	return rules.Dependencies
}

// A CloneSet-like object whose template references one of everything.
const templated = `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","metadata":{"name":"web","namespace":"shop"},
 "spec":{"replicas":3,"template":{"metadata":{"labels":{"app":"web"}},"spec":{
  "serviceAccountName":"runner",
  "imagePullSecrets":[{"name":"pull"}],
  "volumes":[
   {"name":"a","configMap":{"name":"cm-vol"}},
   {"name":"b","secret":{"secretName":"sec-vol","optional":true}},
   {"name":"c","persistentVolumeClaim":{"claimName":"data"}},
   {"name":"d","projected":{"sources":[{"configMap":{"name":"cm-proj","optional":true}},{"secret":{"name":"sec-proj"}},{"serviceAccountToken":{"path":"t"}}]}},
   {"name":"e","csi":{"driver":"x","nodePublishSecretRef":{"name":"sec-csi"}}},
   {"name":"f","emptyDir":{}}],
  "initContainers":[{"name":"init","image":"busybox","args":["a","b"],"env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"sec-init","key":"k"}}}]}],
  "containers":[{"name":"app","image":"nginx","resources":{"requests":{"cpu":"100m"}},
   "env":[{"name":"A","value":"plain"},{"name":"B","valueFrom":{"configMapKeyRef":{"name":"cm-env","key":"k","optional":true}}},
          {"name":"C","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
   "envFrom":[{"configMapRef":{"name":"cm-envfrom"}},{"secretRef":{"name":"sec-envfrom"}},{"configMapRef":{"name":"cm-vol","optional":true}}]}],
  "ephemeralContainers":[{"name":"debug","image":"busybox","envFrom":[{"secretRef":{"name":"sec-debug"}}]}]}}}}`

func depRef(kind, name string, optional bool) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": kind, "name": name, "optional": optional}
}

// Every kind of reference, sorted, each once; optional only when every
// reference to the object is optional (cm-vol is required by its volume).
func TestPodTemplateDependencies(t *testing.T) {
	t.Parallel()
	e := compileDependencies(t, "podTemplateDependencies(object.spec.template)")
	got, cost, err := e.Eval(obj(t, templated))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		depRef("ConfigMap", "cm-env", true), depRef("ConfigMap", "cm-envfrom", false), depRef("ConfigMap", "cm-proj", true), depRef("ConfigMap", "cm-vol", false),
		depRef("PersistentVolumeClaim", "data", false),
		depRef("Secret", "pull", false), depRef("Secret", "sec-csi", false), depRef("Secret", "sec-debug", false), depRef("Secret", "sec-envfrom", false),
		depRef("Secret", "sec-init", false), depRef("Secret", "sec-proj", false), depRef("Secret", "sec-vol", true),
		depRef("ServiceAccount", "runner", false),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dependencies (-want +got):\n%s", d)
	}
	// The parts read are counted, the rest (image, args, resources) not.
	if cost < 50 || cost > 300 {
		t.Errorf("cost %d; want the size of the parts read (about a hundred)", cost)
	}
	t.Logf("cost %d", cost)

	// The rule's result composes with CEL like any list.
	e = compileDependencies(t, `podTemplateDependencies(object.spec.template).filter(r, r.kind == "Secret" && !r.optional).map(r, r.name)`)
	got, _, err = e.Eval(obj(t, templated))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]any{"pull", "sec-csi", "sec-debug", "sec-envfrom", "sec-init", "sec-proj"}, got); d != "" {
		t.Errorf("required Secrets (-want +got):\n%s", d)
	}
}

// Templates that are not pod templates: an error naming the function and
// the problem, or no dependencies when there is nothing to read.
func TestPodTemplateDependenciesGarbage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, expr, object string
		want               []any
		err                string
	}{
		{"no spec", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"metadata":{}}}}`, []any{}, ""},
		{"null spec", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"spec":null}}}`, []any{}, ""},
		{"empty spec", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"spec":{}}}}`, []any{}, ""},
		{"null template", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":null}}`, []any{}, ""},
		{"optional template absent", "podTemplateDependencies(object.spec.?template.orValue(null))", `{"spec":{}}`, []any{}, ""},
		{"missing template", "podTemplateDependencies(object.spec.template)", `{"spec":{}}`, nil, "no such key: template"},
		{"template not a map", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":"web"}}`, nil,
			"podTemplateDependencies: the pod template must be a map, got string"},
		{"template a list", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":[1]}}`, nil,
			"podTemplateDependencies: the pod template must be a map, got list"},
		{"spec not a map", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"spec":3}}}`, nil,
			"podTemplateDependencies: the pod template's spec must be a map, got int"},
		{"volumes not a list", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"spec":{"volumes":"a"}}}}`, nil,
			"podTemplateDependencies: not a pod template"},
		{"container not a map", "podTemplateDependencies(object.spec.template)", `{"spec":{"template":{"spec":{"containers":["a"]}}}}`, nil,
			"podTemplateDependencies: not a pod template"},
		{"map literal", `podTemplateDependencies({"spec": {"serviceAccountName": dyn("x"), "volumes": dyn([{"name": dyn("v"), "secret": dyn({"secretName": "s"})}])}})`, `{}`,
			[]any{depRef("Secret", "s", false), depRef("ServiceAccount", "x", false)}, ""},
		// Only the pod spec's fields are read: a workload passed whole
		// (its spec has none) has no dependencies.
		{"the whole object", "podTemplateDependencies(object)", `{"spec":{"replicas":2,"template":{"spec":{"serviceAccountName":"x"}}}}`, []any{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := compileDependencies(t, c.expr)
			got, _, err := e.Eval(obj(t, c.object))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, c.err)
				}
				if !strings.Contains(err.Error(), "spec.customizations.dependencyInterpretation.expression") {
					t.Errorf("the error does not name the field: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	// Not a function of anything else.
	if _, errs := Compile(ric(dependencies("podTemplateDependencies()"))); len(errs) == 0 {
		t.Error("podTemplateDependencies() compiled")
	}
}

// The static estimate counts the function at its fixed cost, so a rule
// using it fits the budget but one calling it once per entry of a list
// read from the object does not; at evaluation a huge template is counted
// at its size and stopped by the runtime limit.
func TestPodTemplateDependenciesCost(t *testing.T) {
	t.Parallel()
	e := compileDependencies(t, `podTemplateDependencies(object.spec.template) +
		object.spec.?extraSecrets.orValue([]).map(s, {"apiVersion": dyn("v1"), "kind": dyn("Secret"), "name": s})`)
	if e.EstimatedCost < PodTemplateDependenciesEstimatedCost || e.EstimatedCost > StaticCostBudget {
		t.Errorf("estimate %d; want at least the function's %d and within the budget", e.EstimatedCost, PodTemplateDependenciesEstimatedCost)
	}
	t.Logf("estimate %d", e.EstimatedCost)

	_, errs := Compile(ric(dependencies(`object.spec.subsets.map(s, podTemplateDependencies(s.template)).flatten()`)))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "exceeds the budget") ||
		errs[0].Field != "spec.customizations.dependencyInterpretation.expression" {
		t.Errorf("one call per entry of a list: %v; want refused over the budget", errs)
	}
	// The estimate applies wherever the function is used.
	if _, errs := Compile(ric(health(`object.spec.subsets.all(s, size(podTemplateDependencies(s.template)) < 3)`))); len(errs) != 1 {
		t.Errorf("in a health rule: %v; want refused over the budget", errs)
	}

	// 12 MB in one env value: a tenth of a unit per byte, over the limit.
	huge := obj(t, templated)
	tmpl := huge["spec"].(map[string]any)["template"].(map[string]any)
	c := tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["env"] = append(c["env"].([]any), map[string]any{"name": "BIG", "value": strings.Repeat("x", 12_000_000)})
	_, cost, err := compileDependencies(t, "podTemplateDependencies(object.spec.template)").Eval(huge)
	if !IsLimit(err) {
		t.Errorf("a 12 MB template: cost %d, %v; want stopped by the runtime cost limit", cost, err)
	}
	// Unread fields are not counted: the same string in args costs nothing.
	delete(c, "env")
	c["args"] = []any{strings.Repeat("x", 12_000_000)}
	if _, cost, err := compileDependencies(t, "podTemplateDependencies(object.spec.template)").Eval(huge); err != nil || cost > 300 {
		t.Errorf("a large unread field: cost %d, %v", cost, err)
	}
}

// BenchmarkPodTemplateDependencies: the dependency rule of a converted
// Kruise customization on a realistic template.
func BenchmarkPodTemplateDependencies(b *testing.B) {
	rules, errs := Compile(ric(dependencies("podTemplateDependencies(object.spec.template)")))
	if len(errs) != 0 {
		b.Fatal(errs)
	}
	o := obj(b, templated)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rules.Dependencies.EvalList(o); err != nil {
			b.Fatal(err)
		}
	}
}
