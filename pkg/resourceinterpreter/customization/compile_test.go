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
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func ric(rules configv1alpha1.CustomizationRules) *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "rollouts"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
			Customizations: rules,
		},
	}
}

func health(expr string) configv1alpha1.CustomizationRules {
	return configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: expr}}
}

func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	// As an informer decodes it: integers are int64.
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// rolloutHealth is a typical health rule (Argo Rollouts' own notion:
// the controller saw the spec, every replica updated and available, not
// paused, not aborted).
const rolloutHealth = `has(object.status) && has(object.status.observedGeneration) &&
  string(object.metadata.generation) == string(object.status.observedGeneration) &&
  object.status.?phase.orValue("") != "Degraded" &&
  object.status.?updatedReplicas.orValue(0) == object.spec.?replicas.orValue(1) &&
  object.status.?availableReplicas.orValue(0) == object.spec.?replicas.orValue(1) &&
  !object.status.conditions.exists(c, c.type == "Progressing" && c.reason == "ProgressDeadlineExceeded")`

const healthyRollout = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"app","generation":3},
  "spec":{"replicas":4,"template":{"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"250m"}}}]}}},
  "status":{"observedGeneration":"3","phase":"Healthy","updatedReplicas":4,"availableReplicas":4,
    "conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"},
      {"type":"Healthy","status":"True"}]}}`

func TestCompileErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rules configv1alpha1.CustomizationRules
		field string
		want  string
	}{
		{"syntax", health("object.status.(("), "spec.customizations.healthInterpretation.expression", "compilation failed"},
		{"unknown variable", health("self.status.ready"), "spec.customizations.healthInterpretation.expression", "undeclared reference"},
		{"wrong result type", health("1 + 2"), "spec.customizations.healthInterpretation.expression", "must evaluate to a bool"},
		{"replicas not int", configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{Replicas: `"three"`}},
			"spec.customizations.replicaResource.replicas", "must evaluate to an int"},
		{"podTemplate not map", configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{Replicas: "1", PodTemplate: "[1]"}},
			"spec.customizations.replicaResource.podTemplate", "must evaluate to a map"},
		{"reflection list", configv1alpha1.CustomizationRules{StatusReflection: &configv1alpha1.StatusReflection{Expression: "[object]"}},
			"spec.customizations.statusReflection.expression", "must evaluate to a map"},
		{"aggregation uses object", configv1alpha1.CustomizationRules{StatusAggregation: &configv1alpha1.StatusAggregation{Expression: "object.status"}},
			"spec.customizations.statusAggregation.expression", "undeclared reference"},
		{"dependencies map", configv1alpha1.CustomizationRules{DependencyInterpretation: &configv1alpha1.DependencyInterpretation{Expression: "{'a': 1}"}},
			"spec.customizations.dependencyInterpretation.expression", "must evaluate to a list"},
		{"huge comprehension", health(`object.spec.a.all(x, object.spec.b.all(y, object.spec.c.all(z, x + y + z > 0)))`),
			"spec.customizations.healthInterpretation.expression", "exceeds the budget"},
		{"product of lists", health(`object.spec.a.map(x, object.spec.a.map(y, object.spec.a.map(z, [x, y, z]))).size() > 0`),
			"spec.customizations.healthInterpretation.expression", "exceeds the budget"},
		{"bad regex", health(`object.metadata.name.matches("(")`), "spec.customizations.healthInterpretation.expression", "compilation failed"},
		{"revision pointer", configv1alpha1.CustomizationRules{ReplicaRevision: &configv1alpha1.ReplicaRevision{ReplicasPath: "spec.replicas"}},
			"spec.customizations.replicaRevision.replicasPath", "JSON pointer"},
		{"revision of status", configv1alpha1.CustomizationRules{ReplicaRevision: &configv1alpha1.ReplicaRevision{ReplicasPath: "/status/replicas"}},
			"spec.customizations.replicaRevision.replicasPath", "status"},
		{"retain name", configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/replicas", "/metadata/name"}}},
			"spec.customizations.retention.fieldPaths[1]", "metadata.name"},
		{"retain bad escape", configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/metadata/annotations/a~2b"}}},
			"spec.customizations.retention.fieldPaths[0]", "RFC 6901"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules, errs := Compile(ric(tc.rules))
			if rules != nil || len(errs) != 1 {
				t.Fatalf("want exactly one error, got rules=%v errs=%v", rules, errs)
			}
			if errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("error %q: want field %s and %q", errs[0].Error(), tc.field, tc.want)
			}
		})
	}
}

func TestCompileTarget(t *testing.T) {
	t.Parallel()
	r := ric(health("true"))
	r.Spec.Target = configv1alpha1.CustomizationTarget{APIVersion: "a/b/c", Kind: ""}
	_, errs := Compile(r)
	if len(errs) != 2 || errs[0].Field != "spec.target.apiVersion" || errs[1].Field != "spec.target.kind" {
		t.Fatalf("errs = %v", errs)
	}
	r = ric(health("true"))
	r.Spec.Target.APIVersion = "flotilla.io/v1alpha1"
	if errs := Validate(r); len(errs) != 1 || errs[0].Field != "spec.target.apiVersion" {
		t.Fatalf("a Flotilla kind: errs = %v", errs)
	}
	if errs := Validate(ric(configv1alpha1.CustomizationRules{})); len(errs) != 1 || errs[0].Field != "spec.customizations" {
		t.Fatalf("no operation: errs = %v", errs)
	}
	if errs := Validate(ric(health(rolloutHealth))); len(errs) != 0 {
		t.Fatalf("valid: %v", errs)
	}
}

func TestCompileEveryOperation(t *testing.T) {
	t.Parallel()
	rules, errs := Compile(ric(configv1alpha1.CustomizationRules{
		Retention:            &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/replicas", "/metadata/annotations/a~1b"}},
		ReplicaResource:      &configv1alpha1.ReplicaResourceRequirement{Replicas: "object.spec.?replicas.orValue(1)", PodTemplate: "object.spec.template"},
		ReplicaRevision:      &configv1alpha1.ReplicaRevision{ReplicasPath: "/spec/replicas"},
		StatusReflection:     &configv1alpha1.StatusReflection{Expression: `{"phase": object.status.phase, "ready": object.status.availableReplicas}`},
		StatusAggregation:    &configv1alpha1.StatusAggregation{Expression: `{"availableReplicas": statuses.map(s, s.status.?ready.orValue(0)).sum()}`},
		HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: rolloutHealth},
		DependencyInterpretation: &configv1alpha1.DependencyInterpretation{Expression: `object.spec.template.spec.containers.
			filter(c, has(c.envFrom)).map(c, c.envFrom.filter(e, has(e.configMapRef)).map(e, {"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"), "name": e.configMapRef.name})).flatten()`},
	}))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	o := obj(t, healthyRollout)
	if h, err := rules.Health.EvalHealth(o); err != nil || h != workv1alpha1.ResourceHealthy {
		t.Fatalf("health = %s, %v", h, err)
	}
	if n, err := rules.Replicas.EvalInt(o); err != nil || n != 4 {
		t.Fatalf("replicas = %d, %v", n, err)
	}
	tmpl, err := rules.PodTemplate.EvalPodTemplate(o)
	if err != nil || tmpl.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
		t.Fatalf("pod template = %+v, %v", tmpl, err)
	}
	st, err := rules.StatusReflection.EvalMap(o)
	if err != nil || !cmp.Equal(st, map[string]any{"phase": "Healthy", "ready": int64(4)}) {
		t.Fatalf("reflected = %v, %v", st, err)
	}
	agg, err := rules.StatusAggregation.EvalMap([]any{
		map[string]any{"clusterName": "a", "status": map[string]any{"ready": int64(2)}},
		map[string]any{"clusterName": "b", "status": map[string]any{"ready": int64(3)}},
		map[string]any{"clusterName": "c", "status": map[string]any{}},
	})
	if err != nil || !cmp.Equal(agg, map[string]any{"availableReplicas": int64(5)}) {
		t.Fatalf("aggregated = %v, %v", agg, err)
	}
	deps, err := rules.Dependencies.EvalList(o)
	if err != nil || len(deps) != 0 {
		t.Fatalf("deps = %v, %v", deps, err)
	}
	if got := []string{rules.Retention[0].String(), rules.Retention[1].String()}; !cmp.Equal(got, []string{"/spec/replicas", "/metadata/annotations/a~1b"}) {
		t.Fatalf("retention = %v", got)
	}
	if rules.Retention[1][2] != "a/b" {
		t.Fatalf("unescaped = %q", rules.Retention[1][2])
	}
}

func TestEvalHealthAdversarial(t *testing.T) {
	t.Parallel()
	o := obj(t, healthyRollout)
	for _, tc := range []struct {
		name    string
		expr    string
		obj     map[string]any
		want    workv1alpha1.ResourceHealth
		wantErr string
	}{
		{"string result", `object.status.phase == "Healthy" ? "Healthy" : "Unknown"`, o, workv1alpha1.ResourceHealthy, ""},
		{"unknown string", `"Unknown"`, o, workv1alpha1.ResourceUnknown, ""},
		{"unhealthy", `object.status.availableReplicas > 10`, o, workv1alpha1.ResourceUnhealthy, ""},
		{"missing field", `object.status.nope == 1`, o, workv1alpha1.ResourceUnknown, "no such key: nope"},
		{"no status at all", `object.status.phase == "Healthy"`, obj(t, `{"metadata":{"name":"x"}}`), workv1alpha1.ResourceUnknown, "no such key: status"},
		{"other string", `object.status.phase`, obj(t, `{"status":{"phase":"Progressing"}}`), workv1alpha1.ResourceUnknown, `"Progressing" is not Healthy`},
		{"int result through dyn", `object.spec.replicas`, o, workv1alpha1.ResourceUnknown, "must evaluate to a bool"},
		{"division by zero", `object.spec.replicas / (object.spec.replicas - 4) > 0`, o, workv1alpha1.ResourceUnknown, "division by zero"},
		{"type mismatch", `object.spec.replicas == "4" || object.spec.replicas.startsWith("4")`, o, workv1alpha1.ResourceUnknown, "no such overload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules, errs := Compile(ric(health(tc.expr)))
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			h, err := rules.Health.EvalHealth(tc.obj)
			if h != tc.want {
				t.Errorf("health = %s, want %s", h, tc.want)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "spec.customizations.healthInterpretation.expression: ") {
				t.Errorf("err %q does not name the expression", err)
			}
		})
	}
}

// TestRuntimeCostLimit: an expression that passes the estimate (a loop)
// but runs over an object far larger than the assumption is stopped at
// the runtime limits (cost or time), quickly, and reads as Unknown.
func TestRuntimeCostLimit(t *testing.T) {
	t.Parallel()
	expr := `object.spec.items.all(x, x >= 0 && string(x) != "")`
	rules, errs := Compile(ric(health(expr)))
	if len(errs) != 0 {
		t.Fatalf("a loop must fit the budget: %v", errs)
	}
	if rules.Health.EstimatedCost > StaticCostBudget {
		t.Fatalf("estimate %d", rules.Health.EstimatedCost)
	}
	small := map[string]any{"spec": map[string]any{"items": ints(100)}}
	if h, err := rules.Health.EvalHealth(small); err != nil || h != workv1alpha1.ResourceHealthy {
		t.Fatalf("small object: %s, %v", h, err)
	}
	large := map[string]any{"spec": map[string]any{"items": ints(200000)}}
	start := time.Now()
	h, err := rules.Health.EvalHealth(large)
	elapsed := time.Since(start)
	if h != workv1alpha1.ResourceUnknown || !IsLimit(err) {
		t.Fatalf("large object: %s, %v", h, err)
	}
	if elapsed > 100*EvalTimeout {
		t.Fatalf("stopping at the cost limit took %s", elapsed)
	}
	t.Logf("stopped at the cost limit after %s: %v", elapsed, err)
}

// TestDeepNestingLooksEndless: deeply nested (but finite) expressions
// either compile within budget and finish, or are refused.
func TestDeepNestingLooksEndless(t *testing.T) {
	t.Parallel()
	// 40 nested ternaries over the same field: linear, fine.
	expr := "true"
	for i := 0; i < 40; i++ {
		expr = fmt.Sprintf("(object.spec.replicas > %d ? %s : false)", i-100, expr)
	}
	rules, errs := Compile(ric(health(expr)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if h, err := rules.Health.EvalHealth(obj(t, healthyRollout)); err != nil || h != workv1alpha1.ResourceHealthy {
		t.Fatalf("%s %v", h, err)
	}
	// Nested maps building a growing list: refused by the estimate.
	expr = `object.spec.a.map(x, object.spec.a.map(y, object.spec.a.map(z, object.spec.a))).size() > 0`
	if _, errs := Compile(ric(health(expr))); len(errs) != 1 || !strings.Contains(errs[0].Error(), "exceeds the budget") {
		t.Fatalf("errs = %v", errs)
	}
	// String doubling: the estimate cannot know, the runtime limit stops it.
	expr = `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20].all(i, object.metadata.name.size() > 0)`
	if _, errs := Compile(ric(health(expr))); len(errs) != 0 {
		t.Fatal(errs)
	}
}

func TestEvalResultConversion(t *testing.T) {
	t.Parallel()
	o := obj(t, healthyRollout)
	for _, tc := range []struct {
		expr    string
		want    map[string]any
		wantErr string
	}{
		{`{"q": dyn(quantity("250m").asApproximateFloat()), "t": dyn(timestamp("2024-01-01T00:00:00Z")), "n": dyn(null), "l": dyn([dyn(1), dyn("a"), dyn(true)])}`,
			map[string]any{"q": 0.25, "t": "2024-01-01T00:00:00Z", "n": nil, "l": []any{int64(1), "a", true}}, ""},
		{`{"d": duration("90s")}`, map[string]any{"d": "1m30s"}, ""},
		{`{1: "a"}`, nil, "not a string"},
		{`object.spec.replicas == 4 ? object.status : object`, map[string]any{"observedGeneration": "3", "phase": "Healthy",
			"updatedReplicas": int64(4), "availableReplicas": int64(4), "conditions": o["status"].(map[string]any)["conditions"]}, ""},
		{`object.spec.?nope.orValue({})`, map[string]any{}, ""},
		{`object.status.conditions[0]`, map[string]any{"type": "Available", "status": "True"}, ""},
		{`{"x": 1.0/0.0}`, nil, "not a JSON number"},
	} {
		rules, errs := Compile(ric(configv1alpha1.CustomizationRules{StatusReflection: &configv1alpha1.StatusReflection{Expression: tc.expr}}))
		if len(errs) != 0 {
			t.Fatalf("%s: %v", tc.expr, errs)
		}
		got, err := rules.StatusReflection.EvalMap(o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
	// A map rule that yields a list at runtime (dyn).
	rules, _ := Compile(ric(configv1alpha1.CustomizationRules{StatusReflection: &configv1alpha1.StatusReflection{Expression: "object.status.conditions"}}))
	if _, err := rules.StatusReflection.EvalMap(o); err == nil || !strings.Contains(err.Error(), "must evaluate to a map, got list") {
		t.Fatalf("err = %v", err)
	}
}

func TestEvalInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr    string
		want    int32
		wantErr string
	}{
		{"object.spec.replicas", 4, ""},
		{"uint(object.spec.replicas) * 2u", 8, ""},
		{"dyn(3.0)", 3, ""},
		{"dyn(double(object.spec.replicas) / 3.0)", 0, "not an integer"},
		{"-1", 0, "not a replica count"},
		{"4294967296", 0, "not a replica count"},
		{`object.metadata.name`, 0, "must evaluate to an int, got string"},
		{`object.spec.nope`, 0, "no such key"},
	} {
		rules, errs := Compile(ric(configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{Replicas: tc.expr}}))
		if len(errs) != 0 {
			t.Fatalf("%s: %v", tc.expr, errs)
		}
		n, err := rules.Replicas.EvalInt(obj(t, healthyRollout))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil || n != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.expr, n, err, tc.want)
		}
	}
}

func TestPointer(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"spec": map[string]any{"list": []any{map[string]any{"a": int64(1)}}}}
	p, _ := ParsePointer("/spec/list/0/a")
	if v, ok := p.Get(doc); !ok || v != int64(1) {
		t.Fatalf("get = %v %v", v, ok)
	}
	if err := p.Set(doc, int64(2)); err != nil {
		t.Fatal(err)
	}
	q, _ := ParsePointer("/spec/new/deep")
	if err := q.Set(doc, "x"); err != nil {
		t.Fatal(err)
	}
	if v, _ := q.Get(doc); v != "x" {
		t.Fatalf("set deep: %v", doc)
	}
	bad, _ := ParsePointer("/spec/list/5/a")
	if err := bad.Set(doc, 1); err == nil {
		t.Fatal("set past a list's end must fail")
	}
	for _, s := range []string{"/spec/list/01", "/spec/list/-1", "/nope"} {
		r, _ := ParsePointer(s)
		if _, ok := r.Get(doc); ok {
			t.Errorf("%s found", s)
		}
	}
	q.Delete(doc)
	if _, ok := q.Get(doc); ok {
		t.Fatal("delete")
	}
}

func ints(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// BenchmarkHealthRule is a typical health rule's evaluation (the Rollout
// rule above, on a healthy Rollout): goal ≤ 10 µs.
func BenchmarkHealthRule(b *testing.B) {
	rules, errs := Compile(ric(health(rolloutHealth)))
	if len(errs) != 0 {
		b.Fatal(errs)
	}
	o := obj(b, healthyRollout)
	b.ReportAllocs()
	for b.Loop() {
		if h, err := rules.Health.EvalHealth(o); err != nil || h != workv1alpha1.ResourceHealthy {
			b.Fatal(h, err)
		}
	}
}

// BenchmarkRuntimeCostLimit is the worst one evaluation can cost: an
// expression stopped at RuntimeCostLimit.
func BenchmarkRuntimeCostLimit(b *testing.B) {
	rules, errs := Compile(ric(health(`object.spec.items.all(x, x >= 0 && string(x) != "")`)))
	if len(errs) != 0 {
		b.Fatal(errs)
	}
	large := map[string]any{"spec": map[string]any{"items": ints(200000)}}
	for b.Loop() {
		if _, err := rules.Health.EvalHealth(large); !IsLimit(err) {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompile: compiling one customization (every informer event).
func BenchmarkCompile(b *testing.B) {
	r := ric(health(rolloutHealth))
	for b.Loop() {
		if _, errs := Compile(r); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}
