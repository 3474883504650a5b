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

package resourceinterpreter

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var rolloutGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}

func u(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func rolloutRIC(name string, rules configv1alpha1.CustomizationRules) *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
			Customizations: rules,
		},
	}
}

// rolloutRules is a customization of every operation for Argo Rollouts.
var rolloutRules = configv1alpha1.CustomizationRules{
	Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/paused"}},
	ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{
		Replicas: "object.spec.?replicas.orValue(1)", PodTemplate: "object.spec.template"},
	ReplicaRevision:  &configv1alpha1.ReplicaRevision{ReplicasPath: "/spec/replicas"},
	StatusReflection: &configv1alpha1.StatusReflection{Expression: `{"phase": object.status.phase, "availableReplicas": object.status.?availableReplicas.orValue(0)}`},
	StatusAggregation: &configv1alpha1.StatusAggregation{Expression: `{"availableReplicas": statuses.map(s, s.status.?availableReplicas.orValue(0)).sum(),
		"clusters": dyn(statuses.map(s, s.clusterName))}`},
	HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: `object.status.phase == "Healthy" ? "Healthy" : object.status.phase == "Degraded" ? "Unhealthy" : "Unknown"`},
	DependencyInterpretation: &configv1alpha1.DependencyInterpretation{Expression: `has(object.spec.analysisTemplate) ?
		[{"apiVersion": dyn("argoproj.io/v1alpha1"), "kind": dyn("AnalysisTemplate"), "name": object.spec.analysisTemplate}] : []`},
}

const rollout = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"app","generation":2},
	"spec":{"replicas":5,"paused":false,"analysisTemplate":"success-rate","template":{"spec":{"containers":[{"name":"c","image":"i",
	  "resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}},
	"status":{"phase":"Healthy","availableReplicas":5,"observedGeneration":"2"}}`

func TestInterpreterCustomizationFirst(t *testing.T) {
	t.Parallel()
	i := New()
	obj := u(t, rollout)
	// Without a customization: the generic judgement (status has no
	// conditions and a string observedGeneration: nothing to judge).
	if h := i.Health(obj); h != workv1alpha1.ResourceUnknown {
		t.Fatalf("uncustomized health = %s", h)
	}
	if n, req, err := i.GetReplicas(obj); n != 0 || req != nil || err != nil {
		t.Fatalf("uncustomized replicas = %d %v %v", n, req, err)
	}
	i.Set(rolloutRIC("rollouts", rolloutRules))
	if h := i.Health(obj); h != workv1alpha1.ResourceHealthy {
		t.Fatalf("health = %s", h)
	}
	n, req, err := i.GetReplicas(obj)
	if err != nil || n != 5 || req == nil || req.ResourceRequest.Cpu().MilliValue() != 100 || req.ResourceRequest.Memory().Value() != 64<<20 {
		t.Fatalf("replicas = %d %v %v", n, req, err)
	}
	copy := obj.DeepCopy()
	if err := i.ReviseReplica(copy, 2); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedInt64(copy.Object, "spec", "replicas"); v != 2 {
		t.Fatalf("revised = %d", v)
	}
	if got := string(i.ReflectStatus(obj).Raw); got != `{"availableReplicas":5,"phase":"Healthy"}` {
		t.Fatalf("reflected = %s", got)
	}
	agg := i.AggregateStatus(rolloutGVK, []ClusterStatus{
		{"a", &runtime.RawExtension{Raw: []byte(`{"availableReplicas":2}`)}},
		{"b", &runtime.RawExtension{Raw: []byte(`{"availableReplicas":3}`)}},
		{"c", nil},
		{"d", &runtime.RawExtension{Raw: []byte(`[1]`)}},
	})
	if agg.Status == nil || string(agg.Status.Raw) != `{"availableReplicas":5,"clusters":["a","b"]}` ||
		len(agg.LeftOut) != 1 || agg.LeftOut[0].ClusterName != "d" {
		t.Fatalf("aggregated = %+v", agg)
	}
	deps, err := i.GetDependencies(obj)
	want := []workv1alpha1.DependencyReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "AnalysisTemplate", Name: "success-rate"}}
	if err != nil || !cmp.Equal(deps, want) {
		t.Fatalf("deps = %v %v", deps, err)
	}
	// Another apiVersion of the kind is not the target.
	other := obj.DeepCopy()
	other.SetAPIVersion("argoproj.io/v1beta1")
	if h := i.Health(other); h != workv1alpha1.ResourceUnknown {
		t.Fatalf("other version: %s", h)
	}
	// A rule that fails on the object: Unknown, never a panic.
	broken := u(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"x"}}`)
	if h := i.Health(broken); h != workv1alpha1.ResourceUnknown {
		t.Fatalf("no status: %s", h)
	}
	// ...and the built-in reflection for status (none here).
	if st := i.ReflectStatus(broken); st != nil {
		t.Fatalf("reflected %s", st.Raw)
	}
	i.Delete("rollouts")
	if h := i.Health(obj); h != workv1alpha1.ResourceUnknown {
		t.Fatalf("after delete: %s", h)
	}
}

func TestInterpreterInvalidFallsBack(t *testing.T) {
	t.Parallel()
	i := New()
	var changed []schema.GroupVersionKind
	var mu sync.Mutex
	i.OnChange(func(gvk schema.GroupVersionKind) { mu.Lock(); changed = append(changed, gvk); mu.Unlock() })
	i.Set(rolloutRIC("a-broken", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: "object.("}}))
	obj := u(t, rollout)
	if h := i.Health(obj); h != workv1alpha1.ResourceUnknown || i.Rules(rolloutGVK) != nil {
		t.Fatalf("broken customization used: %s", h)
	}
	// A valid one of the same kind is used even though the broken one
	// sorts first.
	i.Set(rolloutRIC("b-valid", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: "false"}}))
	if h := i.Health(obj); h != workv1alpha1.ResourceUnhealthy {
		t.Fatalf("valid customization not used: %s", h)
	}
	// Two valid ones: the first by name.
	i.Set(rolloutRIC("a-broken", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: "true"}}))
	if h := i.Health(obj); h != workv1alpha1.ResourceHealthy {
		t.Fatalf("first by name not used: %s", h)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changed) != 3 || changed[0] != rolloutGVK {
		t.Fatalf("changes = %v", changed)
	}
}

// TestInterpreterOverridesBuiltIn: a customization of a built-in kind
// replaces the built-in interpretation operation by operation.
func TestInterpreterOverridesBuiltIn(t *testing.T) {
	t.Parallel()
	i := New()
	i.Set(&configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "deployments"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "apps/v1", Kind: "Deployment"},
			Customizations: configv1alpha1.CustomizationRules{
				HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: `object.metadata.?annotations["healthy"].orValue("") == "yes"`},
			},
		},
	})
	d := u(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","generation":1,"annotations":{"healthy":"yes"}},
		"spec":{"replicas":3},"status":{"observedGeneration":1}}`)
	if h := i.Health(d); h != workv1alpha1.ResourceHealthy {
		t.Fatalf("customized = %s", h)
	}
	if h := Health(d); h != workv1alpha1.ResourceUnhealthy {
		t.Fatalf("built-in = %s", h)
	}
	if h := Default.Health(d); h != workv1alpha1.ResourceUnhealthy {
		t.Fatalf("nil interpreter = %s", h)
	}
	// Operations without a rule stay built-in.
	if n, _, err := i.GetReplicas(d); err != nil || n != 3 {
		t.Fatalf("replicas = %d %v", n, err)
	}
}

func TestRetainFields(t *testing.T) {
	t.Parallel()
	i := New()
	i.Set(rolloutRIC("r", configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LocalValueRetention{
		FieldPaths: []string{"/spec/replicas", "/metadata/annotations/hpa~1owner", "/spec/absent"}}}))
	desired := u(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web"},"spec":{"replicas":5,"absent":"template"}}`)
	live := u(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","annotations":{"hpa/owner":"x"}},"spec":{"replicas":9}}`)
	if !i.RetainFields(desired, live) {
		t.Fatal("nothing retained")
	}
	want := u(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","annotations":{"hpa/owner":"x"}},"spec":{"replicas":9,"absent":"template"}}`)
	if !cmp.Equal(desired.Object, want.Object) {
		t.Fatalf("retained:\n%s", cmp.Diff(want.Object, desired.Object))
	}
	// The live object is not aliased.
	unstructured.SetNestedField(live.Object, int64(1), "spec", "replicas")
	if v, _, _ := unstructured.NestedInt64(desired.Object, "spec", "replicas"); v != 9 {
		t.Fatal("aliased")
	}
	if Default.RetainFields(desired, live) {
		t.Fatal("nil interpreter retained")
	}
}

func TestGenericHealth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		obj  string
		want workv1alpha1.ResourceHealth
	}{
		{"custom resource without status", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generation":1}}`, workv1alpha1.ResourceUnknown},
		{"empty status", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generation":1},"status":{}}`, workv1alpha1.ResourceUnknown},
		{"only a phase", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generation":1},"status":{"phase":"Running"}}`, workv1alpha1.ResourceUnknown},
		{"observed current", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generation":2},"status":{"observedGeneration":2}}`, workv1alpha1.ResourceHealthy},
		{"observed behind", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generation":3},
			"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"True"}]}}`, workv1alpha1.ResourceUnknown},
		{"ready", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, workv1alpha1.ResourceHealthy},
		{"not ready", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`, workv1alpha1.ResourceUnhealthy},
		{"ready unknown", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`, workv1alpha1.ResourceUnknown},
		{"ready but not available", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},
			"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Available","status":"False"}]}}`, workv1alpha1.ResourceUnhealthy},
		{"stalled", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Stalled","status":"True"},{"type":"Ready","status":"True"}]}}`, workv1alpha1.ResourceUnhealthy},
		{"failed", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Failed","status":"True"}]}}`, workv1alpha1.ResourceUnhealthy},
		{"reconciling", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Reconciling","status":"True"}]}}`, workv1alpha1.ResourceUnknown},
		{"other conditions only", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":[{"type":"Synced","status":"True"}]}}`, workv1alpha1.ResourceUnknown},
		{"being deleted", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","deletionTimestamp":"2024-01-01T00:00:00Z"},
			"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, workv1alpha1.ResourceUnknown},
		{"configmap", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}`, workv1alpha1.ResourceHealthy},
		{"role", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"}}`, workv1alpha1.ResourceHealthy},
		{"namespace", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"},"status":{"phase":"Active"}}`, workv1alpha1.ResourceHealthy},
		{"hpa stalled", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"h"},
			"status":{"conditions":[{"type":"Stalled","status":"True"}]}}`, workv1alpha1.ResourceUnhealthy},
		{"gateway api is not Kubernetes' own", `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","metadata":{"name":"g"}}`, workv1alpha1.ResourceUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if h := Health(u(t, tc.obj)); h != tc.want {
				t.Fatalf("Health = %s, want %s", h, tc.want)
			}
		})
	}
}

// BenchmarkInterpreterHealth is the agent's per-manifest health with a
// customization: the lookup of the kind's rules and the evaluation.
func BenchmarkInterpreterHealth(b *testing.B) {
	i := New()
	i.Set(rolloutRIC("rollouts", rolloutRules))
	obj := u(b, rollout)
	b.ReportAllocs()
	for b.Loop() {
		if h := i.Health(obj); h != workv1alpha1.ResourceHealthy {
			b.Fatal(h)
		}
	}
}

// BenchmarkInterpreterReportManifest is what the agent computes for one
// manifest of a customized kind on each status report: health and the
// reflected status.
func BenchmarkInterpreterReportManifest(b *testing.B) {
	i := New()
	i.Set(rolloutRIC("rollouts", rolloutRules))
	obj := u(b, rollout)
	b.ReportAllocs()
	for b.Loop() {
		if i.Health(obj) != workv1alpha1.ResourceHealthy {
			b.Fatal("health")
		}
		raw := i.ReflectStatus(obj)
		if raw == nil || !json.Valid(raw.Raw) {
			b.Fatal("status")
		}
	}
}

// A customization's dependencies stay in the object's namespace, whatever
// the object (a tenant's) says: a rule that lets a field choose the
// namespace cannot pull another team's Secret onto the tenant's clusters.
func TestCustomizedDependenciesStayInTheObjectsNamespace(t *testing.T) {
	interp := New()
	interp.Set(rolloutRIC("deps", configv1alpha1.CustomizationRules{DependencyInterpretation: &configv1alpha1.DependencyInterpretation{
		Expression: `[{"apiVersion": dyn("v1"), "kind": dyn("Secret"), "name": object.spec.secretName, "namespace": object.spec.secretNamespace}]`}}))
	for _, tc := range []struct {
		ns      string
		wantErr bool
	}{{"app", false}, {"kube-system", true}, {"other-team", true}} {
		obj := u(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"app"},
			"spec":{"secretName":"db","secretNamespace":"`+tc.ns+`"}}`)
		deps, err := interp.GetDependencies(obj)
		if (err != nil) != tc.wantErr {
			t.Fatalf("namespace %s: dependencies %v, error %v; want an error: %v", tc.ns, deps, err, tc.wantErr)
		}
		if tc.wantErr && len(deps) != 0 {
			t.Fatalf("namespace %s: dependencies %v returned with the error", tc.ns, deps)
		}
	}
}
