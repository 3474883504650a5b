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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// TestDocsExample: the customization docs/interpreter.md shows compiles
// and judges a healthy Rollout Healthy.
func TestDocsExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "interpreter.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "```yaml\n")
	if start < 0 {
		t.Fatal("no yaml block")
	}
	block := doc[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	var ric configv1alpha1.ResourceInterpreterCustomization
	if err := yaml.UnmarshalStrict([]byte(block), &ric); err != nil {
		t.Fatal(err)
	}
	rules, errs := Compile(&ric)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	o := obj(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","generation":3},
	  "spec":{"replicas":4,"analysis":{"templates":[{"templateName":"success-rate"}]},"template":{"spec":{"containers":[{"name":"c"}]}}},
	  "status":{"observedGeneration":"3","phase":"Healthy","availableReplicas":4}}`)
	if h, err := rules.Health.EvalHealth(o); err != nil || h != workv1alpha1.ResourceHealthy {
		t.Fatalf("health %s %v", h, err)
	}
	deps, err := rules.Dependencies.EvalList(o)
	if err != nil || len(deps) != 1 {
		t.Fatalf("deps %v %v", deps, err)
	}
	if _, err := rules.StatusReflection.EvalMap(o); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.StatusAggregation.EvalMap([]any{map[string]any{"clusterName": "a", "status": map[string]any{"availableReplicas": int64(2)}}}); err != nil {
		t.Fatal(err)
	}
}
