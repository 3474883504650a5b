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

package interpreters

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// Every rule of every shipped customization must be evaluated by some test
// of this package: exercised records each rule's field as it is evaluated,
// and TestMain fails a full run that left one out.
var (
	exercisedMu sync.Mutex
	exercised   = map[string]bool{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		rics, err := Load()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		var missed []string
		for _, ric := range rics {
			rules, errs := customization.Compile(ric)
			if len(errs) > 0 {
				continue // TestValidate reports it
			}
			for _, f := range ruleFields(ric, rules) {
				if !exercised[f] {
					missed = append(missed, f)
				}
			}
		}
		if len(missed) > 0 {
			fmt.Printf("FAIL: shipped rules no test evaluates: %s\n", strings.Join(missed, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

// ruleFields names every rule of a customization (name/field).
func ruleFields(ric *configv1alpha1.ResourceInterpreterCustomization, r *customization.Rules) []string {
	var out []string
	for _, e := range []*customization.Expression{r.Health, r.Replicas, r.PodTemplate, r.StatusReflection, r.StatusAggregation, r.Dependencies} {
		if e != nil {
			out = append(out, ric.Name+"/"+e.Field)
		}
	}
	if r.ReplicasPath != nil {
		out = append(out, ric.Name+"/spec.customizations.replicaRevision.replicasPath")
	}
	if r.Retention != nil {
		out = append(out, ric.Name+"/spec.customizations.retention.fieldPaths")
	}
	return out
}

func exercise(ric, f string) {
	exercisedMu.Lock()
	exercised[ric+"/"+f] = true
	exercisedMu.Unlock()
}

// shipped is one shipped customization, compiled, with the real CRD of its
// kind (test/crds) to check sample objects against.
type shipped struct {
	ric        *configv1alpha1.ResourceInterpreterCustomization
	rules      *customization.Rules
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

var crdFiles = map[string]string{
	"Rollout":         "argo-rollouts/rollout-crd.yaml",
	"FlinkDeployment": "flink-kubernetes-operator/flinkdeployments.flink.apache.org-v1.yml",
	"CloneSet":        "openkruise/apps.kruise.io_clonesets.yaml",
}

func load(t testing.TB, kind string) *shipped {
	t.Helper()
	rics, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, ric := range rics {
		if ric.Spec.Target.Kind != kind {
			continue
		}
		rules, errs := customization.Compile(ric)
		if len(errs) > 0 {
			t.Fatalf("%s does not compile: %v", ric.Name, errs.ToAggregate())
		}
		s := &shipped{ric: ric, rules: rules}
		s.loadCRD(t, crdFiles[kind], ric.Spec.Target.APIVersion)
		return s
	}
	t.Fatalf("no shipped customization for %s", kind)
	return nil
}

// loadCRD reads the schema of the target's version of a CRD of test/crds.
func (s *shipped) loadCRD(t testing.TB, file, apiVersion string) {
	t.Helper()
	s.loadCRDFile(t, filepath.Join("..", "..", "test", "crds", file), apiVersion)
}

// loadCRDFile reads the schema of a version of the CRD in path.
func (s *shipped) loadCRDFile(t testing.TB, path, apiVersion string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if crd.Spec.Group+"/"+v.Name != apiVersion {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		if s.structural, err = structuralschema.NewStructural(&internal); err != nil {
			t.Fatal(err)
		}
		if s.validator, _, err = apiservervalidation.NewSchemaValidator(&internal); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s has no version %s", path, apiVersion)
}

// object decodes a sample object (YAML) as an informer would (integers are
// int64) and checks it against the real CRD: the apiserver would keep every
// field (nothing pruned) and accept it (the schema validates), so the rules
// are tested on objects the real API can hold.
func (s *shipped) object(t *testing.T, src string) map[string]any {
	t.Helper()
	obj := decodeYAML(t, src)
	if s.structural != nil {
		pruned := pruning.PruneWithOptions(deepCopy(t, obj), s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if len(pruned) > 0 {
			t.Fatalf("sample object has fields the real CRD does not keep: %v", pruned)
		}
		if errs := apiservervalidation.ValidateCustomResource(field.NewPath("object"), obj, s.validator); len(errs) > 0 {
			t.Fatalf("sample object is not valid for the real CRD: %v", errs.ToAggregate())
		}
	}
	return obj
}

func decodeYAML(t testing.TB, src string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func deepCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	j, err := utiljson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *shipped) mark(e *customization.Expression) { exercise(s.ric.Name, e.Field) }

// TestValidate: every shipped customization passes the webhook's checks,
// every file is in the kustomization, and each targets a kind whose real
// CRD is vendored.
func TestValidate(t *testing.T) {
	rics, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(rics) < 2 {
		t.Fatalf("%d shipped customizations, want at least Rollout and FlinkDeployment", len(rics))
	}
	var kustomization struct{ Resources []string }
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	sort.Strings(kustomization.Resources)
	if diff := cmp.Diff(files, kustomization.Resources); diff != "" {
		t.Errorf("kustomization.yaml resources vs. the files here (-files +resources):\n%s", diff)
	}
	// As the hub's apiserver will check them: the RIC CRD's schema
	// (expression lengths, pointer patterns, required fields).
	crd := &shipped{}
	crd.loadCRDFile(t, filepath.Join("..", "crds", "config.flotilla.io_resourceinterpretercustomizations.yaml"),
		configv1alpha1.SchemeGroupVersion.String())
	names := map[string]bool{}
	for _, ric := range rics {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ric)
		if err != nil {
			t.Fatal(err)
		}
		delete(u, "status")
		if errs := apiservervalidation.ValidateCustomResource(field.NewPath(ric.Name), u, crd.validator); len(errs) > 0 {
			t.Errorf("%s: refused by the ResourceInterpreterCustomization CRD: %v", ric.Name, errs.ToAggregate())
		}
		if errs := customization.Validate(ric); len(errs) > 0 {
			t.Errorf("%s: %v", ric.Name, errs.ToAggregate())
		}
		target := ric.Spec.Target.APIVersion + "/" + ric.Spec.Target.Kind
		if names[target] {
			t.Errorf("two customizations for %s", target)
		}
		names[target] = true
		if _, ok := crdFiles[ric.Spec.Target.Kind]; !ok {
			t.Errorf("%s: no vendored CRD for %s in test/crds", ric.Name, target)
		}
		if ric.Labels["app.kubernetes.io/part-of"] != "flotilla" {
			t.Errorf("%s: want label app.kubernetes.io/part-of=flotilla", ric.Name)
		}
	}
}

// health evaluates the health rule on obj.
func (s *shipped) health(t *testing.T, obj map[string]any) string {
	t.Helper()
	s.mark(s.rules.Health)
	h, err := s.rules.Health.EvalHealth(obj)
	if err != nil {
		// An evaluation error means Unknown; a shipped rule should not
		// rely on it, so say so.
		return "error: " + err.Error()
	}
	return string(h)
}

func (s *shipped) reflect(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	s.mark(s.rules.StatusReflection)
	m, err := s.rules.StatusReflection.EvalMap(obj)
	if err != nil {
		t.Fatalf("statusReflection: %v", err)
	}
	return m
}

// aggregate evaluates statusAggregation on the clusters' statuses, given
// as cluster name, status pairs.
func (s *shipped) aggregate(t *testing.T, statuses ...any) map[string]any {
	t.Helper()
	s.mark(s.rules.StatusAggregation)
	var list []any
	for i := 0; i < len(statuses); i += 2 {
		list = append(list, map[string]any{"clusterName": statuses[i], "status": statuses[i+1]})
	}
	if list == nil {
		list = []any{}
	}
	m, err := s.rules.StatusAggregation.EvalMap(list)
	if err != nil {
		t.Fatalf("statusAggregation: %v", err)
	}
	return m
}

func mustYAML(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkShippedHealth: one health evaluation of each shipped rule on a
// realistic object (issue 33's goal: at most 10 µs).
func BenchmarkShippedHealth(b *testing.B) {
	for _, tc := range []struct{ kind, src string }{
		{"Rollout", rolloutSpec + "\nstatus:\n  phase: Progressing\n  observedGeneration: \"3\"\n  availableReplicas: 4\n"},
		{"FlinkDeployment", flinkSpec + flinkStatus("RUNNING", "STABLE")},
	} {
		s := load(b, tc.kind)
		obj := decodeYAML(b, tc.src)
		b.Run(tc.kind, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.rules.Health.EvalHealth(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
