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

import "strings"

// overriders.fieldOverrider (Karmada v1.12, validated by Karmada's webhook
// since v1.18): Karmada's examples are accepted; what its webhook refuses
// (json and yaml both or neither, a fieldPath or subPath that is not a JSON
// pointer, a value missing for add/replace or given for remove) the CRD
// refuses at apply, and so is a fieldPath at the object's identity.
func init() {
	acceptedCases = append(acceptedCases, fieldOverriderAccepted...)
	refusedCases = append(refusedCases, fieldOverriderRefused...)
}

func fieldOverriderPolicy(name, fieldOverrider string) string {
	return `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: ` + name + `
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: ConfigMap
    name: myconfigmap
  overrideRules:
  - overriders:
      fieldOverrider:
` + fieldOverrider
}

var fieldOverriderAccepted = []validationCase{
	{name: "fieldOverrider yaml (Karmada's user guide)", yaml: fieldOverriderPolicy("fo-guide", `
      - fieldPath: /data/config.yaml
        yaml:
        - subPath: /app/database/port
          operator: replace
          value: "3306"
`)},
	{name: "fieldOverrider json (Karmada's e2e), remove without value, subPath of the whole document", yaml: fieldOverriderPolicy("fo-e2e", `
      - fieldPath: /data/deploy.json
        json:
        - subPath: /spec/replicas
          operator: replace
          value: 5
        - subPath: /spec/template/spec/containers/-
          operator: add
          value: {name: nginx-helper, image: "nginx:1.19.1"}
        - subPath: /spec/template/spec/containers/0/image
          operator: remove
      - fieldPath: /data/other.json
        json:
        - subPath: ""
          operator: replace
          value: {a: 1}
`)},
}

var fieldOverriderRefused = []validationCase{
	{name: "fieldOverrider with both json and yaml", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0]", "sets both json and yaml"},
		yaml: fieldOverriderPolicy("fo-both", `
      - fieldPath: /data/config
        json:
        - {subPath: /a, operator: remove}
        yaml:
        - {subPath: /a, operator: remove}
`)},
	{name: "fieldOverrider with neither json nor yaml", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0]", "sets neither json nor yaml"},
		yaml: fieldOverriderPolicy("fo-neither", `
      - fieldPath: /data/config
        json: []
`)},
	{name: "fieldOverrider fieldPath not a JSON pointer", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0].fieldPath", "should match '^/'"},
		yaml: fieldOverriderPolicy("fo-path", `
      - fieldPath: invalidPath
        yaml:
        - {subPath: /a, operator: remove}
`)},
	{name: "fieldOverrider subPath not a JSON pointer", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].subPath", "should match"},
		yaml: fieldOverriderPolicy("fo-subpath", `
      - fieldPath: /data/config
        yaml:
        - {subPath: invalidSubPath, operator: remove}
`)},
	{name: "fieldOverrider replace without value", want: []string{"spec.overrideRules[].overriders.fieldOverrider[]", "value is required for the add and replace operators"},
		yaml: fieldOverriderPolicy("fo-novalue", `
      - fieldPath: /data/config
        json:
        - {subPath: /db-config, operator: replace}
`)},
	{name: "fieldOverrider remove with value", want: []string{"spec.overrideRules[].overriders.fieldOverrider[]", "value is not allowed for the remove operator"},
		yaml: fieldOverriderPolicy("fo-removevalue", `
      - fieldPath: /data/config
        yaml:
        - {subPath: /db-config, operator: remove, value: {db: new}}
`)},
	{name: "fieldOverrider unknown operator", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0].json[0].operator", "Unsupported value"},
		yaml: fieldOverriderPolicy("fo-move", `
      - fieldPath: /data/config
        json:
        - {subPath: /a, operator: move, value: 1}
`)},
	{name: "fieldOverrider at the object's name", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0]", "fieldPath may not change the object's identity"},
		yaml: fieldOverriderPolicy("fo-identity", `
      - fieldPath: /metadata/name
        yaml:
        - {subPath: "", operator: replace, value: [x]}
`)},
	{name: "fieldOverrider with 65 operations", want: []string{"spec.overrideRules[0].overriders.fieldOverrider[0].yaml", "must have at most 64 items"},
		yaml: fieldOverriderPolicy("fo-many", `
      - fieldPath: /data/config
        yaml:
`+strings.Repeat("        - {subPath: /a, operator: remove}\n", 65))},
}
