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
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The examples of issue 18 item 3 (preConditions, blockPredecessorSeconds,
// applyStrategy, conflictResolution) apply as written. Their names are
// their own, so they stay in namespace default.
func init() {
	for _, name := range []string{"application-failover-knobs.yaml", "apply-strategy.yaml"} {
		example, err := os.ReadFile(filepath.Join("../../examples", name))
		if err != nil {
			panic(err)
		}
		for i, doc := range strings.Split(string(example), "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			acceptedCases = append(acceptedCases, validationCase{name: fmt.Sprintf("examples/%s document %d", name, i+1), yaml: doc})
		}
	}
}
