package wrap

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

const interpretersDir = "testdata/karmada-interpreters/"

// wrapCustomization converts one vendored Karmada customization and returns
// the Flotilla one (nil if none), the operations reported and the notes.
func wrapCustomization(t *testing.T, file string) (*configv1alpha1.ResourceInterpreterCustomization, []string, *Result) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(interpretersDir, file))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Wrap([]Input{{Name: file, Data: data}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	var reported []string
	for _, f := range res.Unsupported {
		op := strings.TrimSuffix(strings.TrimPrefix(f.Path, "spec.customizations."), ".luaScript")
		reported = append(reported, op)
		if f.Path != "" && !strings.Contains(f.Message, "Lua script not converted (") {
			t.Errorf("finding without a reason: %s", f)
		}
	}
	sort.Strings(reported)
	if len(res.Objects) == 0 {
		return nil, reported, res
	}
	if len(res.Objects) != 1 {
		t.Fatalf("%d objects", len(res.Objects))
	}
	var ric configv1alpha1.ResourceInterpreterCustomization
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Objects[0].Object, &ric); err != nil {
		t.Fatal(err)
	}
	return &ric, reported, res
}

func convertedOps(ric *configv1alpha1.ResourceInterpreterCustomization) []string {
	if ric == nil {
		return nil
	}
	c := ric.Spec.Customizations
	var ops []string
	for op, set := range map[string]bool{
		"retention": c.Retention != nil, "replicaResource": c.ReplicaResource != nil, "replicaRevision": c.ReplicaRevision != nil,
		"statusReflection": c.StatusReflection != nil, "statusAggregation": c.StatusAggregation != nil,
		"healthInterpretation": c.HealthInterpretation != nil, "dependencyInterpretation": c.DependencyInterpretation != nil,
	} {
		if set {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

// Karmada's shipped customizations (vendored unchanged): which operations
// convert and which are reported. Every converted customization compiles
// in Flotilla's CEL environment within the cost budget.
func TestKarmadaCustomizationsConvert(t *testing.T) {
	cases := []struct {
		file      string
		converted []string
		reported  []string
	}{
		// kube.getPodDependencies converts to podTemplateDependencies.
		{"apps.kruise.io_v1alpha1_CloneSet.yaml",
			[]string{"dependencyInterpretation", "healthInterpretation", "replicaResource", "replicaRevision", "statusReflection"},
			[]string{"statusAggregation"}},
		{"apps.kruise.io_v1alpha1_BroadcastJob.yaml",
			[]string{"dependencyInterpretation", "healthInterpretation", "replicaResource", "replicaRevision", "retention", "statusReflection"},
			[]string{"statusAggregation"}},
		{"apps.kruise.io_v1alpha1_UnitedDeployment.yaml",
			[]string{"dependencyInterpretation", "healthInterpretation", "replicaResource", "replicaRevision", "statusReflection"},
			[]string{"statusAggregation"}},
		// Its retention returns the object unchanged: nothing to keep.
		// Its dependencies use a local helper function.
		{"apps.kruise.io_v1alpha1_SidecarSet.yaml",
			[]string{"healthInterpretation", "replicaResource", "statusReflection"},
			[]string{"dependencyInterpretation", "statusAggregation"}},
		// Its requirements come from a table built field by field, its
		// dependencies from loops.
		{"argoproj.io_v1alpha1_Workflow.yaml",
			[]string{"healthInterpretation", "replicaRevision", "retention"},
			[]string{"dependencyInterpretation", "replicaResource"}},
		// Replicas add two roles' counts with arithmetic; health uses
		// helper tables and string.find.
		{"flink.apache.org_v1beta1_FlinkDeployment.yaml",
			[]string{"statusReflection"},
			[]string{"componentResource", "healthInterpretation", "replicaResource", "statusAggregation"}},
		// Health and dependencies loop over lists.
		{"helm.toolkit.fluxcd.io_v2beta1_HelmRelease.yaml",
			[]string{"retention", "statusReflection"},
			[]string{"dependencyInterpretation", "healthInterpretation", "statusAggregation"}},
		{"kyverno.io_v1_ClusterPolicy.yaml",
			[]string{"statusReflection"},
			[]string{"healthInterpretation", "statusAggregation"}},
		{"batch.volcano.sh_v1alpha1_Job.yaml",
			[]string{"healthInterpretation"},
			[]string{"componentResource", "statusAggregation", "statusReflection"}},
		// Nothing converts: nothing is emitted, and that is reported too.
		{"ray.io_v1_RayCluster.yaml",
			nil,
			[]string{"", "componentResource", "healthInterpretation", "statusAggregation"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			ric, reported, _ := wrapCustomization(t, c.file)
			if got := convertedOps(ric); !reflect.DeepEqual(got, c.converted) {
				t.Errorf("converted %v, want %v", got, c.converted)
			}
			if !reflect.DeepEqual(reported, c.reported) {
				t.Errorf("reported %v, want %v", reported, c.reported)
			}
			if ric == nil {
				return
			}
			if errs := customization.Validate(ric); len(errs) > 0 {
				t.Errorf("converted customization does not validate: %v", errs.ToAggregate())
			}
			if ric.Spec.Target.APIVersion == "" || ric.Spec.Target.Kind == "" || ric.Name == "" {
				t.Errorf("target or name lost: %+v %q", ric.Spec.Target, ric.Name)
			}
		})
	}
}

// The reported line names the object and the operation and says what to
// write instead.
func TestKarmadaCustomizationReportNamesOperation(t *testing.T) {
	_, _, res := wrapCustomization(t, "flink.apache.org_v1beta1_FlinkDeployment.yaml")
	var health string
	for _, f := range res.Unsupported {
		if f.Path == "spec.customizations.healthInterpretation.luaScript" {
			health = f.String()
		}
	}
	want := "ResourceInterpreterCustomization declarative-configuration-flinkdeployment: spec.customizations.healthInterpretation.luaScript: " +
		"Lua script not converted (it has top-level locals (ALLOWLIST)); write spec.customizations.healthInterpretation.expression (CEL)"
	if !strings.HasPrefix(health, want) {
		t.Errorf("got  %s\nwant %s (...)", health, want)
	}
}

func compiled(t *testing.T, file string) *customization.Rules {
	t.Helper()
	ric, _, _ := wrapCustomization(t, file)
	rules, errs := customization.Compile(ric)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return rules
}

// The converted rules mean what Karmada's scripts mean, on objects.
func TestKarmadaCloneSetRulesEvaluate(t *testing.T) {
	rules := compiled(t, "apps.kruise.io_v1alpha1_CloneSet.yaml")
	obj := func(gen, observed, replicas, updated, available int64) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": "c", "namespace": "ns", "generation": gen},
			"spec":     map[string]any{"replicas": replicas},
			"status": map[string]any{"observedGeneration": observed, "replicas": replicas,
				"updatedReplicas": updated, "availableReplicas": available},
		}
	}
	for _, c := range []struct {
		name string
		obj  map[string]any
		want workv1alpha1.ResourceHealth
	}{
		{"all updated and available", obj(2, 2, 3, 3, 3), workv1alpha1.ResourceHealthy},
		{"status of an older generation", obj(3, 2, 3, 3, 3), workv1alpha1.ResourceUnhealthy},
		{"rollout in progress", obj(2, 2, 3, 1, 1), workv1alpha1.ResourceUnhealthy},
		{"updated but not available", obj(2, 2, 3, 3, 2), workv1alpha1.ResourceUnhealthy},
		// Karmada's script fails on a missing status (indexing nil): Unknown.
		{"no status", map[string]any{"metadata": map[string]any{"generation": int64(1)}, "spec": map[string]any{}}, workv1alpha1.ResourceUnknown},
	} {
		got, _ := rules.Health.EvalHealth(c.obj)
		if got != c.want {
			t.Errorf("%s: health %s, want %s", c.name, got, c.want)
		}
	}
	// Without spec.replicas only availability counts, as in the script.
	noReplicas := obj(1, 1, 0, 2, 2)
	delete(noReplicas["spec"].(map[string]any), "replicas")
	if got, _ := rules.Health.EvalHealth(noReplicas); got != workv1alpha1.ResourceHealthy {
		t.Errorf("no spec.replicas: %s, want Healthy", got)
	}

	st, err := rules.StatusReflection.EvalMap(obj(2, 2, 3, 3, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"replicas": int64(3), "updatedReplicas": int64(3), "availableReplicas": int64(3), "observedGeneration": int64(2), "generation": int64(2)}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status %v, want %v", st, want)
	}
	if st, err := rules.StatusReflection.EvalMap(map[string]any{"metadata": map[string]any{"generation": int64(1)}}); err != nil || len(st) != 0 {
		t.Errorf("no status: %v %v, want an empty map", st, err)
	}

	n, err := rules.Replicas.EvalInt(obj(1, 1, 4, 0, 0))
	if err != nil || n != 4 {
		t.Errorf("replicas %d %v, want 4", n, err)
	}
	if got := rules.ReplicasPath.String(); got != "/spec/replicas" {
		t.Errorf("replicasPath %s", got)
	}

}

// kube.getPodDependencies(desiredObj.spec.template, namespace) converts to
// podTemplateDependencies(object.spec.template), within the cost budget,
// for every Kruise kind that declares it; on a CloneSet it gives exactly
// what the built-in interpreter gives for a Deployment with the same
// template, optional references included.
func TestKarmadaPodDependenciesConvert(t *testing.T) {
	for _, file := range []string{"apps.kruise.io_v1alpha1_CloneSet.yaml", "apps.kruise.io_v1alpha1_BroadcastJob.yaml",
		"apps.kruise.io_v1alpha1_UnitedDeployment.yaml"} {
		ric, _, res := wrapCustomization(t, file)
		for _, f := range res.Unsupported {
			if strings.HasPrefix(f.Path, "spec.customizations.dependencyInterpretation") {
				t.Errorf("%s: reported: %s", file, f)
			}
		}
		if ric == nil || ric.Spec.Customizations.DependencyInterpretation == nil {
			t.Fatalf("%s: dependencyInterpretation not converted", file)
		}
		if got, want := ric.Spec.Customizations.DependencyInterpretation.Expression, "podTemplateDependencies(object.spec.template)"; got != want {
			t.Errorf("%s: %s, want %s", file, got, want)
		}
	}

	interpreter := resourceinterpreter.New()
	ric, _, _ := wrapCustomization(t, "apps.kruise.io_v1alpha1_CloneSet.yaml")
	interpreter.Set(ric)
	const template = `{"metadata":{"labels":{"app":"web"}},"spec":{"serviceAccountName":"web",
	  "imagePullSecrets":[{"name":"registry"}],
	  "volumes":[{"name":"conf","configMap":{"name":"web-conf"}},{"name":"tls","secret":{"secretName":"web-tls","optional":true}},
	    {"name":"data","persistentVolumeClaim":{"claimName":"web-data"}},
	    {"name":"all","projected":{"sources":[{"secret":{"name":"web-token"}},{"configMap":{"name":"web-ca","optional":true}}]}}],
	  "containers":[{"name":"web","image":"nginx","envFrom":[{"secretRef":{"name":"web-env"}}],
	    "env":[{"name":"FLAG","valueFrom":{"configMapKeyRef":{"name":"flags","key":"f","optional":true}}}]}]}}`
	object := func(apiVersion, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"` + apiVersion + `","kind":"` + kind +
			`","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":3,"template":` + template + `}}`)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	cloneSet, deployment := object("apps.kruise.io/v1alpha1", "CloneSet"), object("apps/v1", "Deployment")
	got, err := interpreter.GetDependencies(cloneSet)
	if err != nil {
		t.Fatal(err)
	}
	want, err := resourceinterpreter.GetDependencies(deployment)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 9 || !reflect.DeepEqual(got, want) {
		t.Errorf("CloneSet %v\nDeployment %v", got, want)
	}
	gotOptional, err := interpreter.OptionalDependencies(cloneSet)
	if err != nil {
		t.Fatal(err)
	}
	wantOptional, _ := resourceinterpreter.OptionalDependencies(deployment)
	if len(wantOptional) != 3 || !reflect.DeepEqual(gotOptional, wantOptional) {
		t.Errorf("optional: CloneSet %v\nDeployment %v", gotOptional, wantOptional)
	}
}

// Retention guarded by the field's presence, and parallelism defaulting to
// 1 when unset (BroadcastJob); a status copy is not retained (Workflow).
func TestKarmadaRetentionAndDefaults(t *testing.T) {
	rules := compiled(t, "apps.kruise.io_v1alpha1_BroadcastJob.yaml")
	if len(rules.Retention) != 1 || rules.Retention[0].String() != "/spec/template/metadata/labels" {
		t.Errorf("retention %v", rules.Retention)
	}
	for _, c := range []struct {
		spec map[string]any
		want int32
	}{{map[string]any{}, 1}, {map[string]any{"parallelism": int64(5)}, 5}} {
		if n, err := rules.Replicas.EvalInt(map[string]any{"spec": c.spec}); err != nil || n != c.want {
			t.Errorf("spec %v: replicas %d %v, want %d", c.spec, n, err, c.want)
		}
	}
	if got, _ := rules.Health.EvalHealth(map[string]any{"status": map[string]any{"desired": int64(2), "failed": int64(1), "active": int64(1), "succeeded": int64(0)}}); got != workv1alpha1.ResourceUnhealthy {
		t.Errorf("a failed pod: %s, want Unhealthy", got)
	}
	if got, _ := rules.Health.EvalHealth(map[string]any{"status": map[string]any{"desired": int64(2), "failed": int64(0), "active": int64(2), "succeeded": int64(0)}}); got != workv1alpha1.ResourceHealthy {
		t.Errorf("running: %s, want Healthy", got)
	}

	ric, _, res := wrapCustomization(t, "argoproj.io_v1alpha1_Workflow.yaml")
	if got := ric.Spec.Customizations.Retention.FieldPaths; !slices.Equal(got, []string{"/spec/suspend"}) {
		t.Errorf("workflow retention %v, want [/spec/suspend]", got)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "/status is not retained") }) {
		t.Errorf("the dropped status copy is not noted: %v", res.Notes)
	}
	wf, errs := customization.Compile(ric)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	for phase, want := range map[string]workv1alpha1.ResourceHealth{"Running": workv1alpha1.ResourceHealthy, "Succeeded": workv1alpha1.ResourceHealthy,
		"Failed": workv1alpha1.ResourceUnhealthy, "Error": workv1alpha1.ResourceUnhealthy, "": workv1alpha1.ResourceUnhealthy} {
		if got, _ := wf.Health.EvalHealth(map[string]any{"status": map[string]any{"phase": phase}}); got != want {
			t.Errorf("workflow phase %q: %s, want %s", phase, got, want)
		}
	}
	if got, _ := wf.Health.EvalHealth(map[string]any{"spec": map[string]any{}}); got != workv1alpha1.ResourceUnhealthy {
		t.Errorf("workflow without status: %s, want Unhealthy (the script returns false)", got)
	}
}

// Lua fragments: what converts to what, and what is reported.
func TestLuaToCEL(t *testing.T) {
	cases := []struct {
		name, script, want, reason string
	}{
		{"field equals literal", `function InterpretHealth(o) return o.status.phase == "Running" end`,
			`(has(object.status.phase) && object.status.phase == "Running")`, ""},
		{"nil guard then compare", `function InterpretHealth(o)
  if o.status == nil then return false end
  return o.status.ready ~= nil and o.status.ready == true
end`, `has(object.status) && (has(object.status.ready) && ((has(object.status.ready) && object.status.ready == true)))`, ""},
		{"ordering negated", `function InterpretHealth(o)
  if o.status.a < o.spec.b then return false end
  return true
end`, `object.status.a >= object.spec.b`, ""},
		{"field names that are not CEL identifiers", `function InterpretHealth(o) return o.metadata.namespace == o.status["x-y"] end`,
			`object.metadata[?"namespace"] == object.status[?"x-y"]`, ""},
		{"loop", `function InterpretHealth(o) for i = 1, 3 do end return true end`, "", "it loops"},
		{"string library", `function InterpretHealth(o) return string.find(o.status.x, "a") ~= nil end`, "", "it calls a function"},
		{"arithmetic", `function InterpretHealth(o) return o.status.a + 1 > 2 end`, "", "it uses arithmetic"},
		{"nil on one path", `function InterpretHealth(o) if o.status then return true end end`, "", "it returns nil on some paths"},
		{"syntax error", `function InterpretHealth(o) return ( end`, "", "it Lua does not parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := convertHealthLua(c.script)
			if c.reason != "" {
				if err == nil || !strings.HasPrefix(reason(err), c.reason) {
					t.Errorf("got %q, %v; want reported: %s", got, err, c.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			ric := &configv1alpha1.ResourceInterpreterCustomization{Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
				Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.io/v1", Kind: "Thing"},
				Customizations: configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: got}},
			}}
			if errs := customization.Validate(ric); len(errs) > 0 {
				t.Errorf("does not compile: %v", errs.ToAggregate())
			}
		})
	}
}

// ReviseReplica converts for any single field; anything more is reported.
func TestReviseReplicaLua(t *testing.T) {
	p, err := convertReviseReplicaLua("function ReviseReplica(obj, n)\n obj.spec.parallelism = n\n return obj\nend")
	if err != nil || p != "/spec/parallelism" {
		t.Errorf("got %q %v", p, err)
	}
	p, err = convertReviseReplicaLua(`function ReviseReplica(obj, n) obj.spec["a/b"] = n return obj end`)
	if err != nil || p != "/spec/a~1b" {
		t.Errorf("escaping: got %q %v", p, err)
	}
	if _, err := convertReviseReplicaLua("function ReviseReplica(obj, n)\n obj.spec.replicas = n - 1\n return obj\nend"); err == nil {
		t.Error("arithmetic converted")
	}
}
