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

package apis_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// TestCRDQuantities: every quantity of Flotilla's CRDs (an int-or-string
// with a pattern) has quantities.CRDPattern and quantities.MaxLength, as
// hack/update-codegen.sh writes them, and none keeps controller-gen's
// Quantity pattern, which admits "1e-10000000".
func TestCRDQuantities(t *testing.T) {
	files, err := filepath.Glob("../../manifests/crds/*.flotilla.io_*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	var found []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(v any, path string)
		walk = func(v any, path string) {
			switch n := v.(type) {
			case map[string]any:
				if n["x-kubernetes-int-or-string"] == true && n["pattern"] != nil {
					found = append(found, filepath.Base(f)+":"+path)
					if n["pattern"] != quantities.CRDPattern {
						t.Errorf("%s %s: pattern %v, want quantities.CRDPattern %s", f, path, n["pattern"], quantities.CRDPattern)
					}
					if n["maxLength"] != float64(quantities.MaxLength) {
						t.Errorf("%s %s: maxLength %v, want %d", f, path, n["maxLength"], quantities.MaxLength)
					}
				}
				for k, c := range n {
					walk(c, path+"."+k)
				}
			case []any:
				for _, c := range n {
					walk(c, path+"[]")
				}
			}
		}
		walk(doc, "")
	}
	for _, want := range []string{".resourceSummary.properties.allocatable.", ".resourceSummary.properties.allocated.",
		".resourceSummary.properties.allocating.", ".replicaRequirements.properties.resourceRequest."} {
		ok := false
		for _, f := range found {
			ok = ok || strings.Contains(f, want)
		}
		if !ok {
			t.Errorf("no bounded quantity at %s; found %v", want, found)
		}
	}
}
